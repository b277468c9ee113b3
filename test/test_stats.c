/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stats.c - rlock_client_stats (issue 14): each counter and gauge moves
 * as include/rlock.h says for lock, try_lock (BUSY, waited), unlock, hand-offs
 * in the process and through Redis, renewals and their failures, losses and
 * errors by status; the histograms count what they should, in the buckets
 * rlock_stats_bucket_us names; a caller built against an older, smaller
 * struct gets exactly the fields it has. Each test opens clients of its own,
 * so every count starts at zero.
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

#define WD H_MS(900)

/* The histogram bucket a duration of us falls in (as the header defines them). */
static int bucket_of(long long us) {
    int i = 0;
    while (rlock_stats_bucket_us(i) >= 0 && us > rlock_stats_bucket_us(i))
        i++;
    return i;
}

static unsigned long long buckets_sum(const rlock_histogram *h) {
    unsigned long long n = 0;
    for (int i = 0; i < RLOCK_STATS_BUCKETS; i++)
        n += h->buckets[i];
    return n;
}

/* lock, re-entry, unlock twice: acquisitions at once, one hold of a known length. */
static void test_acquire_and_hold(void **state) {
    rlock_client *c = h_open(WD, 0);
    rlock *l = h_get(c, h_unique_name("stats-hold"));
    (void)state;

    rlock_stats st = h_stats(c);
    assert_int_equal(st.acquisitions, 0);
    assert_int_equal(st.held_locks, 0);
    assert_true(st.connections >= 1); /* the first pool connection */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK); /* re-entry */
    st = h_stats(c);
    assert_int_equal(st.acquisitions, 2);
    assert_int_equal(st.acquired_immediately, 2);
    assert_int_equal(st.acquired_after_wait, 0);
    assert_int_equal(st.held_locks, 1);
    assert_int_equal(st.pool_in_use, 0);
    assert_int_equal(st.waiting_threads, 0);
    h_sleep_ms(30);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_stats(c).hold_time.count, 0); /* still held once */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    st = h_stats(c);
    assert_int_equal(st.unlocks, 2);
    assert_int_equal(st.held_locks, 0);
    assert_int_equal(st.hold_time.count, 1);
    assert_int_equal(buckets_sum(&st.hold_time), 1);
    assert_true(st.hold_time.sum_us >= 30000);
    assert_true(st.hold_time.sum_us < (unsigned long long)H_MS(2000) * 1000);
    assert_int_equal(st.hold_time.buckets[bucket_of((long long)st.hold_time.sum_us)], 1);
    assert_int_equal(st.wait_time.count, 0);
    for (int i = 0; i < RLOCK_STATS_ERROR_SLOTS; i++)
        assert_int_equal(st.errors[i], 0);
    rlock_free(l);
    rlock_client_close(c);
}

/* BUSY, and errors counted by status: ENOTOWNER, EREDIS, ELOST. */
static void test_busy_and_errors(void **state) {
    rlock_client *a = h_open(WD, 0), *b = h_open(WD, 0);
    const char *name = h_unique_name("stats-busy"), *str = h_unique_name("stats-string");
    rlock *la = h_get(a, name), *lb = h_get(b, name), *ls = h_get(a, str);
    redisContext *r = h_redis();
    (void)state;

    H_ASSERT_RC(rlock_lock(lb), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(la, 0, 5000), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(la, 50, 5000), RLOCK_BUSY); /* waited, and still busy */
    H_ASSERT_RC(rlock_unlock(la), RLOCK_ENOTOWNER);
    h_cmd_ok(r, "SET %s x", str);
    H_ASSERT_RC(rlock_lock(ls), RLOCK_EREDIS); /* WRONGTYPE */
    rlock_stats st = h_stats(a);
    assert_int_equal(st.busy, 2);
    assert_int_equal(st.acquisitions, 0);
    assert_int_equal(st.wait_time.count, 0); /* only waits that got the lock */
    assert_int_equal(st.errors[-RLOCK_ENOTOWNER], 1);
    assert_int_equal(st.errors[-RLOCK_EREDIS], 1);
    assert_int_equal(st.errors[-RLOCK_ELOST], 0);
    /* Arguments refused before the call reaches the client are not counted. */
    rlock *none;
    H_ASSERT_RC(rlock_get(a, "", &none), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(a, NULL, &none), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(a, name, NULL), RLOCK_EINVAL);
    assert_int_equal(h_stats(a).errors[-RLOCK_EINVAL], 0);

    /* b loses its hold behind its back (DEL): its next lock returns RLOCK_ELOST. */
    h_cmd_ok(r, "DEL %s", name);
    H_WAIT_FOR(h_stats(b).losses == 1, 3 * WD);
    H_ASSERT_RC(rlock_lock(lb), RLOCK_ELOST);
    st = h_stats(b);
    assert_int_equal(st.errors[-RLOCK_ELOST], 1);
    assert_int_equal(st.losses, 1);
    assert_int_equal(st.held_locks, 0);
    assert_int_equal(st.acquisitions, 1);

    rlock_free(la);
    rlock_free(lb);
    rlock_free(ls);
    h_cmd_ok(r, "DEL %s", str);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/*
 * A multi-lock and a Redlock count like the single locks they are made of:
 * one acquisition and one unlock per member (on the member's client), the
 * hold time of each member hold, and a call that returned RLOCK_BUSY or an
 * error once -- not the member attempts made inside it.
 */
static void test_multi_and_redlock(void **state) {
    rlock_client *a = h_open(WD, 0), *b = h_open(WD, 0);
    const char *n1 = h_unique_name("stats-m1"), *n2 = h_unique_name("stats-m2");
    const char *n3 = h_unique_name("stats-m3"), *rn = h_unique_name("stats-red");
    rlock *m1 = h_get(a, n1), *m2 = h_get(a, n2), *m3 = h_get(a, n3), *other = h_get(b, n2);
    rlock *members[] = {m1, m2, m3};
    rlock_multi *m = NULL;
    rlock_redlock *rl = NULL, *rl_b = NULL;
    (void)state;

    H_ASSERT_RC(rlock_multi_new(members, 3, &m), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_lock(m), RLOCK_OK); /* one fan-out takes the three */
    rlock_stats st = h_stats(a);
    assert_int_equal(st.acquisitions, 3);
    assert_int_equal(st.acquired_immediately, 3);
    assert_int_equal(st.held_locks, 3);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    st = h_stats(a);
    assert_int_equal(st.unlocks, 3);
    assert_int_equal(st.hold_time.count, 3);
    assert_int_equal(st.held_locks, 0);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_ENOTOWNER);
    assert_int_equal(h_stats(a).errors[-RLOCK_ENOTOWNER], 1); /* one call */

    H_ASSERT_RC(rlock_lock(other), RLOCK_OK); /* b holds a member */
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, 5000), RLOCK_BUSY);
    st = h_stats(a);
    assert_int_equal(st.busy, 1);
    assert_int_equal(st.acquisitions, 3);
    assert_int_equal(st.unlocks, 3);
    H_ASSERT_RC(rlock_unlock(other), RLOCK_OK);

    rlock_client *clients_a[] = {a}, *clients_b[] = {b};
    H_ASSERT_RC(rlock_redlock_new(clients_a, 1, rn, &rl), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_new(clients_b, 1, rn, &rl_b), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, 10000, NULL), RLOCK_OK);
    st = h_stats(a);
    assert_int_equal(st.acquisitions, 4);
    assert_int_equal(st.held_locks, 1);
    H_ASSERT_RC(rlock_redlock_try_lock(rl_b, 0, 10000, NULL), RLOCK_BUSY);
    assert_int_equal(h_stats(b).busy, 1);
    H_ASSERT_RC(rlock_redlock_unlock(rl), RLOCK_OK);
    st = h_stats(a);
    assert_int_equal(st.unlocks, 4);
    assert_int_equal(st.hold_time.count, 4);
    assert_int_equal(st.held_locks, 0);
    assert_int_equal(st.acquisitions, st.acquired_immediately + st.acquired_after_wait);

    rlock_redlock_free(rl);
    rlock_redlock_free(rl_b);
    rlock_multi_free(m);
    rlock_free(m1);
    rlock_free(m2);
    rlock_free(m3);
    rlock_free(other);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* A waiter of another client: waited, through Redis; the waiting gauge while it waits. */
static void test_wait_remote(void **state) {
    rlock_client *a = h_open(WD, 0), *b = h_open(WD, 0);
    const char *name = h_unique_name("stats-remote");
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    h_actor *waiter = h_actor_start();
    struct h_try t = {lb, H_MS(10000), 10000};
    (void)state;

    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_stats(b).waiting_threads == 1, 5000);
    assert_int_equal(h_stats(a).waiting_threads, 0);
    h_sleep_ms(100);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 10000), RLOCK_OK);
    rlock_stats st = h_stats(b);
    assert_int_equal(st.waiting_threads, 0);
    assert_int_equal(st.acquisitions, 1);
    assert_int_equal(st.acquired_after_wait, 1);
    assert_int_equal(st.acquired_immediately, 0);
    assert_int_equal(st.handoffs_remote, 1);
    assert_int_equal(st.handoffs_local, 0);
    assert_int_equal(st.wait_time.count, 1);
    assert_true(st.wait_time.sum_us >= 100000);
    assert_true(st.connections >= 2); /* a pool connection and the subscriber's */
    assert_int_equal(h_stats(a).handoffs_remote, 0);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lb), RLOCK_OK);

    h_actor_stop(waiter);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* A waiter of the same client: the lock handed over in the process. */
static void test_wait_local(void **state) {
    rlock_client *c = h_open(WD, 0);
    const char *name = h_unique_name("stats-local");
    rlock *l = h_get(c, name);
    h_actor *holder = h_actor_start(), *waiter = h_actor_start();
    struct h_try t = {l, H_MS(10000), RLOCK_LEASE_WATCHDOG};
    (void)state;

    H_ASSERT_RC((int)h_actor_call(holder, h_op_lock, l), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_stats(c).waiting_threads == 1, 5000);
    /* The gauge counts the waiter from its first attempt; a hand-off goes only
     * to a waiter already asleep (after that attempt and its subscription). */
    h_sleep_ms(300);
    H_ASSERT_RC((int)h_actor_call(holder, h_op_unlock, l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 10000), RLOCK_OK);
    rlock_stats st = h_stats(c);
    assert_int_equal(st.acquisitions, 2);
    assert_int_equal(st.acquired_after_wait, 1);
    assert_int_equal(st.handoffs_local, 1);
    assert_int_equal(st.handoffs_remote, 0);
    assert_int_equal(st.held_locks, 1);
    assert_int_equal(st.hold_time.count, 1); /* the holder's hold ended by the hand-off */
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_stats(c).hold_time.count, 2);

    h_actor_stop(holder);
    h_actor_stop(waiter);
    rlock_free(l);
    rlock_client_close(c);
}

/*
 * Renewals counted per lock and round; a round Redis cannot answer in time
 * (CLIENT PAUSE WRITE for longer than the command timeout) counts a failed
 * renewal per lock, and no loss while the lease lasts.
 */
static void test_renewals(void **state) {
    long long wd = H_MS(1500);
    rlock_client *c = h_open(wd, (int)H_MS(150));
    rlock *l1 = h_get(c, h_unique_name("stats-renew1"));
    rlock *l2 = h_get(c, h_unique_name("stats-renew2"));
    redisContext *r = h_redis();
    (void)state;

    H_ASSERT_RC(rlock_lock(l1), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    H_WAIT_FOR(h_stats(c).renewals >= 4, 3 * wd); /* two rounds of two locks */
    assert_int_equal(h_stats(c).renewals % 2, 0);
    assert_int_equal(h_stats(c).renewal_failures, 0);
    h_cmd_ok(r, "CLIENT PAUSE %lld WRITE", wd / 2);
    H_WAIT_FOR(h_stats(c).renewal_failures >= 2, 2 * wd);
    unsigned long long renewed = h_stats(c).renewals;
    H_WAIT_FOR(h_stats(c).renewals >= renewed + 2, 2 * wd); /* back once the pause ends */
    rlock_stats st = h_stats(c);
    assert_int_equal(st.losses, 0);
    assert_int_equal(st.held_locks, 2);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    redisFree(r);
    rlock_free(l1);
    rlock_free(l2);
    rlock_client_close(c);
}

/* A command in flight holds a pooled connection: pool_in_use says so while it lasts. */
static void test_pool_in_use(void **state) {
    rlock_client *c = h_open(H_MS(5000), (int)H_MS(5000)); /* a lease longer than the pause */
    rlock *l = h_get(c, h_unique_name("stats-pool"));
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_stats(c).pool_in_use, 0);
    h_cmd_ok(r, "CLIENT PAUSE %lld WRITE", H_MS(1000));
    h_actor_post(a, h_op_lock, l);
    H_WAIT_FOR(h_stats(c).pool_in_use == 1, 900);
    H_ASSERT_RC((int)h_actor_wait(a, 5000), RLOCK_OK);
    assert_int_equal(h_stats(c).pool_in_use, 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_OK);
    h_actor_stop(a);
    redisFree(r);
    rlock_free(l);
    rlock_client_close(c);
}

/* The buckets' bounds: the 1-2-5 series of the header, then +Inf. */
static void test_bucket_bounds(void **state) {
    static const long long want[] = {10,      20,      50,       100,      200,      500,
                                     1000,    2000,    5000,     10000,    20000,    50000,
                                     100000,  200000,  500000,   1000000,  2000000,  5000000,
                                     10000000, 20000000, 50000000, 100000000};
    (void)state;
    assert_int_equal(sizeof want / sizeof want[0], RLOCK_STATS_BUCKETS - 1);
    for (int i = 0; i < RLOCK_STATS_BUCKETS - 1; i++)
        assert_int_equal(rlock_stats_bucket_us(i), want[i]);
    assert_int_equal(rlock_stats_bucket_us(RLOCK_STATS_BUCKETS - 1), -1);
    assert_int_equal(rlock_stats_bucket_us(-1), -1);
    assert_int_equal(rlock_stats_bucket_us(RLOCK_STATS_BUCKETS), -1);
}

/* The first fields of rlock_stats, as a binary built against an older header had them. */
typedef struct older_stats {
    size_t struct_size;
    unsigned long long acquisitions;
    unsigned long long acquired_immediately;
} older_stats;

/* An older, smaller struct gets its fields and nothing past them; bad arguments are refused. */
static void test_struct_size(void **state) {
    rlock_client *c = h_open(WD, 0);
    rlock *l = h_get(c, h_unique_name("stats-size"));
    unsigned char buf[sizeof(rlock_stats) + 16];
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    memset(buf, 0xa5, sizeof buf);
    older_stats *old = (older_stats *)(void *)buf;
    old->struct_size = sizeof(older_stats);
    H_ASSERT_RC(rlock_client_stats(c, (rlock_stats *)(void *)old), RLOCK_OK);
    assert_int_equal(old->struct_size, sizeof(older_stats));
    assert_int_equal(old->acquisitions, 1);
    assert_int_equal(old->acquired_immediately, 1);
    for (size_t i = sizeof(older_stats); i < sizeof buf; i++)
        if (buf[i] != 0xa5)
            fail_msg("byte %zu past the caller's struct was written", i);

    rlock_stats st = {.struct_size = sizeof(size_t)};
    H_ASSERT_RC(rlock_client_stats(c, &st), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "struct_size"));
    H_ASSERT_RC(rlock_client_stats(c, NULL), RLOCK_EINVAL);
    st.struct_size = sizeof st;
    H_ASSERT_RC(rlock_client_stats(NULL, &st), RLOCK_EINVAL);
    rlock_client_close(c); /* the handle keeps the struct alive */
    H_ASSERT_RC(rlock_client_stats(c, &st), RLOCK_ECLOSED);
    rlock_free(l);
}

/*
 * A struct_size that ends inside a field (a garbage or miscomputed size) gets
 * the whole fields before it and not a byte of the cut one; a huge one gets
 * the library's whole struct, and says so.
 */
static void test_struct_size_fields(void **state) {
    rlock_client *c = h_open(WD, 0);
    rlock *l = h_get(c, h_unique_name("stats-cut"));
    unsigned char buf[sizeof(rlock_stats) + 16];
    rlock_stats *st = (rlock_stats *)(void *)buf;
    size_t cut = offsetof(rlock_stats, acquired_immediately) + 4;
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    memset(buf, 0xa5, sizeof buf);
    st->struct_size = cut;
    H_ASSERT_RC(rlock_client_stats(c, st), RLOCK_OK);
    assert_int_equal(st->struct_size, offsetof(rlock_stats, acquired_immediately));
    assert_int_equal(st->acquisitions, 1);
    for (size_t i = offsetof(rlock_stats, acquired_immediately); i < sizeof buf; i++)
        if (buf[i] != 0xa5)
            fail_msg("byte %zu of a field the caller's struct_size cuts was written", i);

    memset(buf, 0xa5, sizeof buf);
    st->struct_size = (size_t)-1;
    H_ASSERT_RC(rlock_client_stats(c, st), RLOCK_OK);
    assert_int_equal(st->struct_size, sizeof(rlock_stats));
    assert_int_equal(st->unlocks, 1);
    for (size_t i = sizeof(rlock_stats); i < sizeof buf; i++)
        assert_int_equal(buf[i], 0xa5);
    rlock_free(l);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_and_hold), cmocka_unit_test(test_busy_and_errors),
        cmocka_unit_test(test_wait_remote),      cmocka_unit_test(test_wait_local),
        cmocka_unit_test(test_renewals),         cmocka_unit_test(test_pool_in_use),
        cmocka_unit_test(test_bucket_bounds),    cmocka_unit_test(test_struct_size),
        cmocka_unit_test(test_multi_and_redlock), cmocka_unit_test(test_struct_size_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
