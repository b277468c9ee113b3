/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_routing.c - rlock on a Redis Cluster (redis-cluster:// url, 3
 * masters + 3 replicas of the test's own; harness/cluster.c), through the
 * public API only: each lock goes to the master of its name's slot.
 *
 *   every master     locks whose names hash to each of the three masters,
 *                    held at once and reentrantly, each renewed by the
 *                    watchdog (one renewal per slot: a script over several
 *                    slots gets CROSSSLOT) and none reported lost: on the owning master the
 *                    key is the Redisson hash ("<uuid>:<tid>" -> count, a
 *                    PTTL within the lease), and no other master has a key
 *                    in that slot; is_locked, is_held, hold_count, remain_ttl
 *                    agree; unlock deletes it
 *   awkward names    names with braces and hash tags ("{user1}:lock",
 *                    "a{}b", "a{b", "}{", "{}", "a}b{c}", ...): whose key
 *                    and channel may lie in different slots (the CROSSSLOT
 *                    trap of topology.md section 2): lock, unlock, and a
 *                    waiter of another client woken promptly, for each
 *   open             the url's seeds: opening with one seed down works; a
 *                    malformed cluster url is RLOCK_EINVAL
 *
 * One cluster per test (about 2 s to start). Durations are scaled by
 * TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The key of name is on its slot's owner, held by client id with count,
 * with a PTTL in (0, wd]; no other master has a key in the slot. */
static void check_key(const h_cluster *hc, const char *name, const char *id, long long count,
                      long long wd) {
    int slot = h_slot(name, strlen(name));
    h_server *owner = h_cluster_owner(hc, slot), *masters[H_CLUSTER_NODES];
    int n = h_cluster_masters(hc, masters);
    assert_non_null(owner);
    redisContext *c = h_server_redis(owner);
    H_ASSERT_LOCK_IS(c, name, id, count);
    H_ASSERT_BETWEEN(h_pttl(c, name, strlen(name)), 1, wd);
    redisFree(c);
    for (int m = 0; m < n; m++)
        assert_int_equal(h_cluster_keys_in_slot(masters[m], slot), masters[m] == owner);
}

static void test_every_master(void **state) {
    h_cluster *hc = *state;
    h_cseen *seen = h_cseen_new("A");
    long long wd = H_MS(3000); /* renewed every second */
    rlock_client *a = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, seen);
    h_server *masters[H_CLUSTER_NODES];
    char names[3][128];
    rlock *locks[3];
    long long ttl = 0;
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    for (int m = 0; m < 3; m++) {
        h_cluster_name_on(hc, masters[m], h_unique_name("every"), names[m], sizeof names[m]);
        locks[m] = h_get(a, names[m]);
        H_ASSERT_RC(rlock_lock(locks[m]), RLOCK_OK);
        H_ASSERT_RC(rlock_lock(locks[m]), RLOCK_OK); /* reentrant */
    }
    for (int m = 0; m < 3; m++) {
        check_key(hc, names[m], rlock_client_id(a), 2, wd);
        assert_int_equal(rlock_is_locked(locks[m]), 1);
        assert_int_equal(rlock_is_held_by_current_thread(locks[m]), 1);
        assert_int_equal(rlock_hold_count(locks[m]), 2);
        H_ASSERT_RC(rlock_remain_ttl(locks[m], &ttl), RLOCK_OK);
        H_ASSERT_BETWEEN(ttl, 1, wd);
        printf("      %s: slot %d on :%d\n", names[m], h_slot(names[m], strlen(names[m])),
               h_server_port(masters[m]));
    }
    for (int round = 0; round < 2; round++)
        for (int m = 0; m < 3; m++)
            h_cluster_wait_renewed(masters[m], names[m], wd, 2 * wd, "renewal");
    assert_int_equal(h_cseen_lost(seen), 0);
    for (int m = 0; m < 3; m++) {
        H_ASSERT_RC(rlock_unlock(locks[m]), RLOCK_OK);
        check_key(hc, names[m], rlock_client_id(a), 1, wd);
        H_ASSERT_RC(rlock_unlock(locks[m]), RLOCK_OK);
        assert_int_equal(h_cluster_keys_in_slot(masters[m], h_slot(names[m], strlen(names[m]))), 0);
        assert_int_equal(rlock_is_locked(locks[m]), 0);
        H_ASSERT_RC(rlock_remain_ttl(locks[m], &ttl), RLOCK_OK);
        assert_int_equal(ttl, -2);
        rlock_free(locks[m]);
    }
    assert_int_equal(h_cseen_lost(seen), 0);
    rlock_client_close(a);
    h_cseen_free(seen);
}

/* Lock by a, a waiter of b, unlock: the waiter must be woken by the unlock
 * (the holder's TTL is 10 s). Returns how long the waiter took after it. */
static long long lock_wait_unlock(const h_cluster *hc, rlock_client *a, rlock_client *b,
                                  const char *name, long long wd) {
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    check_key(hc, name, rlock_client_id(a), 1, wd);
    h_cwaiter *w = h_cwaiter_start(lb, H_MS(30000));
    h_sleep_ms(H_MS(150)); /* the waiter's attempt, then its sleep */
    assert_int_equal(h_cwaiter_done_ms(w), 0);
    long long t_unlock = h_now_ms();
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    h_cwaiter_join(w, 15000);
    long long took = h_cwaiter_done_ms(w) - t_unlock;
    if (w->rc != RLOCK_OK || w->unlock_rc != RLOCK_OK || took > H_MS(1000))
        H_FAIL("name \"%s\": waiter try_lock %s after %lld ms, its unlock %s", name,
               rlock_status_name(w->rc), took, rlock_status_name(w->unlock_rc));
    assert_int_equal(rlock_is_locked(la), 0);
    h_cwaiter_free(w);
    rlock_free(la);
    rlock_free(lb);
    return took;
}

static void test_awkward_names(void **state) {
    h_cluster *hc = *state;
    static const char *const names[] = {
        "{user1}:lock", "a{}b",           "a{b",          "}{",    "{}",    "{",     "}",
        "a}b{c}",       "{a}{b}",         "x{y}z",        "{}{a}", "lock{", "{{a}}", "a b\tc",
        "na\xc3\xafve", "\x01\xff{\x02}", "{user1}:other"};
    h_cseen *sa = h_cseen_new("A"), *sb = h_cseen_new("B");
    long long wd = H_MS(10000);
    rlock_client *a = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sa);
    rlock_client *b = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sb);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *n = names[i];
        char *ch = h_channel(n, strlen(n), NULL);
        long long took = lock_wait_unlock(hc, a, b, n, wd);
        printf("      \"%s\": key slot %d, channel slot %d, waiter woken in %lld ms\n", n,
               h_slot(n, strlen(n)), h_slot(ch, strlen(ch)), took);
        free(ch);
    }
    assert_int_equal(h_cseen_lost(sa) + h_cseen_lost(sb), 0);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cseen_free(sa);
    h_cseen_free(sb);
}

static void test_open(void **state) {
    h_cluster *hc = *state;
    rlock_error_info info;
    char url[300];
    /* The first seed is down: the second answers CLUSTER SLOTS. */
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", h_free_port(),
             h_server_port(hc->node[1]));
    assert_int_equal(h_open_status(url, H_MS(2000), &info), RLOCK_OK);
    /* Every seed down: EIO, naming them. */
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d", h_free_port());
    assert_int_equal(h_open_status(url, H_MS(2000), &info), RLOCK_EIO);
    /* Malformed: no host, an empty seed. */
    assert_int_equal(h_open_status("redis-cluster://", H_MS(2000), &info), RLOCK_EINVAL);
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d,", h_server_port(hc->node[0]));
    assert_int_equal(h_open_status(url, H_MS(2000), &info), RLOCK_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_every_master),
        H_CLUSTER_TEST(test_awkward_names),
        H_CLUSTER_TEST(test_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
