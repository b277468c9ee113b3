/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_handoff_offered.c - in-process hand-offs (rlock_config.local_handoffs):
 * an offer in flight is seen through. A waiter whose deadline passes while
 * its TRANSFER is running still gets the lock; a waiter cancelled then gives
 * the lock back at once (nothing left held until the lease); a waiter woken
 * by close while offered ends cleanly either way. CLIENT PAUSE WRITE holds
 * the TRANSFER script in Redis to open that window deterministically.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/*
 * Opens the window between offer and outcome: CLIENT PAUSE WRITE holds every
 * script in Redis, so the holder's TRANSFER waits pause_ms while the waiter
 * is already chosen.
 */
struct offered {
    rlock_client *c;
    redisContext *r;
    rlock *lock;
    h_actor *holder;
    const char *name;
};

static void offered_setup(struct offered *o, const char *prefix) {
    o->c = h_open_handoffs(30000, 4);
    o->name = h_unique_name(prefix);
    o->r = h_redis();
    o->lock = h_get(o->c, o->name);
    o->holder = h_actor_start();
    H_ASSERT_RC((int)h_actor_call(o->holder, h_op_lock, o->lock), RLOCK_OK);
}

/* Starts the holder's unlock with scripts paused for pause_ms. */
static void offered_unlock(struct offered *o, long long pause_ms) {
    h_cmd_ok(o->r, "CLIENT PAUSE %lld WRITE", pause_ms);
    h_actor_post(o->holder, h_op_unlock, o->lock);
}

static void offered_teardown(struct offered *o) {
    h_actor_stop(o->holder);
    rlock_free(o->lock);
    redisFree(o->r);
    rlock_client_close(o->c);
}

/* The waiter's wait ends while the lock is being handed to it: it gets it. */
static void test_handoff_deadline_while_offered(void **state) {
    struct offered o;
    h_actor *waiter = h_actor_start();
    struct h_try t;
    long long t0, took;
    (void)state;

    offered_setup(&o, "handoff-deadline");
    t = (struct h_try){o.lock, 400, -1};
    t0 = h_now_ms();
    h_actor_post(waiter, h_op_try_lock, &t);
    h_scripts_quiet(o.r, 150, 10000);
    offered_unlock(&o, 800);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    took = h_actor_finished_ms(waiter) - t0;
    print_message("      try_lock(wait 400 ms) returned RLOCK_OK after %lld ms "
                  "(the hand-off to it was held up by an 800 ms pause)\n", took);
    H_ASSERT_BETWEEN(took, 400, H_MS(5000));
    H_ASSERT_RC((int)h_actor_wait(o.holder, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(o.r, o.name, rlock_client_id(o.c), 1);
    assert_int_equal(h_actor_call(waiter, h_op_is_held, o.lock), 1);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, o.lock), RLOCK_OK);
    assert_int_equal(h_exists(o.r, o.name, strlen(o.name)), 0);

    h_actor_stop(waiter);
    offered_teardown(&o);
}

#if !defined(__SANITIZE_ADDRESS__) /* google/sanitizers#1399, as in test_cancel.c */
static void *lock_thread(void *lock) {
    return (void *)(intptr_t)rlock_lock(lock);
}
#endif

/* A waiter cancelled while offered gives the lock back at once. */
static void test_handoff_cancel_while_offered(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    print_message("      skipped under ASan (false positive on pthread_cancel unwinding "
                  "through pthread_cleanup_push)\n");
    skip();
#else
    struct offered o;
    pthread_t th;
    void *ret = NULL;
    long long pub0, t0;

    offered_setup(&o, "handoff-cancel");
    assert_int_equal(pthread_create(&th, NULL, lock_thread, o.lock), 0);
    h_scripts_quiet(o.r, 150, 10000);
    pub0 = h_commandstat_calls(o.r, "publish");
    offered_unlock(&o, 500);
    h_sleep_ms(100);
    t0 = h_now_ms();
    assert_int_equal(pthread_cancel(th), 0);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    print_message("      cancelled waiter ended %lld ms after the cancel "
                  "(it waited for the paused TRANSFER, then released)\n", h_now_ms() - t0);
    H_ASSERT_RC((int)h_actor_wait(o.holder, 5000), RLOCK_OK);
    /* Given back at once (not left until its 30 s lease), with a wake-up. */
    assert_int_equal(h_exists(o.r, o.name, strlen(o.name)), 0);
    assert_int_equal(h_commandstat_calls(o.r, "publish") - pub0, 1);
    H_WAIT_FOR(h_numsub(o.r, o.name, strlen(o.name)) == 0, 2000);
    /* The client goes on working. */
    H_ASSERT_RC(rlock_try_lock(o.lock, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(o.lock), RLOCK_OK);

    offered_teardown(&o);
#endif
}

/* Close while a waiter is offered: both calls end, nothing hangs or leaks. */
static void test_handoff_close_while_offered(void **state) {
    struct offered o;
    h_actor *waiter = h_actor_start();
    long long rc, t0;
    (void)state;

    offered_setup(&o, "handoff-close");
    h_actor_post(waiter, h_op_lock, o.lock);
    h_scripts_quiet(o.r, 150, 10000);
    offered_unlock(&o, 400);
    h_sleep_ms(100);
    t0 = h_now_ms();
    rlock_client_close(o.c);
    rc = h_actor_wait(waiter, 5000);
    print_message("      close took %lld ms; the offered waiter returned %s, the unlock %s\n",
                  h_now_ms() - t0, rlock_status_name((int)rc),
                  rlock_status_name((int)h_actor_wait(o.holder, 5000)));
    /* Either the hand-off completed before close aborted it, or it did not. */
    assert_true(rc == RLOCK_OK || rc == RLOCK_ECLOSED);
    h_actor_stop(waiter);
    h_actor_stop(o.holder);
    rlock_free(o.lock);
    redisFree(o.r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoff_deadline_while_offered),
        cmocka_unit_test(test_handoff_cancel_while_offered),
        cmocka_unit_test(test_handoff_close_while_offered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
