/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_pubsub.c - the unlock messages of rlock_config.pubsub_mode on a
 * Redis Cluster (7.0: both kinds available). Classic PUBLISH reaches only
 * SUBSCRIBE clients and SPUBLISH only SSUBSCRIBE clients (topology.md
 * section 2), so a waiter hears only peers that publish its own kind:
 *
 *   sharded          two SHARDED clients: the waiter is subscribed on the
 *                    lock's shard (PUBSUB SHARDNUMSUB there), and wakes
 *                    promptly when the other client unlocks
 *   classic          two CLASSIC clients: the waiter is subscribed with
 *                    SUBSCRIBE at the lock's master (PUBSUB NUMSUB), none
 *                    sharded, and wakes promptly
 *   auto             AUTO on Redis 7 behaves as SHARDED: sharded
 *                    subscription, prompt wake-up by an AUTO peer
 *   sharded deaf     a SHARDED waiter and a peer simulated with raw hiredis
 *                    (HSET name other:1 1, PEXPIRE 3 s; later DEL and a
 *                    "0" on redisson_lock__channel:{name}). Peer SPUBLISHes:
 *                    the waiter acquires promptly. Peer PUBLISHes: the
 *                    waiter does NOT hear it -- by design, not a bug: the
 *                    kinds must match (Redisson's shardedSubscriptionMode)
 *                    -- and acquires only when its own sleep, bounded by
 *                    the holder's TTL, ends: about 3 s after the hold began
 *   classic deaf     the reverse: a CLASSIC waiter hears a PUBLISH promptly,
 *                    not a SPUBLISH (acquires around the TTL)
 *
 * Bounds are generous ("promptly": under 1 s; "not heard": later than a
 * third of the TTL after the message, and no later than the TTL + 3 s).
 * One cluster per test. Durations are scaled by TEST_TIMEOUT_SCALE.
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

/* PUBSUB SHARDNUMSUB (sharded 1) or PUBSUB NUMSUB of name's channel on s. */
static long long numsub(const h_server *s, const char *name, int sharded) {
    redisContext *c = h_server_redis(s);
    char *ch = h_channel(name, strlen(name), NULL);
    redisReply *r = h_cmd(c, "PUBSUB %s %s", sharded ? "SHARDNUMSUB" : "NUMSUB", ch);
    long long n = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : -1;
    freeReplyObject(r);
    free(ch);
    redisFree(c);
    return n;
}

/* Subscribers of name's channel of one kind, summed over the live nodes. */
static long long subscribers(const h_cluster *hc, const char *name, int sharded) {
    long long n = 0;
    for (int i = 0; i < H_CLUSTER_NODES; i++)
        if (h_server_pid(hc->node[i]) != 0)
            n += numsub(hc->node[i], name, sharded);
    return n;
}

/* Two clients of one mode; b waits while a holds; a unlocks: b must wake
 * promptly. The subscriptions are checked while b waits. */
static void two_clients(h_cluster *hc, int mode, int want_sharded) {
    long long wd = H_MS(10000);
    h_cseen *sa = h_cseen_new("A"), *sb = h_cseen_new("B");
    rlock_client *a = h_cluster_open(hc, wd, mode, sa);
    rlock_client *b = h_cluster_open(hc, wd, mode, sb);
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[1], h_unique_name("pubsub"), name, sizeof name);
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_cwaiter *w = h_cwaiter_start(lb, H_MS(30000));
    H_WAIT_FOR(subscribers(hc, name, want_sharded) >= 1, 5000);
    long long other = subscribers(hc, name, !want_sharded);
    printf("      waiting: %s subscribers %lld (on the owner: %lld), %s ones %lld\n",
           want_sharded ? "sharded" : "classic", subscribers(hc, name, want_sharded),
           numsub(masters[1], name, want_sharded), want_sharded ? "classic" : "sharded", other);
    assert_int_equal(other, 0);
    /* Both kinds subscribe at the lock's master (classic: no cluster-bus hop, as Redisson). */
    assert_true(numsub(masters[1], name, want_sharded) >= 1);
    assert_int_equal(h_cwaiter_done_ms(w), 0);
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    long long t_unlocked = h_now_ms();
    h_cwaiter_join(w, 15000);
    long long took = h_cwaiter_done_ms(w) - t_unlocked;
    printf("      unlock %lld ms; waiter %s %lld ms after it\n", t_unlocked - t0,
           rlock_status_name(w->rc), took);
    H_ASSERT_RC(w->rc, RLOCK_OK);
    H_ASSERT_RC(w->unlock_rc, RLOCK_OK);
    assert_true(took < H_MS(1000)); /* not the 10 s TTL */
    assert_int_equal(h_cseen_lost(sa) + h_cseen_lost(sb), 0);
    h_cwaiter_free(w);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cseen_free(sa);
    h_cseen_free(sb);
}

static void test_sharded(void **state) {
    two_clients(*state, RLOCK_PUBSUB_SHARDED, 1);
}

static void test_classic(void **state) {
    two_clients(*state, RLOCK_PUBSUB_CLASSIC, 0);
}

static void test_auto_is_sharded(void **state) {
    two_clients(*state, RLOCK_PUBSUB_AUTO, 1);
}

/*
 * A raw peer holds name for ttl ms on its owner; a waiter of mode starts;
 * at a quarter of the TTL the peer deletes the key and publishes "0" with
 * PUBLISH (sharded 0) or SPUBLISH (sharded 1) on the lock's channel.
 * Returns how long after that message the waiter acquired.
 */
static long long peer_round(h_cluster *hc, rlock_client *c, const char *name, int sharded,
                            long long ttl) {
    h_server *owner = h_cluster_owner(hc, h_slot(name, strlen(name)));
    redisContext *r = h_server_redis(owner);
    char *ch = h_channel(name, strlen(name), NULL);
    rlock *lock = h_get(c, name);
    long long t_held = h_now_ms();
    h_cmd_ok(r, "HSET %s %s 1", name, "other:1");
    h_cmd_ok(r, "PEXPIRE %s %lld", name, ttl);
    h_cwaiter *w = h_cwaiter_start(lock, H_MS(30000));
    h_sleep_ms(t_held + ttl / 4 - h_now_ms()); /* it tried, and sleeps */
    assert_int_equal(h_cwaiter_done_ms(w), 0);
    long long t_msg = h_now_ms();
    h_cmd_ok(r, "DEL %s", name);
    long long heard = h_cmd_int(r, "%s %s 0", sharded ? "SPUBLISH" : "PUBLISH", ch);
    h_cwaiter_join(w, 30000);
    long long took = h_cwaiter_done_ms(w) - t_msg;
    printf("      peer %s: %lld receiver(s) on the node; waiter %s %lld ms after it "
           "(%lld ms after the hold began, TTL %lld)\n",
           sharded ? "SPUBLISH" : "PUBLISH", heard, rlock_status_name(w->rc), took,
           h_cwaiter_done_ms(w) - t_held, ttl);
    H_ASSERT_RC(w->rc, RLOCK_OK);
    H_ASSERT_RC(w->unlock_rc, RLOCK_OK);
    h_cwaiter_free(w);
    rlock_free(lock);
    free(ch);
    redisFree(r);
    return took;
}

/* A waiter of mode hears a peer of its own kind, not one of the other. */
static void deaf_to_other_kind(h_cluster *hc, int mode, int sharded) {
    long long ttl = H_MS(3000);
    h_cseen *seen = h_cseen_new("W");
    rlock_client *c = h_cluster_open(hc, H_MS(10000), mode, seen);
    h_server *masters[H_CLUSTER_NODES];
    char same[128], other[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[2], h_unique_name("same-kind"), same, sizeof same);
    h_cluster_name_on(hc, masters[2], h_unique_name("other-kind"), other, sizeof other);
    long long heard = peer_round(hc, c, same, sharded, ttl);
    assert_true(heard < H_MS(1000)); /* the same kind: woken by the message */
    long long deaf = peer_round(hc, c, other, !sharded, ttl);
    /* The other kind: not heard; woken by its own TTL-bounded sleep (the
     * message came at a quarter of the TTL, so about 3/4 of it later). */
    H_ASSERT_BETWEEN(deaf, ttl / 3, ttl + H_MS(3000));
    assert_int_equal(h_cseen_lost(seen), 0);
    rlock_client_close(c);
    h_cseen_free(seen);
}

static void test_sharded_waiter_deaf_to_publish(void **state) {
    deaf_to_other_kind(*state, RLOCK_PUBSUB_SHARDED, 1);
}

static void test_classic_waiter_deaf_to_spublish(void **state) {
    deaf_to_other_kind(*state, RLOCK_PUBSUB_CLASSIC, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_sharded),
        H_CLUSTER_TEST(test_classic),
        H_CLUSTER_TEST(test_auto_is_sharded),
        H_CLUSTER_TEST(test_sharded_waiter_deaf_to_publish),
        H_CLUSTER_TEST(test_classic_waiter_deaf_to_spublish),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
