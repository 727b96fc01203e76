/* znbd: the zone control socket, for what NBD cannot carry.
 *
 * Two parts: the control language (lib/control_lang.c), which executes
 * one request line against a device and writes its reply to a FILE, and
 * the Unix stream socket server (lib/control_server.c, mode 0600) that
 * feeds it request lines and sends the replies back.  The grammar and
 * reply formats are in man/znbd-zone-control.pod; requests:
 *   report [ZONE [COUNT]] | open|close|finish|reset ZONE|all |
 *   readonly ZONE | offline ZONE | online ZONE | stats |
 *   append ZONE LEN (followed by LEN bytes of data) |
 *   badblocks add|del LIST | badblocks list |
 *   drop-reply every N [KINDS] | drop-reply off | drop-reply |
 *   power-cut [after N] (write_cache=true)
 * Replies start "ok" or "error ERRNO-NAME message".  No NBD code here.
 */
#ifndef ZNBD_CONTROL_H
#define ZNBD_CONTROL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "znbd/dev.h"

/* ---- the language (lib/control_lang.c) ---- */

/* Longest request line, bytes (without its newline); longer ones are
 * refused with "error EINVAL request longer than ...". */
#define ZNBD_CONTROL_LINE_MAX 4096

/* Execute one request LINE (no newline needed; at most
 * ZNBD_CONTROL_LINE_MAX bytes) against D and write the reply lines to
 * OUT; offsets in replies are bytes.  A bad line gets an "error EINVAL
 * ..." reply and changes nothing.  Returns 0 if the reply was "ok", else
 * -1 with errno of the refusal: EINVAL (malformed, zone out of range, not
 * zoned, power-cut without write_cache, a request that D's front-end
 * cannot honour: znbd_dev_set_frontend), EIO (condition or type, as
 * null_blk), ETOOMANYREFS (open limit), EOVERFLOW (active limit),
 * ESHUTDOWN (a zone operation that met a power cut armed with "power-cut
 * after N"), ENOMEM. */
int znbd_control_exec(struct znbd_dev *d, const char *line, FILE *out);

/* Largest zone append the socket takes, bytes (NBD's usual request
 * limit). */
#define ZNBD_CONTROL_APPEND_MAX (32u << 20)

/* Whether LINE is an "append ZONE LEN" request.  Returns 1 with *LEN the
 * number of data bytes that follow the line on the socket; 0 if LINE is
 * another request; -1 if it is an append without a valid LEN (1 to
 * ZNBD_CONTROL_APPEND_MAX bytes): an "error EINVAL" reply is written to
 * OUT and, the data being impossible to skip, the connection must be
 * closed. */
int znbd_control_append_len(const char *line, uint64_t *len, FILE *out);

/* Execute "append ZONE LEN" with its LEN bytes of DATA: znbd_dev_append()
 * on zone ZONE, which assigns the offset at the write pointer and writes
 * under the zone lock.  Replies "ok OFFSET" (absolute byte offset of the
 * data) or "error ENAME ..."; a refused append changes nothing.  Returns
 * 0 or -1 with errno: EINVAL (malformed, zone out of range, not zoned,
 * LEN not a multiple of the block size), EIO (conventional zone, FULL,
 * READONLY or OFFLINE, or LEN beyond the room left below the capacity:
 * null_zone_write() with append; "does not fit" is said only then, a bad
 * sector in the range is named as such), ETOOMANYREFS, EOVERFLOW,
 * ESHUTDOWN (a power cut armed with "power-cut after N"), ENOMEM. */
int znbd_control_append(struct znbd_dev *d, const char *line, const void *data,
                        FILE *out);

/* A front-end's own counters for the `stats` reply: prints
 * " key=value" pairs (each with a leading space, no newline) to OUT;
 * called on the control socket's thread, so it must lock what it reads.
 * The core knows nothing of them (no server code in lib/). */
typedef void znbd_control_stats_fn(void *opaque, FILE *out);

/* znbd_control_exec, with FN(OPAQUE, OUT) (NULL: none) adding its fields
 * to the end of the `stats` line. */
int znbd_control_exec_stats(struct znbd_dev *d, const char *line, FILE *out,
                            znbd_control_stats_fn *fn, void *opaque);

/* ---- the socket server (lib/control_server.c) ---- */

struct znbd_control;

/* Listen on PATH (replacing a stale socket) and serve requests, each
 * client (up to 64 at once) on a thread of its own.  Start it after any fork.
 * Returns NULL with errno and a message naming PATH in ERR: EEXIST (PATH
 * is not a socket), EADDRINUSE (a server listens there), ENAMETOOLONG,
 * EINVAL (empty path), ENOMEM, or the errno of socket/bind/listen. */
struct znbd_control *znbd_control_start(struct znbd_dev *d, const char *path,
                                        char *err, size_t errlen);
/* znbd_control_start, with FN(OPAQUE, OUT) adding fields to `stats`. */
struct znbd_control *znbd_control_start_stats(struct znbd_dev *d,
                                              const char *path,
                                              znbd_control_stats_fn *fn,
                                              void *opaque, char *err,
                                              size_t errlen);

/* Stop the thread, close and unlink the socket.  C may be NULL. */
void znbd_control_stop(struct znbd_control *c);

#endif
