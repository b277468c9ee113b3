/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_wait_wakeup.c - a waiter woken by an unlock: of the same client or
 * another, with its acquisition sent ahead by the subscriber thread; locks
 * sharing one channel ("X" and "{X}"); a Redisson-style foreign holder's
 * DEL + PUBLISH; sharded pub/sub (SSUBSCRIBE/SPUBLISH) on one server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* ---- wake-up by unlock ------------------------------------------------ */

static void wake_by_unlock(int same_client, int use_lock) {
    rlock_client *c = h_open(30000, 0), *c2 = same_client ? c : h_open(30000, 0);
    const char *name = h_unique_name("wake");
    rlock *lh = h_get(c, name), *lw = h_get(c2, name);
    redisContext *r = h_redis();
    h_actor *holder = h_actor_start(), *waiter = h_actor_start();
    /* static: a failed test may leave the waiter running with it. */
    static struct h_try t;
    long long t0, dt;

    t.lock = lw;
    t.wait_ms = H_MS(20000);
    t.lease_ms = -1;
    H_ASSERT_RC((int)h_actor_call(holder, h_op_lock, lh), RLOCK_OK);
    if (use_lock)
        h_actor_post(waiter, h_op_lock, lw);
    else
        h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) >= 1, 2000);
    h_scripts_quiet(r, 100, 5000);
    assert_false(h_actor_done(waiter));

    t0 = h_now_ms();
    H_ASSERT_RC((int)h_actor_call(holder, h_op_unlock, lh), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    dt = h_actor_finished_ms(waiter) - t0;
    print_message("      %s client, %s: waiter acquired %lld ms after the unlock (TTL 30 s)\n",
                  same_client ? "same" : "other", use_lock ? "lock()" : "try_lock()", dt);
    H_ASSERT_BETWEEN(dt, 0, H_MS(500));
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c2), 1);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lw), RLOCK_OK);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);

    h_actor_stop(holder);
    h_actor_stop(waiter);
    rlock_free(lh);
    rlock_free(lw);
    redisFree(r);
    if (c2 != c)
        rlock_client_close(c2);
    rlock_client_close(c);
}

/*
 * pubsub_mode SHARDED on one server (Redis >= 7): the waiter SSUBSCRIBEs (no
 * classic subscriber), the unlock SPUBLISHes, and the waiter is woken at once.
 * Redis 6.2 has no sharded pub/sub: the open is RLOCK_EINVAL, saying so.
 */
static void test_wake_sharded_one_server(void **state) {
    rlock_config cfg;
    rlock_client *holder_c = NULL, *waiter_c = NULL;
    const char *name = h_unique_name("sharded");
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    long long t0;
    (void)state;
    h_config(&cfg);
    cfg.pubsub_mode = RLOCK_PUBSUB_SHARDED;
    if (h_server_major(r) < 7) {
        H_ASSERT_RC(rlock_client_open(&cfg, &holder_c), RLOCK_EINVAL);
        const char *why = rlock_last_error();
        if (strstr(why, "sharded") == NULL && strstr(why, "SHARDED") == NULL)
            fail_msg("the refusal does not name sharded pub/sub: %s", why);
        h_actor_stop(waiter);
        redisFree(r);
        return;
    }
    H_ASSERT_RC(rlock_client_open(&cfg, &holder_c), RLOCK_OK);
    H_ASSERT_RC(rlock_client_open(&cfg, &waiter_c), RLOCK_OK);
    rlock *lh = h_get(holder_c, name), *lw = h_get(waiter_c, name);
    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, lw);
    H_WAIT_FOR(h_numsub_kind(r, name, strlen(name), 1) >= 1, 2000);
    assert_int_equal(h_numsub_kind(r, name, strlen(name), 0), 0);
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    print_message("      sharded: waiter acquired %lld ms after the unlock (TTL 30 s)\n",
                  h_actor_finished_ms(waiter) - t0);
    H_ASSERT_BETWEEN(h_actor_finished_ms(waiter) - t0, 0, H_MS(500));
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lw), RLOCK_OK);
    h_actor_stop(waiter);
    rlock_free(lh);
    rlock_free(lw);
    rlock_client_close(waiter_c);
    rlock_client_close(holder_c);
    redisFree(r);
}

static void test_wake_same_client(void **state) {
    (void)state;
    wake_by_unlock(1, 0);
    wake_by_unlock(1, 1);
}

static void test_wake_other_client(void **state) {
    (void)state;
    wake_by_unlock(0, 0);
    wake_by_unlock(0, 1);
}

/*
 * The unlock message's wake-up comes with the waiter's ACQUIRE already sent
 * by the subscriber thread: one script per wake-up, none after it. With the
 * script cache flushed, that early EVALSHA gets NOSCRIPT and the waiter falls
 * back to an ordinary attempt (EVAL), still acquiring at once.
 */
static void test_wake_sends_acquire_ahead(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("ahead");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    static struct h_try t; /* may outlive a failed test */
    long long scripts0, evals0, t0;
    int round;
    (void)state;

    t.lock = l;
    t.wait_ms = H_MS(20000);
    t.lease_ms = -1;
    for (round = 0; round < 2; round++) {
        int flush = round == 1;
        h_foreign_lock(r, name, 30000);
        h_actor_post(waiter, h_op_try_lock, &t);
        H_WAIT_FOR(h_numsub(r, name, strlen(name)) >= 1, 2000);
        h_scripts_quiet(r, 100, 5000);
        if (flush)
            h_cmd_ok(r, "SCRIPT FLUSH");
        scripts0 = h_script_calls(r);
        evals0 = h_commandstat_calls(r, "eval");
        t0 = h_now_ms();
        h_foreign_unlock(r, name);
        H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
        print_message("      %s: acquired %lld ms after the unlock message, %lld script calls\n",
                      flush ? "scripts flushed" : "normal", h_actor_finished_ms(waiter) - t0,
                      h_script_calls(r) - scripts0);
        H_ASSERT_BETWEEN(h_actor_finished_ms(waiter) - t0, 0, H_MS(100));
        H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
        if (flush) { /* EVALSHA ahead: NOSCRIPT; the attempt's EVALSHA: NOSCRIPT; EVAL */
            H_ASSERT_BETWEEN(h_script_calls(r) - scripts0, 3, 3);
            H_ASSERT_BETWEEN(h_commandstat_calls(r, "eval") - evals0, 1, 1);
        } else {
            H_ASSERT_BETWEEN(h_script_calls(r) - scripts0, 1, 1);
        }
        H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
    }

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/*
 * Locks "X" and "{X}" share one channel (Redisson's naming). The unlock
 * message of one must wake a waiter of that lock even when a waiter of the
 * other one has slept longer.
 */
static void test_shared_channel_wakeups(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("sharedchan");
    char braced[256];
    rlock *lx, *lb;
    redisContext *r = h_redis();
    h_actor *wx = h_actor_start(), *wb = h_actor_start();
    static struct h_try tx, tb; /* may outlive a failed test */
    long long t0;
    int round;
    (void)state;

    snprintf(braced, sizeof braced, "{%s}", name);
    lx = h_get(c, name);
    lb = h_get(c, braced);
    for (round = 0; round < 2; round++) {
        /* Round 0: the "{X}" waiter is the older one; round 1: the "X" waiter. */
        const char *first = round == 0 ? braced : name;
        const char *second = round == 0 ? name : braced;
        h_actor *wfirst = round == 0 ? wb : wx, *wsecond = round == 0 ? wx : wb;
        struct h_try *tfirst = round == 0 ? &tb : &tx, *tsecond = round == 0 ? &tx : &tb;
        *tfirst = (struct h_try){round == 0 ? lb : lx, H_MS(20000), -1};
        *tsecond = (struct h_try){round == 0 ? lx : lb, H_MS(20000), -1};
        h_foreign_lock(r, first, 30000);
        h_foreign_lock(r, second, 30000);
        h_actor_post(wfirst, h_op_try_lock, tfirst);
        h_scripts_quiet(r, 150, 5000);
        h_actor_post(wsecond, h_op_try_lock, tsecond);
        h_scripts_quiet(r, 150, 5000);

        /* Unlock the lock of the younger waiter: it must wake at once. */
        t0 = h_now_ms();
        h_foreign_unlock(r, second);
        H_ASSERT_RC((int)h_actor_wait(wsecond, 2000), RLOCK_OK);
        print_message("      round %d: waiter of \"%s\" acquired %lld ms after its unlock "
                      "(the other lock's waiter slept longer)\n", round,
                      round == 0 ? "X" : "{X}", h_actor_finished_ms(wsecond) - t0);
        assert_false(h_actor_done(wfirst));
        H_ASSERT_RC((int)h_actor_call(wsecond, h_op_unlock, tsecond->lock), RLOCK_OK);
        h_foreign_unlock(r, first);
        H_ASSERT_RC((int)h_actor_wait(wfirst, 2000), RLOCK_OK);
        H_ASSERT_RC((int)h_actor_call(wfirst, h_op_unlock, tfirst->lock), RLOCK_OK);
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
        assert_int_equal(h_exists(r, braced, strlen(braced)), 0);
    }

    h_actor_stop(wx);
    h_actor_stop(wb);
    rlock_free(lx);
    rlock_free(lb);
    redisFree(r);
    rlock_client_close(c);
}

/* A Redisson-style holder: BUSY, then its DEL + PUBLISH wakes our waiter. */
static void foreign_holder(const char *name) {
    rlock_client *c = h_open(30000, 0);
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    static struct h_try t; /* may outlive a failed test */
    long long t0, dt;

    t.lock = l;
    t.wait_ms = H_MS(20000);
    t.lease_ms = -1;
    h_foreign_lock(r, name, 30000);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_is_locked(l), 1);

    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) >= 1, 2000);
    h_scripts_quiet(r, 100, 5000);
    assert_false(h_actor_done(waiter));

    t0 = h_now_ms();
    h_foreign_unlock(r, name);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    dt = h_actor_finished_ms(waiter) - t0;
    print_message("      foreign unlock of \"%.60s\": waiter acquired after %lld ms\n", name, dt);
    H_ASSERT_BETWEEN(dt, 0, H_MS(100));
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 25000, 30000);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_foreign_holder(void **state) {
    char name[300];
    (void)state;
    foreign_holder(h_unique_name("foreign"));
    /* With a hash tag in the name the channel has no extra braces. */
    snprintf(name, sizeof name, "{%s}", h_unique_name("foreign"));
    foreign_holder(name);
    snprintf(name, sizeof name, "%s{x}", h_unique_name("foreign"));
    foreign_holder(name);
}

/* ---- when a subscription ends ------------------------------------------- */

#define LINGER_MS 200 /* RLOCK__LINGER_MS, engine/channels.h */

/* Waits (20 ms steps, 5 s) until script calls pass n: the waiter's attempt ran. */
static void wait_scripts_past(redisContext *r, long long n) {
    H_WAIT_FOR(h_script_calls(r) > n, 5000);
}

/* The connections CLIENT LIST on r shows for the rlock client c (pool and subscriber). */
static h_conns conns_of(redisContext *r, rlock_client *c) {
    return h_client_list(r, rlock_client_id(c));
}

/*
 * Lets the waiter actor wait for name, held by another owner (t, posted),
 * until it sleeps subscribed; returns the SUBSCRIBE count by then.
 */
static long long wait_subscribed(redisContext *r, h_actor *waiter, struct h_try *t,
                                 const char *name) {
    long long scripts = h_script_calls(r);
    h_actor_post(waiter, h_op_try_lock, t);
    wait_scripts_past(r, scripts); /* its attempt: BUSY; it joins the channel next */
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 2000);
    h_scripts_quiet(r, 100, 5000);
    return h_commandstat_calls(r, "subscribe");
}

/*
 * A last waiter that leaves with the lock ends its subscription at once:
 * the unlock that follows is heard by nobody here (lingering, this client
 * would wake its subscriber thread for its own unlock's message, on the
 * next hand-off's critical path). The subscriber's connection stays for
 * LINGER_MS: the next wait subscribes again (one SUBSCRIBE) on it, with no
 * new connection. That check needs the second wait to begin within half
 * the linger: it is skipped, and said so, on a machine too slow for that
 * (valgrind).
 */
static void test_subscription_ends_with_the_lock(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("unsub");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    static struct h_try t; /* may outlive a failed test */
    (void)state;

    t = (struct h_try){l, H_MS(20000), -1};
    h_foreign_lock(r, name, 30000);
    long long first_subscribes = wait_subscribed(r, waiter, &t, name);
    h_conns waiting = conns_of(r, c);
    assert_int_equal(waiting.named_sub, 1);
    h_foreign_unlock(r, name);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    long long got_ms = h_actor_finished_ms(waiter);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
    long long unsub_ms = h_now_ms() - got_ms;
    h_conns holding = conns_of(r, c);
    print_message("      unsubscribed %lld ms after the waiter returned with the lock; "
                  "connections %d (subscribed %d) waiting, %d (subscribed %d) now\n", unsub_ms,
                  waiting.named, waiting.named_sub, holding.named, holding.named_sub);
    assert_int_equal(holding.named_sub, 0);
    /* At once, not after a linger (unless the machine is slowed: valgrind). */
    if (h_scaled(LINGER_MS) == LINGER_MS)
        assert_true(unsub_ms < LINGER_MS / 2);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);

    /* Waiting again soon: SUBSCRIBE again, on the connection that lingered. */
    long long conns_before = h_info_stat(r, "total_connections_received");
    long long since_ms = h_now_ms() - got_ms;
    h_foreign_lock(r, name, 30000);
    long long subscribes = wait_subscribed(r, waiter, &t, name) - first_subscribes;
    long long new_conns = h_info_stat(r, "total_connections_received") - conns_before;
    print_message("      second wait, %lld ms after the first lock: %lld SUBSCRIBE, %lld new "
                  "connections\n", since_ms, subscribes, new_conns);
    assert_int_equal(subscribes, 1);
    if (since_ms < LINGER_MS / 2) /* its linger began after the waiter returned */
        assert_int_equal(new_conns, 0);
    else
        print_message("      (slow machine: the lingering connection is not checked)\n");
    h_foreign_unlock(r, name);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    /* Nobody waits: unsubscribed, and the connection goes too after its linger. */
    H_WAIT_FOR(conns_of(r, c).named_sub == 0 && conns_of(r, c).named < waiting.named, 2000);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/*
 * The same when the lock comes by a hand-off from a thread of this client:
 * the waiter leaves with it, and the channel is unsubscribed at once.
 */
static void test_subscription_ends_with_a_handoff(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("unsub-handoff");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *holder = h_actor_start(), *waiter = h_actor_start();
    static struct h_try t; /* may outlive a failed test */
    (void)state;

    H_ASSERT_RC((int)h_actor_call(holder, h_op_lock, l), RLOCK_OK);
    t = (struct h_try){l, H_MS(20000), -1};
    wait_subscribed(r, waiter, &t, name);
    long long publishes = h_commandstat_calls(r, "publish");
    H_ASSERT_RC((int)h_actor_call(holder, h_op_unlock, l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    long long got_ms = h_actor_finished_ms(waiter);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
    long long unsub_ms = h_now_ms() - got_ms;
    print_message("      handed over (%lld PUBLISH), unsubscribed %lld ms after the waiter "
                  "returned with the lock\n", h_commandstat_calls(r, "publish") - publishes,
                  unsub_ms);
    assert_int_equal(h_commandstat_calls(r, "publish"), publishes); /* a hand-off, no unlock */
    if (h_scaled(LINGER_MS) == LINGER_MS)
        assert_true(unsub_ms < LINGER_MS / 2);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);

    h_actor_stop(holder);
    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/*
 * A last waiter that leaves without the lock (its wait ran out) leaves the
 * subscription for LINGER_MS: the lock is still held, likely waited on
 * again, and a wait within that time sends no SUBSCRIBE (its join finds the
 * subscription confirmed). Then it is dropped. The first check needs the
 * second wait to begin within half the linger: skipped, and said so, on a
 * machine too slow for that (valgrind); the second always holds.
 */
static void test_subscription_lingers_after_timeout(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("linger");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    static struct h_try t; /* may outlive a failed test */
    (void)state;

    h_foreign_lock(r, name, 30000);
    t = (struct h_try){l, H_MS(300), -1};
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_try_lock, &t), RLOCK_BUSY);
    long long left_ms = h_actor_finished_ms(waiter);
    long long subscribes = h_commandstat_calls(r, "subscribe");
    long long numsub = h_numsub(r, name, strlen(name));
    long long since_left = h_now_ms() - left_ms;
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_try_lock, &t), RLOCK_BUSY);
    long long again = h_commandstat_calls(r, "subscribe") - subscribes;
    print_message("      second wait began %lld ms after the first ended, subscribed %lld "
                  "then: %lld new SUBSCRIBE (want none)\n", since_left, numsub, again);
    if (since_left < LINGER_MS / 2) {
        assert_int_equal(numsub, 1);
        assert_int_equal(again, 0);
    } else
        print_message("      (slow machine: the SUBSCRIBE count is not checked)\n");
    left_ms = h_actor_finished_ms(waiter);
    /* Nobody waits any more: unsubscribed after the linger. */
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
    print_message("      unsubscribed %lld ms after the last waiter left\n", h_now_ms() - left_ms);
    h_foreign_unlock(r, name);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wake_same_client),
        cmocka_unit_test(test_wake_other_client),
        cmocka_unit_test(test_wake_sharded_one_server),
        cmocka_unit_test(test_foreign_holder),
        cmocka_unit_test(test_wake_sends_acquire_ahead),
        cmocka_unit_test(test_shared_channel_wakeups),
        cmocka_unit_test(test_subscription_ends_with_the_lock),
        cmocka_unit_test(test_subscription_ends_with_a_handoff),
        cmocka_unit_test(test_subscription_lingers_after_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
