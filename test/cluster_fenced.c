/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_fenced.c - the fenced lock (rlock_get_fenced) and the resource
 * helper (rlock_fenced_set) on a Redis Cluster of the test's own
 * (harness/cluster.c), one cluster for the whole file:
 *
 *   tokens   names on every master (and a "{tag}" name): the counter
 *            "redisson_lock_token:{name}" lives on the name's master, tokens
 *            increase; an explicit owner's hold is on the same master
 *   names    names whose counter would hash to another slot ("a}b", "a{b",
 *            "a{}b", "}{", "{}") are refused with RLOCK_EINVAL before any
 *            command, by rlock_get_fenced and by rlock_fenced_set (its
 *            fence key "rlock_fence:{key}")
 *
 * Durations are scaled by TEST_TIMEOUT_SCALE.
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

static void tokens_on_master(const h_cluster *hc, rlock_client *c, const char *name) {
    h_server *owner = h_cluster_owner(hc, h_slot(name, strlen(name)));
    assert_non_null(owner);
    redisContext *node = h_server_redis(owner);
    rlock *l = NULL;
    long long t1 = 0, t2 = 0, t3 = 0;
    uint64_t o = rlock_owner_new();
    H_ASSERT_RC(rlock_get_fenced(c, name, &l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, &t1), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_fenced(l, -1, &t2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced_as(l, o, 0, 20000, &t3), RLOCK_OK);
    assert_true(t1 >= 1 && t2 == t1 + 1 && t3 == t2 + 1);
    /* The counter is on the name's master, next to the lock. */
    char key[300];
    if (strchr(name, '{') != NULL)
        snprintf(key, sizeof key, "redisson_lock_token:%s", name);
    else
        snprintf(key, sizeof key, "redisson_lock_token:{%s}", name);
    char *v = h_cmd_str(node, "GET %s", key);
    assert_non_null(v);
    assert_int_equal(atoll(v), t3);
    free(v);
    assert_int_equal(h_exists(node, name, strlen(name)), 1);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_OK);
    /* The resource helper on that master too. */
    H_ASSERT_RC(rlock_fenced_set(c, name, t3, "v", 1), RLOCK_OK);
    H_ASSERT_RC(rlock_fenced_set(c, name, t1, "w", 1), RLOCK_ESTALE);
    v = h_cmd_str(node, "GET %s", name);
    assert_string_equal(v, "v");
    free(v);
    printf("      %s: slot %d on :%d, tokens %lld %lld %lld\n", name, h_slot(name, strlen(name)),
           h_server_port(owner), t1, t2, t3);
    redisFree(node);
    rlock_free(l);
}

static void test_tokens(void **state) {
    h_cluster *hc = *state;
    h_cseen *seen = h_cseen_new("A");
    rlock_client *c = h_cluster_open(hc, H_MS(10000), RLOCK_PUBSUB_AUTO, seen);
    char name[200];
    /* Names on every master: the three masters own slot ranges 0.., 5461.., 10923.. */
    static const int slots[] = {100, 6000, 12000};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        int n = 0;
        do
            snprintf(name, sizeof name, "%s-%d", h_unique_name("fenced"), n++);
        while (h_slot(name, strlen(name)) / 5461 != slots[i] / 5461);
        tokens_on_master(hc, c, name);
    }
    snprintf(name, sizeof name, "{%s}tagged", h_unique_name("fenced-tag"));
    tokens_on_master(hc, c, name);
    rlock_client_close(c);
    h_cseen_free(seen);
}

static void test_names(void **state) {
    h_cluster *hc = *state;
    h_cseen *seen = h_cseen_new("A");
    rlock_client *c = h_cluster_open(hc, H_MS(10000), RLOCK_PUBSUB_AUTO, seen);
    static const char *const refused[] = {"a}b", "a{b", "a{}b", "}{", "{}"};
    static const char *const accepted[] = {"plain", "{t}x", "x{t}", "a}b{c}"};
    rlock *l = (rlock *)&l;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        H_ASSERT_RC(rlock_get_fenced(c, refused[i], &l), RLOCK_EINVAL);
        assert_null(l);
        assert_non_null(strstr(rlock_last_error(), "Cluster slot"));
        H_ASSERT_RC(rlock_fenced_set(c, refused[i], 1, "x", 1), RLOCK_EINVAL);
        assert_non_null(strstr(rlock_last_error(), "Cluster slot"));
    }
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        H_ASSERT_RC(rlock_get_fenced(c, accepted[i], &l), RLOCK_OK);
        rlock_free(l);
    }
    rlock_client_close(c);
    h_cseen_free(seen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, h_cluster_fixture_start, h_cluster_fixture_stop);
}
