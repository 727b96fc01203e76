/* znbd lib-internal: the one way lib/ stops a helper thread that sleeps
 * on a condition variable (the parked-write sweeper, the directory
 * store's writeback thread): set its stop flag under its lock, wake it,
 * and join it if it was started. */
#ifndef ZNBD_LIB_STOP_THREAD_H
#define ZNBD_LIB_STOP_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* Set *STOP under LOCK and signal CV; then, when STARTED, join THREAD
 * (which must see *STOP under LOCK and return).  No errors. */
static inline void
znbd_stop_thread(pthread_mutex_t *lock, pthread_cond_t *cv, bool *stop,
                 bool started, pthread_t thread)
{
  pthread_mutex_lock(lock);
  *stop = true;
  pthread_cond_signal(cv);
  pthread_mutex_unlock(lock);
  if (started)
    pthread_join(thread, NULL);
}

#endif
