/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * actor.h - actors: a helper thread that runs the functions the main thread
 * posts to it, one at a time, and stays alive in between (so it can hold a
 * lock while the main thread checks things). Results come back as long long.
 * Actors fail the test only from the main thread (see harness.h).
 */
#ifndef RLOCK_TEST_HARNESS_ACTOR_H
#define RLOCK_TEST_HARNESS_ACTOR_H

#include "rlock.h"

typedef struct h_actor h_actor;
typedef long long (*h_actor_fn)(void *arg);

h_actor *h_actor_start(void);
/* Starts fn(arg) on the actor; it must be idle. Returns at once. */
void h_actor_post(h_actor *a, h_actor_fn fn, void *arg);
/* 1 once the posted call has returned. */
int h_actor_done(h_actor *a);
/* Waits up to timeout_ms (scaled) for the posted call; fails the test if it
 * has not returned by then. Returns its result. */
long long h_actor_wait_at(h_actor *a, long long timeout_ms, const char *file, int line);
#define h_actor_wait(a, timeout_ms) h_actor_wait_at((a), (timeout_ms), __FILE__, __LINE__)
/* h_now_ms() when the last call returned. */
long long h_actor_finished_ms(h_actor *a);
/* post + wait (30 s). */
long long h_actor_call_at(h_actor *a, h_actor_fn fn, void *arg, const char *file, int line);
#define h_actor_call(a, fn, arg) h_actor_call_at((a), (fn), (arg), __FILE__, __LINE__)
/* Waits (without bound) for a posted call, then ends the thread and frees a.
 * NULL is a no-op. */
void h_actor_stop(h_actor *a);

/* Actor functions for common calls (arg is an rlock *). */
long long h_op_lock(void *lock);
long long h_op_unlock(void *lock);
long long h_op_force_unlock(void *lock);
long long h_op_is_locked(void *lock);
long long h_op_is_held(void *lock);
long long h_op_hold_count(void *lock);
/* arg is a struct h_try *. */
struct h_try {
    rlock *lock;
    long long wait_ms;
    long long lease_ms;
};
long long h_op_try_lock(void *h_try);
long long h_op_lock_lease(void *h_try);

#endif /* RLOCK_TEST_HARNESS_ACTOR_H */
