/*
 * worker.c - the lifecycle shared by the library's own threads: start one
 * with every signal blocked, and stop it (flag, wake, join, release).
 *
 * Threads: whoever starts and stops a worker (client open and close); the
 * worker thread itself reads `stop` under the worker's mutex. The watchdog
 * and event threads are workers; the subscriber thread sleeps in poll() on a
 * pipe instead of a condition variable and uses rlock__start_thread alone.
 */
#include <signal.h>

#include "internal.h"

/* Library threads must not take the application's signals. */
int rlock__start_thread(pthread_t *thread, void *(*main_fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(thread, NULL, main_fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc == 0 ? RLOCK_OK : RLOCK_ENOMEM;
}

int rlock__worker_start(rlock__worker *w, void *(*main_fn)(void *), void *arg) {
    w->stop = 0;
    if (pthread_mutex_init(&w->mutex, NULL) != 0)
        return RLOCK_ENOMEM;
    if (rlock__cond_init(&w->wake) != 0) {
        pthread_mutex_destroy(&w->mutex);
        return RLOCK_ENOMEM;
    }
    if (rlock__start_thread(&w->thread, main_fn, arg) != RLOCK_OK) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mutex);
        return RLOCK_ENOMEM;
    }
    w->started = 1;
    return RLOCK_OK;
}

void rlock__worker_stop(rlock__worker *w) {
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mutex);
    w->stop = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mutex);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mutex);
    w->started = 0;
}
