/* znbd-tcmu: the LIO configuration of one device in configfs
 * (/sys/kernel/config/target): a TCMU backstore core/user_0/NAME and a
 * tcm_loop target exporting it as LUN 0, so the kernel sees a SCSI disk. */
#ifndef ZNBD_TCMU_CONFIGFS_H
#define ZNBD_TCMU_CONFIGFS_H

#include <stddef.h>
#include <stdint.h>

/* Create and enable the backstore NAME of SIZE bytes and BLOCKSIZE-byte
 * blocks, with nl_reply_supported=-1 so enabling waits for no netlink
 * reply (tcmu_netlink_event_send()), first removing a stale setup of the
 * same NAME.  CMD_TIME_OUT (seconds; -1 keeps the kernel's 30) is the
 * backstore's attrib/cmd_time_out: a command not answered that long
 * fails in the kernel (tcmu_check_expired_ring_cmd()).  Puts the UIO
 * device's name ("uio3") in UIO.  Returns 0, or -1 with errno and a
 * message naming the configfs file in ERR. */
int tcmu_backstore_create(const char *name, uint64_t size, uint32_t blocksize,
                          int cmd_time_out, char *uio, size_t uiolen, char *err,
                          size_t errlen);

/* Export backstore NAME through tcm_loop (nexus first, then the LUN
 * link: a LUN without a nexus is never scanned).  The kernel probes the
 * disk while this runs: the ring must be served.  Returns 0 or -1 as
 * above. */
int tcmu_loop_create(const char *name, char *err, size_t errlen);

/* Remove the tcm_loop target of NAME, then (BACKSTORE) its backstore, in
 * the reverse order of creation; missing pieces are fine.  Returns 0, or
 * -1 with errno and a message in ERR for the first step that failed. */
int tcmu_loop_remove(const char *name, char *err, size_t errlen);
int tcmu_backstore_remove(const char *name, char *err, size_t errlen);

#endif
