/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_observe.c - seeing a redis-cluster:// client from the nodes
 * (issue 14): every connection it opens to every master is named
 * rlock:<host>:<pid>:<id8> and none is left unnamed; its registration hash
 * lives on the master of its key's slot only, and close deletes it and
 * closes every connection. One cluster of its own (3 masters + 3 replicas).
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

/* CLIENT LIST of node i. */
static h_conns conns_on(const h_cluster *hc, int i, const char *client_id) {
    redisContext *c = h_server_redis(hc->node[i]);
    h_conns n = h_client_list(c, client_id);
    redisFree(c);
    return n;
}

static void test_cluster_names_and_registration(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    int nmasters = h_cluster_masters(hc, masters);
    int unnamed_before[H_CLUSTER_NODES];
    char names[H_CLUSTER_NODES][128], key[128], id[40];
    rlock *locks[H_CLUSTER_NODES];
    assert_int_equal(nmasters, 3);
    for (int i = 0; i < H_CLUSTER_NODES; i++)
        unnamed_before[i] = conns_on(hc, i, "-").unnamed;

    rlock_client *c = h_cluster_open(hc, H_MS(3000), RLOCK_PUBSUB_AUTO, NULL);
    rlock_client *holder = h_cluster_open(hc, H_MS(3000), RLOCK_PUBSUB_AUTO, NULL);
    snprintf(id, sizeof id, "%s", rlock_client_id(c));
    for (int m = 0; m < nmasters; m++) { /* a lock on every master: a pool on each */
        h_cluster_name_on(hc, masters[m], h_unique_name("observe"), names[m], sizeof names[m]);
        locks[m] = h_get(c, names[m]);
        H_ASSERT_RC(rlock_lock(locks[m]), RLOCK_OK);
    }
    rlock *held = h_get(holder, names[1]), *waited = h_get(c, names[1]);
    H_ASSERT_RC(rlock_unlock(locks[1]), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(held), RLOCK_OK);
    h_cwaiter *w = h_cwaiter_start(waited, H_MS(20000)); /* c's subscriber, at masters[1] */
    int m1 = h_cluster_index(hc, masters[1]);
    H_WAIT_FOR(conns_on(hc, m1, id).named_sub == 1, 5000);

    for (int i = 0; i < H_CLUSTER_NODES; i++) {
        h_conns n = conns_on(hc, i, id);
        int is_master = h_cluster_says_master(hc->node[i]);
        printf("      node %d (%s): %d named (%d subscribed), unnamed %d -> %d\n", i,
               is_master ? "master" : "replica", n.named, n.named_sub, unnamed_before[i],
               n.unnamed);
        assert_int_equal(n.unnamed, unnamed_before[i]); /* nothing of ours unnamed */
        if (is_master)
            assert_true(n.named >= 1);
    }

    /* The registration: on the master of its slot, nowhere else. */
    snprintf(key, sizeof key, "rlock:client:%s", id);
    int slot = h_slot(key, strlen(key));
    h_server *owner = h_cluster_owner(hc, slot);
    assert_non_null(owner);
    redisContext *o = h_server_redis(owner);
    assert_int_equal(h_cmd_int(o, "HLEN %s", key), 8);
    redisFree(o);
    for (int m = 0; m < nmasters; m++)
        if (masters[m] != owner)
            assert_int_equal(h_cluster_keys_in_slot(masters[m], slot), 0);

    H_ASSERT_RC(rlock_unlock(held), RLOCK_OK);
    h_cwaiter_join(w, 20000);
    H_ASSERT_RC(w->rc, RLOCK_OK);
    h_cwaiter_free(w);
    for (int m = 0; m < nmasters; m++) {
        if (m != 1)
            H_ASSERT_RC(rlock_unlock(locks[m]), RLOCK_OK);
        rlock_free(locks[m]);
    }
    rlock_free(held);
    rlock_free(waited);
    rlock_client_close(c);
    rlock_client_close(holder);
    redisContext *r = h_server_redis(owner);
    assert_int_equal(h_exists(r, key, strlen(key)), 0);
    redisFree(r);
    for (int i = 0; i < H_CLUSTER_NODES; i++)
        assert_int_equal(conns_on(hc, i, id).named, 0);
}

/*
 * The registration key's slot moves to another master: the watchdog's next
 * rewrite follows the redirect and writes it on the new owner (shown by
 * deleting it there first), nothing is counted as failed, and close deletes
 * it on the new owner.
 */
static void test_registration_follows_slot(void **state) {
    h_cluster *hc = *state;
    long long wd = H_MS(1500);
    char key[128];
    rlock_client *c = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, NULL);
    snprintf(key, sizeof key, "rlock:client:%s", rlock_client_id(c));
    int slot = h_slot(key, strlen(key));
    h_server *source = h_cluster_owner(hc, slot), *masters[H_CLUSTER_NODES], *target = NULL;
    int nmasters = h_cluster_masters(hc, masters);
    for (int m = 0; m < nmasters && target == NULL; m++)
        if (masters[m] != source)
            target = masters[m];
    assert_non_null(target);
    redisContext *s = h_server_redis(source), *t = h_server_redis(target);
    assert_int_equal(h_cmd_int(s, "HLEN %s", key), 8);

    h_cluster_migrate(hc, slot, target);
    h_cmd_ok(t, "DEL %s", key); /* only a rewrite after the move brings it back */
    /* HSET and PEXPIRE each follow the redirect alone: both must have landed */
    H_WAIT_FOR(h_cmd_int(t, "HLEN %s", key) == 8 && h_pttl(t, key, strlen(key)) > 0, 3 * wd);
    assert_int_equal(h_cluster_keys_in_slot(source, slot), 0);
    assert_int_equal(h_stats(c).registration_failures, 0);

    rlock_client_close(c);
    assert_int_equal(h_exists(t, key, strlen(key)), 0);
    redisFree(s);
    redisFree(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_cluster_names_and_registration),
        H_CLUSTER_TEST(test_registration_follows_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
