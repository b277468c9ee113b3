/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_watchdog.c - lease renewal: keeps watchdog locks alive, stops when
 * ownership ends (unlock, thread exit, close), and reports a lost lock
 * exactly once without re-creating it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Short watchdog timeout: renewal every WD/3. */
#define WD H_MS(600)

/* ---- tests ------------------------------------------------------------ */

static void test_keeps_lock(void **state) {
    struct h_lost lost;
    rlock_client *c;
    const char *name = h_unique_name("keep"), *name2 = h_unique_name("keep2");
    rlock *l, *l2;
    redisContext *r = h_redis();
    h_actor *b = h_actor_start();
    long long t_end, min_ttl = WD, min_ttl2 = WD;
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    l = h_get(c, name);
    l2 = h_get(c, name2);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(b, h_op_lock, l2), RLOCK_OK);

    /* Watch both keys for more than three watchdog timeouts. */
    t_end = h_now_ms() + 3 * WD + WD / 2;
    while (h_now_ms() < t_end) {
        long long t1 = h_pttl(r, name, strlen(name));
        long long t2 = h_pttl(r, name2, strlen(name2));
        if (t1 <= 0 || t2 <= 0)
            fail_msg("a watchdog lock expired: pttl %lld / %lld", t1, t2);
        assert_true(t1 <= WD && t2 <= WD);
        if (t1 < min_ttl)
            min_ttl = t1;
        if (t2 < min_ttl2)
            min_ttl2 = t2;
        h_sleep_ms(10);
    }
    print_message("      min PTTL %lld / %lld ms (watchdog timeout %lld, renewal every %lld)\n",
                  min_ttl, min_ttl2, (long long)WD, (long long)WD / 3);
    /* Renewed about every WD/3: it never gets anywhere near expiry. */
    assert_true(min_ttl > WD / 3);
    assert_true(min_ttl2 > WD / 3);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    H_ASSERT_LOCK_IS(r, name2, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_hold_count(l), 2);
    assert_int_equal(h_lost_count(&lost), 0);

    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l2), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(h_exists(r, name2, strlen(name2)), 0);
    assert_int_equal(h_lost_count(&lost), 0);

    h_actor_stop(b);
    rlock_free(l);
    rlock_free(l2);
    rlock_client_close(c);
    redisFree(r);
    assert_int_equal(h_lost_count(&lost), 0);
}

static void test_stops_after_unlock(void **state) {
    struct h_lost lost;
    rlock_client *a, *b;
    const char *name = h_unique_name("unlocked");
    rlock *la, *lb;
    redisContext *r = h_redis();
    long long sha0, t0, lease = H_MS(3000);
    (void)state;

    h_lost_init(&lost);
    a = h_open_cb(WD, 0, h_lost_cb, &lost);
    b = h_open(30000, 0);
    la = h_get(a, name);
    lb = h_get(b, name);

    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_sleep_ms(WD / 2); /* let a renewal or two happen */
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* Another client takes it with a lease; a's watchdog must not touch it,
     * and must stop sending renewals altogether. */
    H_ASSERT_RC(rlock_lock_lease(lb, lease), RLOCK_OK);
    t0 = h_now_ms();
    sha0 = h_commandstat_calls(r, "evalsha") + h_commandstat_calls(r, "eval");
    h_sleep_ms(3 * WD);
    {
        long long elapsed = h_now_ms() - t0;
        long long pttl = h_pttl(r, name, strlen(name));
        assert_true(pttl > 0);
        H_ASSERT_BETWEEN(pttl, 1, lease - elapsed + H_MS(50));
    }
    assert_int_equal(h_commandstat_calls(r, "evalsha") + h_commandstat_calls(r, "eval"), sha0);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(b), 1);
    assert_int_equal(h_lost_count(&lost), 0);
    H_ASSERT_RC(rlock_unlock(lb), RLOCK_OK);

    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    redisFree(r);
}

static void test_stops_after_thread_exit(void **state) {
    rlock_client *c = h_open(WD, 0);
    const char *name = h_unique_name("threadexit");
    const char *name2 = h_unique_name("threadexit2");
    rlock *l = h_get(c, name), *l2 = h_get(c, name2);
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    long long t_exit, gone;
    (void)state;

    /* The thread holds one lock twice and another once, then exits. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l2), RLOCK_OK);
    h_sleep_ms(WD / 2);
    h_actor_stop(a);
    t_exit = h_now_ms();

    /* The lock stays until its last lease runs out, then expires. */
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0 && h_exists(r, name2, strlen(name2)) == 0,
               WD + 700);
    gone = h_now_ms() - t_exit;
    print_message("      gone %lld ms after the thread exited (watchdog timeout %lld)\n", gone,
                  (long long)WD);
    H_ASSERT_BETWEEN(gone, 0, WD + H_MS(200));

    /* Nothing resurrects it, and others can take it. */
    h_sleep_ms(WD / 2);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    rlock_free(l2);
    rlock_client_close(c);
    redisFree(r);
}

static void test_stops_after_close(void **state) {
    struct h_lost lost;
    rlock_client *c;
    const char *name = h_unique_name("closed");
    rlock *l;
    redisContext *r = h_redis();
    long long t_close;
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_sleep_ms(WD / 2);
    t_close = h_now_ms();
    rlock_client_close(c);
    H_ASSERT_BETWEEN(h_now_ms() - t_close, 0, H_MS(1000));
    /* Close does not release: the key is still there, owned by us... */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    /* ...and expires within the watchdog timeout. */
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, WD + 700);
    H_ASSERT_BETWEEN(h_now_ms() - t_close, 0, WD + H_MS(200));
    assert_int_equal(h_lost_count(&lost), 0);
    rlock_free(l);
    redisFree(r);
}

/* A lease lock is not watchdog-renewed: its expiry is not a "loss". */
static void test_lease_lock_not_renewed_nor_reported(void **state) {
    struct h_lost lost;
    rlock_client *c;
    const char *name = h_unique_name("leaseexp");
    rlock *l;
    redisContext *r = h_redis();
    long long lease = WD / 2, t0;
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    l = h_get(c, name);
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_lock_lease(l, lease), RLOCK_OK);
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, lease + 1000);
    assert_true(h_now_ms() - t0 >= lease - 5);
    h_sleep_ms(WD);
    assert_int_equal(h_lost_count(&lost), 0);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * Checks the state after a loss of a hold of `held` holds: lost exactly once,
 * nothing re-created; the first unlock of a hold still believed two levels
 * deep says RLOCK_ELOST, the last RLOCK_ENOTOWNER.
 */
static void check_lost_once(struct h_lost *lost, rlock *l, redisContext *r, const char *name,
                            int key_should_exist, int held) {
    long long t_end;
    H_WAIT_FOR(h_lost_count(lost) >= 1, WD + 700);
    assert_string_equal(lost->last_name, name);

    /* Three more renewal rounds: still exactly one report, no resurrection. */
    t_end = h_now_ms() + WD + WD / 3;
    while (h_now_ms() < t_end) {
        if (!key_should_exist && h_exists(r, name, strlen(name)))
            fail_msg("lock %s was re-created after it was lost", name);
        h_sleep_ms(10);
    }
    assert_int_equal(h_lost_count(lost), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_unlock(l), held >= 2 ? RLOCK_ELOST : RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_lost_count(lost), 1);
}

static void test_lost_on_del(void **state) {
    struct h_lost lost;
    rlock_client *c;
    const char *name = h_unique_name("del");
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_sleep_ms(WD / 2);
    assert_int_equal(h_lost_count(&lost), 0);
    h_cmd_ok(r, "DEL %s", name);
    check_lost_once(&lost, l, r, name, 0, 2);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_false(pthread_equal(lost.thread, pthread_self()));

    /* The lock is usable again afterwards, and renewed again. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_sleep_ms(2 * WD);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_lost_count(&lost), 1);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

static void test_lost_replaced_by_other_owner(void **state) {
    struct h_lost lost;
    rlock_client *c;
    const char *name = h_unique_name("replaced");
    static const char other[] = "9b2f5d7c-aaaa-4bbb-8ccc-dddddddddddd:7";
    rlock *l;
    redisContext *r = h_redis();
    long long t0, pttl;
    char *field = NULL;
    long long v = 0;
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    /* Someone else (a Redisson client) now holds it with a long lease. */
    h_cmd_ok(r, "DEL %s", name);
    h_cmd_ok(r, "HSET %s %s 1", name, other);
    h_cmd_ok(r, "PEXPIRE %s %lld", name, (long long)H_MS(10000));
    t0 = h_now_ms();
    check_lost_once(&lost, l, r, name, 1, 1);

    /* The foreign hold is untouched: its field, its count, and its TTL was
     * never reset to our watchdog timeout. */
    assert_int_equal(h_lock_fields(r, name, strlen(name), &field, &v), 1);
    assert_string_equal(field, other);
    assert_int_equal(v, 1);
    free(field);
    pttl = h_pttl(r, name, strlen(name));
    H_ASSERT_BETWEEN(pttl, WD + 1, H_MS(10000) - (h_now_ms() - t0) + H_MS(50));
    h_cmd_ok(r, "DEL %s", name);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

static void test_lost_on_force_unlock(void **state) {
    struct h_lost lost;
    rlock_client *c, *admin;
    const char *name = h_unique_name("forced");
    rlock *l, *la;
    redisContext *r = h_redis();
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    admin = h_open(30000, 0);
    l = h_get(c, name);
    la = h_get(admin, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_force_unlock(la), 1);
    check_lost_once(&lost, l, r, name, 0, 1);
    /* The admin can take it now. */
    H_ASSERT_RC(rlock_try_lock(la, 0, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    assert_int_equal(h_lost_count(&lost), 1);

    rlock_free(l);
    rlock_free(la);
    rlock_client_close(c);
    rlock_client_close(admin);
    redisFree(r);
}

/* Losing a lock held by another thread is reported too. */
static void test_lost_other_thread(void **state) {
    struct h_lost lost;
    rlock_client *c;
    const char *name = h_unique_name("lostthr");
    rlock *l;
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    H_WAIT_FOR(h_lost_count(&lost) == 1, WD + 700);
    h_sleep_ms(WD);
    assert_int_equal(h_lost_count(&lost), 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_is_held, l), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);

    h_actor_stop(a);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/* The callback may call other rlock functions (here: is_locked). */
static void test_callback_may_call_rlock(void **state) {
    struct h_lost lost;
    rlock_client *c;
    const char *name = h_unique_name("cbcall");
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    h_lost_init(&lost);
    c = h_open_cb(WD, 0, h_lost_cb, &lost);
    l = h_get(c, name);
    lost.probe = l;
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    H_WAIT_FOR(h_lost_count(&lost) == 1, WD + 700);
    assert_int_equal(lost.probe_rc, 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/* Many locks in one client are all renewed. */
static void test_many_locks(void **state) {
    enum { N = 200 };
    rlock_client *c = h_open(WD, 0);
    rlock *locks[N];
    const char *names[N];
    redisContext *r = h_redis();
    long long sha0, sha1, t0, dt;
    int i;
    (void)state;

    for (i = 0; i < N; i++) {
        names[i] = h_unique_name("many");
        locks[i] = h_get(c, names[i]);
        H_ASSERT_RC(rlock_lock(locks[i]), RLOCK_OK);
    }
    sha0 = h_commandstat_calls(r, "evalsha");
    t0 = h_now_ms();
    h_sleep_ms(3 * WD);
    sha1 = h_commandstat_calls(r, "evalsha");
    dt = h_now_ms() - t0;
    for (i = 0; i < N; i++) {
        long long pttl = h_pttl(r, names[i], strlen(names[i]));
        if (pttl <= 0)
            fail_msg("lock %d of %d was not renewed (pttl %lld)", i, N, pttl);
    }
    print_message("      %d locks: %lld renewal script calls in %lld ms (~%lld rounds)\n", N,
                  sha1 - sha0, dt, dt / (WD / 3));
    for (i = 0; i < N; i++) {
        H_ASSERT_RC(rlock_unlock(locks[i]), RLOCK_OK);
        rlock_free(locks[i]);
    }
    rlock_client_close(c);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keeps_lock),
        cmocka_unit_test(test_stops_after_unlock),
        cmocka_unit_test(test_stops_after_thread_exit),
        cmocka_unit_test(test_stops_after_close),
        cmocka_unit_test(test_lease_lock_not_renewed_nor_reported),
        cmocka_unit_test(test_lost_on_del),
        cmocka_unit_test(test_lost_replaced_by_other_owner),
        cmocka_unit_test(test_lost_on_force_unlock),
        cmocka_unit_test(test_lost_other_thread),
        cmocka_unit_test(test_callback_may_call_rlock),
        cmocka_unit_test(test_many_locks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
