/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * worker.c - the lifecycle shared by the library's own threads (watchdog,
 * subscriber, events): start one with every signal blocked, and stop it
 * (flag, wake, join), then release its mutex and condition.
 *
 * A worker that sleeps somewhere other than its condition variable (the
 * subscriber sleeps in poll() on a pipe) gives an on_stop function that
 * wakes it; stop calls it with the mutex held.
 *
 * Threads: whoever starts and stops a worker (client open and close); the
 * worker thread itself reads `stop` under the worker's mutex.
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

int rlock__worker_init(rlock__worker *w) {
    w->stop = 0;
    w->started = 0;
    if (pthread_mutex_init(&w->mutex, NULL) != 0)
        return RLOCK_ENOMEM;
    if (rlock__cond_init(&w->wake) != 0) {
        pthread_mutex_destroy(&w->mutex);
        return RLOCK_ENOMEM;
    }
    w->initialised = 1;
    return RLOCK_OK;
}

int rlock__worker_start(rlock__worker *w, void *(*main_fn)(void *), void *arg) {
    int status = w->initialised ? RLOCK_OK : rlock__worker_init(w);
    if (status != RLOCK_OK)
        return status;
    w->arg = arg;
    if (rlock__start_thread(&w->thread, main_fn, arg) != RLOCK_OK)
        return RLOCK_ENOMEM;
    w->started = 1;
    return RLOCK_OK;
}

void rlock__worker_stop(rlock__worker *w) {
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mutex);
    w->stop = 1;
    pthread_cond_broadcast(&w->wake);
    if (w->on_stop != NULL)
        w->on_stop(w->arg);
    pthread_mutex_unlock(&w->mutex);
    pthread_join(w->thread, NULL);
    w->started = 0;
}

void rlock__worker_destroy(rlock__worker *w) {
    if (!w->initialised)
        return;
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mutex);
    w->initialised = 0;
}
