/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_handoff_waiter.c - in-process hand-offs (rlock_config.local_handoffs):
 * what the waiter gets. When a thread's last unlock finds another thread of
 * the same client asleep waiting for the lock, the TRANSFER script moves the
 * lock to it directly: the waiter returns RLOCK_OK holding the lock (its own
 * owner field, count 1, the TTL of *its* lease), nothing is published, and it
 * takes no round trip of its own; a watchdog waiter is then renewed, a lease
 * waiter is not. Only the last hold hands over; a receiver that exits lets
 * the lock expire; a waiter of "{X}" is never handed "X" (same channel).
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

/* A watchdog waiter gets the lock straight from the unlocking thread. */
static void test_handoff_watchdog_waiter(void **state) {
    rlock_client *c = h_open_handoffs(900, 4);
    const char *name = h_unique_name("handoff");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *waiter = h_actor_start();
    long long pub0, scripts0, t0;
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, l);
    h_scripts_quiet(r, 200, 10000);
    /* Start the count right after the holder's renewal (every 300 ms here): the
     * next one then falls outside the few ms counted, even under valgrind. */
    h_wait_renewal(r, name, 100, h_scaled(3000));
    pub0 = h_commandstat_calls(r, "publish");
    scripts0 = h_script_calls(r);
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    print_message("      waiter returned %lld ms after the unlock began\n",
                  h_actor_finished_ms(waiter) - t0);
    /* One script (TRANSFER) moved it; nothing was published. */
    assert_int_equal(h_script_calls(r) - scripts0, 1);
    assert_int_equal(h_commandstat_calls(r, "publish") - pub0, 0);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_int_equal(h_actor_call(waiter, h_op_is_held, l), 1);
    assert_int_equal(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 1, 900);
    /* The caller no longer holds it. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    /* The new owner is renewed: still held three watchdog timeouts later. */
    h_sleep_ms(2700);
    assert_int_equal(h_actor_call(waiter, h_op_is_held, l), 1);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 1, 900);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(h_commandstat_calls(r, "publish") - pub0, 1);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* A lease waiter gets its own lease and no renewal. */
static void test_handoff_lease_waiter(void **state) {
    rlock_client *c = h_open_handoffs(30000, 4);
    const char *name = h_unique_name("handoff-lease");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *waiter = h_actor_start();
    struct h_try t = {l, 10000, 700};
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 20000, 30000);
    h_actor_post(waiter, h_op_try_lock, &t);
    h_scripts_quiet(r, 200, 10000);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 1, 700);
    /* Not renewed: gone after its lease. */
    H_WAIT_FOR(!h_exists(r, name, strlen(name)), 3000);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_ENOTOWNER);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* A reentrant holder's partial unlock hands nothing over. */
static void test_handoff_only_last_hold(void **state) {
    rlock_client *c = h_open_handoffs(30000, 4);
    const char *name = h_unique_name("handoff-reentrant");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *waiter = h_actor_start();
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, l);
    h_scripts_quiet(r, 200, 10000);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_hold_count(l), 1);
    h_sleep_ms(100);
    assert_false(h_actor_done(waiter));
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void *lock_then_exit(void *lock) {
    return (void *)(intptr_t)rlock_lock(lock); /* exits holding it */
}

/*
 * A thread that queued (no attempt of its own), got the lock by a hand-off
 * and exited without unlocking: renewal stops and the lock expires.
 */
static void test_handoff_receiver_exits(void **state) {
    rlock_client *c = h_open_handoffs(900, 4);
    const char *name = h_unique_name("handoff-exit");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *first = h_actor_start();
    pthread_t th;
    void *ret = NULL;
    long long t0;
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_actor_post(first, h_op_lock, l);
    h_scripts_quiet(r, 150, 10000);
    /* Queues behind the first waiter without an attempt of its own. */
    assert_int_equal(pthread_create(&th, NULL, lock_then_exit, l), 0);
    h_sleep_ms(30); /* well inside its first sleep (100 ms): no attempt yet */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(first, 5000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(first, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(pthread_join(th, &ret), 0);
    H_ASSERT_RC((int)(intptr_t)ret, RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    t0 = h_now_ms();
    H_WAIT_FOR(!h_exists(r, name, strlen(name)), 5000);
    print_message("      the exited receiver's lock expired %lld ms after its thread ended "
                  "(watchdog timeout 900 ms)\n", h_now_ms() - t0);

    h_actor_stop(first);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/*
 * Locks "X" and "{X}" share one channel (Redisson's naming). A waiter for
 * "{X}" must never be handed "X", nor queue "X" callers behind it.
 */
static void test_handoff_same_channel_other_lock(void **state) {
    rlock_client *c = h_open_handoffs(30000, 4);
    const char *name = h_unique_name("handoff-chan");
    char braced[256];
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    rlock *la, *lb;
    size_t clen_a, clen_b;
    char *ca, *cb;
    (void)state;

    snprintf(braced, sizeof braced, "{%s}", name);
    ca = h_channel(name, strlen(name), &clen_a);
    cb = h_channel(braced, strlen(braced), &clen_b);
    assert_true(clen_a == clen_b && memcmp(ca, cb, clen_a) == 0);
    la = h_get(c, name);
    lb = h_get(c, braced);
    h_cmd_ok(r, "HSET %s other-owner:1 1", braced);
    h_cmd_ok(r, "PEXPIRE %s 30000", braced);

    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, lb);
    h_scripts_quiet(r, 200, 10000);
    /* Not queued behind the "{X}" waiter: re-entry and a second thread work as usual. */
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    h_sleep_ms(200);
    assert_false(h_actor_done(waiter));
    assert_int_equal(h_cmd_int(r, "HEXISTS %s other-owner:1", braced), 1);
    H_ASSERT_RC(rlock_try_lock(la, 1000, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    assert_false(h_actor_done(waiter));

    h_cmd_ok(r, "DEL %s", braced);
    h_cmd_ok(r, "PUBLISH %b 0", cb, clen_b);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, braced, rlock_client_id(c), 1);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lb), RLOCK_OK);

    free(ca);
    free(cb);
    h_actor_stop(waiter);
    rlock_free(la);
    rlock_free(lb);
    redisFree(r);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoff_watchdog_waiter),
        cmocka_unit_test(test_handoff_lease_waiter),
        cmocka_unit_test(test_handoff_only_last_hold),
        cmocka_unit_test(test_handoff_receiver_exits),
        cmocka_unit_test(test_handoff_same_channel_other_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
