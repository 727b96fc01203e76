/* znbd: the scheduling policy of the threads that serve requests
 * (lib/sched.c). */
#ifndef ZNBD_SCHED_H
#define ZNBD_SCHED_H

/* Switch the calling thread to SCHED_BATCH (sched(7)), static priority 0;
 * threads it creates afterwards inherit the policy (pthread_create's
 * default PTHREAD_INHERIT_SCHED).  Call it from the main thread before
 * any serving thread starts.  Needs no privilege.  Returns 0, or -1 with
 * errno from sched_setscheduler(2) (EINVAL, EPERM); the caller may go on
 * without it, only speed is at stake. */
int znbd_sched_batch(void);

#endif
