/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_fair.c - the fair lock (rlock_get_fair) on a Redis Cluster of the
 * test's own (harness/cluster.c):
 *
 *   hand-off      names on every master (and a "{tag}" name): the queue and
 *                 deadline keys live on the name's master; a waiter of
 *                 another client queues there and is woken at the unlock
 *                 (its own channel, sharded and classic pub/sub), not at the
 *                 TTL
 *   names         names whose three keys would span slots ("a}b", "a{b",
 *                 "a{}b") are refused with RLOCK_EINVAL, before any command
 *
 * Durations are scaled by TEST_TIMEOUT_SCALE.
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

/* Waits until name's queue on node has n entries. */
static void await_queue(redisContext *node, const char *name, long long n) {
    long long until = h_now_ms() + H_MS(5000);
    while (h_cmd_int(node, "LLEN redisson_lock_queue:{%s}", name) != n && h_now_ms() < until)
        h_sleep_ms(2);
    assert_int_equal(h_cmd_int(node, "LLEN redisson_lock_queue:{%s}", name), n);
}

/* A holds name, B waits in the queue on name's master, A's unlock wakes B. */
static void hand_off(const h_cluster *hc, rlock_client *a, rlock_client *b, const char *name) {
    rlock *la = NULL, *lb = NULL;
    h_server *owner = h_cluster_owner(hc, h_slot(name, strlen(name)));
    assert_non_null(owner);
    redisContext *node = h_server_redis(owner);
    H_ASSERT_RC(rlock_get_fair(a, name, &la), RLOCK_OK);
    H_ASSERT_RC(rlock_get_fair(b, name, &lb), RLOCK_OK);
    struct h_timed_try t = {.lock = lb, .wait_ms = H_MS(10000), .lease_ms = RLOCK_LEASE_WATCHDOG};
    pthread_t th;

    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, h_timed_try_main, &t), 0);
    await_queue(node, name, 1); /* on the name's own master: one slot */
    h_sleep_ms(50);
    long long unlocked = h_now_ms();
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    pthread_join(th, NULL);
    H_ASSERT_RC(t.rc, RLOCK_OK);
    long long took = h_now_ms() - unlocked;
    printf("      %s: slot %d on :%d, woken %lld ms after the unlock\n", name,
           h_slot(name, strlen(name)), h_server_port(owner), took);
    assert_true(took < H_MS(1000));
    H_ASSERT_LOCK_IS(node, name, rlock_client_id(b), 1);
    assert_int_equal(h_cmd_int(node, "EXISTS redisson_lock_queue:{%s}", name), 0);
    H_ASSERT_RC(rlock_force_unlock(lb), 1); /* held by the finished thread: no unlock of ours */
    assert_int_equal(h_exists(node, name, strlen(name)), 0);
    redisFree(node);
    rlock_free(la);
    rlock_free(lb);
}

static void test_hand_off(void **state) {
    h_cluster *hc = *state;
    static const int modes[] = {RLOCK_PUBSUB_AUTO, RLOCK_PUBSUB_CLASSIC};
    h_server *masters[H_CLUSTER_NODES];
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        h_cseen *sa = h_cseen_new("A"), *sb = h_cseen_new("B");
        rlock_client *a = h_cluster_open(hc, H_MS(10000), modes[k], sa);
        rlock_client *b = h_cluster_open(hc, H_MS(10000), modes[k], sb);
        printf("      pubsub mode %d\n", modes[k]);
        for (int m = 0; m < 3; m++) {
            char name[128];
            h_cluster_name_on(hc, masters[m], h_unique_name("fair"), name, sizeof name);
            hand_off(hc, a, b, name);
        }
        rlock_client_close(a);
        rlock_client_close(b);
        assert_int_equal(h_cseen_lost(sa) + h_cseen_lost(sb), 0);
        h_cseen_free(sa);
        h_cseen_free(sb);
    }
}

/* A "{tag}" name keeps its keys in the tag's slot. */
static void test_tagged_name(void **state) {
    h_cluster *hc = *state;
    h_cseen *sa = h_cseen_new("A"), *sb = h_cseen_new("B");
    rlock_client *a = h_cluster_open(hc, H_MS(10000), RLOCK_PUBSUB_AUTO, sa);
    rlock_client *b = h_cluster_open(hc, H_MS(10000), RLOCK_PUBSUB_AUTO, sb);
    char name[128];
    rlock *l = NULL;
    snprintf(name, sizeof name, "{%s}:fair", h_unique_name("tag"));
    H_ASSERT_RC(rlock_get_fair(a, name, &l), RLOCK_OK);
    h_server *owner = h_cluster_owner(hc, h_slot(name, strlen(name)));
    redisContext *node = h_server_redis(owner);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    rlock *lb = NULL;
    H_ASSERT_RC(rlock_get_fair(b, name, &lb), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(lb, H_MS(200), RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    /* The give-up ran on the name's master: queue and deadlines are gone there. */
    assert_int_equal(h_cmd_int(node, "EXISTS redisson_lock_queue:%s", name), 0);
    assert_int_equal(h_cmd_int(node, "EXISTS redisson_lock_timeout:%s", name), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_free(lb);
    redisFree(node);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cseen_free(sa);
    h_cseen_free(sb);
}

static void test_names(void **state) {
    h_cluster *hc = *state;
    h_cseen *seen = h_cseen_new("A");
    rlock_client *a = h_cluster_open(hc, H_MS(10000), RLOCK_PUBSUB_AUTO, seen);
    static const char *const refused[] = {"a}b", "a{b", "a{}b", "}{", "{}"};
    static const char *const accepted[] = {"plain", "{t}x", "x{t}", "a}b{c}"};
    rlock *l = (rlock *)&l;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        H_ASSERT_RC(rlock_get_fair(a, refused[i], &l), RLOCK_EINVAL);
        assert_null(l);
        assert_non_null(strstr(rlock_last_error(), "Cluster slot"));
        /* The plain lock takes any name. */
        H_ASSERT_RC(rlock_get(a, refused[i], &l), RLOCK_OK);
        rlock_free(l);
    }
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        H_ASSERT_RC(rlock_get_fair(a, accepted[i], &l), RLOCK_OK);
        rlock_free(l);
    }
    rlock_client_close(a);
    h_cseen_free(seen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_hand_off),
        H_CLUSTER_TEST(test_tagged_name),
        H_CLUSTER_TEST(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
