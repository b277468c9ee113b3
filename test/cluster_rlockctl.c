/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_rlockctl.c - rlockctl on a redis-cluster:// url: 3 masters and 3
 * replicas of the test's own (test/harness/cluster.c).
 *
 *   every master   a lock on each master: list (SCAN on every master) finds
 *                  all three; show reads each at its slot's master, with the
 *                  owner's registration from the slot of rlock:client:<id>
 *                  and a waiter counted as a sharded subscriber at the
 *                  channel's master; unlock reaches the right master and the
 *                  waiter gets the lock; clients finds the registration
 *   watch          hand-offs heard through SSUBSCRIBE at the lock's shard
 *
 * One cluster per test; durations scaled by TEST_TIMEOUT_SCALE.
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

/* A raw connection to the master that serves key now. */
static redisContext *redis_for(const h_cluster *hc, const char *key) {
    h_server *owner = h_cluster_owner(hc, h_slot(key, strlen(key)));
    if (owner == NULL)
        H_FAIL("no master owns the slot of %s", key);
    return h_server_redis(owner);
}

static void test_every_master(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    char prefix[160], pattern[170], names[3][200], key[120];
    snprintf(prefix, sizeof(prefix), "%s", h_unique_name("ctl-cluster"));
    snprintf(pattern, sizeof(pattern), "%s*", prefix);
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    rlock_client *a = h_cluster_open(hc, H_MS(30000), RLOCK_PUBSUB_AUTO, NULL);
    rlock_client *b = h_cluster_open(hc, H_MS(30000), RLOCK_PUBSUB_AUTO, NULL);
    rlock *locks[3];
    for (int i = 0; i < 3; i++) {
        h_cluster_name_on(hc, masters[i], prefix, names[i], sizeof(names[i]));
        locks[i] = h_get(a, names[i]);
        H_ASSERT_RC(rlock_lock(locks[i]), RLOCK_OK);
    }
    snprintf(key, sizeof(key), "rlock:client:%s", rlock_client_id(a));
    redisContext *r = redis_for(hc, key);
    h_register_client(r, rlock_client_id(a), "host-k", 99, "cluster-app");
    redisFree(r);
    rlock *lb = h_get(b, names[2]);
    h_cwaiter *w = h_cwaiter_start(lb, h_scaled(60000));

    h_tool t;
    h_tool_run(&t, hc->url, "list", pattern, "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".locks | length", "3");
    for (int i = 0; i < 3; i++) {
        char filter[700];
        snprintf(filter, sizeof(filter), "[.locks[].name] | index(\"%s\") != null", names[i]);
        h_jq_expect(t.out, filter, "true");
    }
    h_jq_expect(t.out, "[.locks[].owners[0].process.program] | unique | .[0]", "cluster-app");
    h_tool_free(&t);

    /* The waiter is a subscriber at the channel's master, sharded on Redis 7. */
    char *channel = h_channel(names[2], strlen(names[2]), NULL);
    r = redis_for(hc, channel);
    H_WAIT_FOR(h_numsub_kind(r, names[2], strlen(names[2]), 1) == 1, 10000);
    redisFree(r);
    free(channel);
    h_tool_run(&t, hc->url, "show", names[2], "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".owners[0].process.host", "host-k");
    h_jq_expect(t.out, ".channels[0].sharded_subscribers", "1");
    h_jq_expect(t.out, ".waiters", "1");
    h_tool_free(&t);

    h_tool_run(&t, hc->url, "unlock", names[2], "--yes", NULL);
    h_tool_expect(&t, 0, "force-unlocked");
    h_tool_free(&t);
    h_cwaiter_join(w, 10000);
    assert_int_equal(w->rc, RLOCK_OK);
    h_cwaiter_free(w);
    H_ASSERT_RC(rlock_unlock(locks[2]), RLOCK_ENOTOWNER);

    h_tool_run(&t, hc->url, "clients", NULL);
    h_tool_expect(&t, 0, "cluster-app");
    h_tool_free(&t);
    for (int i = 0; i < 3; i++) {
        if (i < 2)
            H_ASSERT_RC(rlock_unlock(locks[i]), RLOCK_OK);
        rlock_free(locks[i]);
    }
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
}

static void test_watch_sharded(void **state) {
    h_cluster *hc = *state;
    char name[160];
    snprintf(name, sizeof(name), "%s", h_unique_name("ctl-cwatch"));
    rlock_client *a = h_cluster_open(hc, H_MS(30000), RLOCK_PUBSUB_AUTO, NULL);
    rlock_client *b = h_cluster_open(hc, H_MS(30000), RLOCK_PUBSUB_AUTO, NULL);
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    h_watch_expect_heard(hc->url, name, name, la, lb, "sharded pub/sub");
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_every_master),
        H_CLUSTER_TEST(test_watch_sharded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
