/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * actor.c - actors (helper threads that run posted calls one at a time and
 * stay alive in between) and the h_op_* functions they commonly run.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actor.h"
#include "fail.h"

struct h_actor {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    h_actor_fn fn;
    void *arg;
    int posted; /* a call is pending or running */
    int done;   /* the last call returned */
    int quit;
    int running; /* actor_main has begun */
    long long result;
    long long finished_ms;
};

static void *actor_main(void *p) {
    h_actor *a = p;
    pthread_mutex_lock(&a->mu);
    a->running = 1;
    pthread_cond_broadcast(&a->cv);
    for (;;) {
        h_actor_fn fn;
        void *arg;
        long long r;
        while (!a->posted && !a->quit)
            pthread_cond_wait(&a->cv, &a->mu);
        if (!a->posted && a->quit)
            break;
        fn = a->fn;
        arg = a->arg;
        pthread_mutex_unlock(&a->mu);
        r = fn(arg);
        pthread_mutex_lock(&a->mu);
        a->result = r;
        a->finished_ms = h_now_ms();
        a->posted = 0;
        a->done = 1;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

h_actor *h_actor_start(void) {
    h_actor *a = calloc(1, sizeof *a);
    int rc;
    pthread_condattr_t ca;
    if (!a)
        abort();
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    a->done = 1;
    rc = pthread_create(&a->thread, NULL, actor_main, a);
    if (rc != 0)
        H_FAIL("pthread_create: %s", strerror(rc));
    /* Returns once the thread runs: a new thread allocates as it starts (ASan's thread
       set-up), and a child forked meanwhile (h_child_start) would inherit the allocator's
       lock held and hang at its first allocation (GCC 12's ASan has no fork handler). An
       idle actor allocates nothing. */
    pthread_mutex_lock(&a->mu);
    while (!a->running)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    return a;
}

void h_actor_post(h_actor *a, h_actor_fn fn, void *arg) {
    pthread_mutex_lock(&a->mu);
    if (a->posted) {
        pthread_mutex_unlock(&a->mu);
        H_FAIL("h_actor_post: the actor is busy");
    }
    a->fn = fn;
    a->arg = arg;
    a->posted = 1;
    a->done = 0;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

int h_actor_done(h_actor *a) {
    int d;
    pthread_mutex_lock(&a->mu);
    d = a->done;
    pthread_mutex_unlock(&a->mu);
    return d;
}

long long h_actor_wait_at(h_actor *a, long long timeout_ms, const char *file, int line) {
    long long limit = h_scaled(timeout_ms);
    struct timespec ts = h_timespec_in(CLOCK_MONOTONIC, limit);
    long long r;
    pthread_mutex_lock(&a->mu);
    while (!a->done) {
        if (pthread_cond_timedwait(&a->cv, &a->mu, &ts) == ETIMEDOUT && !a->done) {
            pthread_mutex_unlock(&a->mu);
            h_fail(file, line, "actor call still running after %lld ms", limit);
        }
    }
    r = a->result;
    pthread_mutex_unlock(&a->mu);
    return r;
}

long long h_actor_finished_ms(h_actor *a) {
    long long t;
    pthread_mutex_lock(&a->mu);
    t = a->finished_ms;
    pthread_mutex_unlock(&a->mu);
    return t;
}

long long h_actor_call_at(h_actor *a, h_actor_fn fn, void *arg, const char *file, int line) {
    h_actor_post(a, fn, arg);
    return h_actor_wait_at(a, 30000, file, line);
}

void h_actor_stop(h_actor *a) {
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->quit = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}

long long h_op_lock(void *lock) {
    return rlock_lock(lock);
}

long long h_op_unlock(void *lock) {
    return rlock_unlock(lock);
}

long long h_op_force_unlock(void *lock) {
    return rlock_force_unlock(lock);
}

long long h_op_is_locked(void *lock) {
    return rlock_is_locked(lock);
}

long long h_op_is_held(void *lock) {
    return rlock_is_held_by_current_thread(lock);
}

long long h_op_hold_count(void *lock) {
    return rlock_hold_count(lock);
}

long long h_op_try_lock(void *p) {
    struct h_try *t = p;
    return rlock_try_lock(t->lock, t->wait_ms, t->lease_ms);
}

long long h_op_lock_lease(void *p) {
    struct h_try *t = p;
    return rlock_lock_lease(t->lock, t->lease_ms);
}
