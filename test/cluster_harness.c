/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_harness.c - the Cluster test harness (harness/cluster.c,
 * cluster_change.c) checked with raw hiredis only, no librlock: what the
 * other cluster_*.c tests rely on.
 *
 *   start stop     six nodes, 3 masters with one linked replica each, every
 *                  node agreeing; after stop no node process is left
 *   slot rule      h_slot (CRC16-XMODEM, hash tags) equals CLUSTER KEYSLOT
 *                  for awkward names, random bytes and topology.md's table
 *   name on        h_cluster_name_on finds a name on every master
 *   migration      a lock-shaped key moved in three phases: on the source
 *                  while MIGRATING, on the target (ASKING) after MIGRATE,
 *                  owned by the target after SETSLOT NODE; a two-key script
 *                  gets TRYAGAIN in the first two phases (topology.md 2)
 *   kill           kill -9 of a master: its replica is promoted with the
 *                  replicated key, the cluster is ok again
 *   failover       CLUSTER FAILOVER there and back: roles swap, no key lost
 *   replica cut    a cut replica receives nothing until healed
 *   cut promoted   a cut replica is still promoted when its master is
 *                  killed (data age well under the validity limit), and
 *                  lacks what the master took after the cut
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_start_stop(void **state) {
    (void)state;
    long long t0 = h_now_ms();
    h_cluster *hc = h_cluster_start();
    h_server *masters[H_CLUSTER_NODES];
    pid_t pids[H_CLUSTER_NODES];
    printf("      cluster ready in %lld ms: %s\n", h_now_ms() - t0, hc->url);
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    for (int m = 0; m < 3; m++) {
        h_server *r = h_cluster_replica_of(hc, masters[m]);
        assert_non_null(r);
        assert_int_equal(h_replicas_linked(masters[m]), 1);
        assert_false(h_cluster_says_master(r));
    }
    for (int i = 0; i < H_CLUSTER_NODES; i++) {
        pids[i] = h_server_pid(hc->node[i]);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(hc->id[i], hc->id[j]);
    }
    assert_true(h_cluster_settled(hc, 1));
    h_cluster_stop(hc);
    for (int i = 0; i < H_CLUSTER_NODES; i++) /* reaped: no such process */
        assert_true(kill(pids[i], 0) != 0 && errno == ESRCH);
}

static void check_slot(const h_server *s, const char *key, size_t len) {
    int here = h_slot(key, len), there = h_cluster_keyslot(s, key, len);
    if (here != there)
        H_FAIL("slot of \"%.*s\": %d here, CLUSTER KEYSLOT says %d", (int)len, key, here, there);
}

static void test_slot_rule(void **state) {
    h_cluster *hc = *state;
    static const char *const names[] = {"mylock",
                                        "{user1}:lock",
                                        "a{b",
                                        "a{}b",
                                        "}{",
                                        "{}",
                                        "{",
                                        "}",
                                        "a}b{c}",
                                        "{a}{b}",
                                        "{{a}}",
                                        "x{y}z",
                                        "{}{a}",
                                        "lock{",
                                        "redisson_lock__channel:{a{b}",
                                        "redisson_lock__channel:a{b",
                                        "123456789"};
    h_server *s = hc->node[2];
    assert_int_equal(h_crc16("123456789", 9), 0x31C3); /* the spec's check value */
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        check_slot(s, names[i], strlen(names[i]));
    /* topology.md section 2, measured on 7.0.15 */
    assert_int_equal(h_slot("mylock", 6), 1711);
    assert_int_equal(h_slot("{user1}:lock", 12), 8106);
    assert_int_equal(h_slot("a{b", 3), 13340);
    assert_int_equal(h_slot("redisson_lock__channel:a{b", 26), 3200);
    assert_int_equal(h_slot("a{}b", 4), 13694);
    assert_int_equal(h_slot("redisson_lock__channel:a{}b", 27), 7717);
    assert_int_equal(h_slot("", 0), 0);
    srand(7);
    for (int i = 0; i < 300; i++) { /* random bytes, braces likely */
        char key[24];
        size_t len = 1 + (size_t)(rand() % 20);
        for (size_t k = 0; k < len; k++)
            key[k] = "{}ab\x01\xff"[rand() % 6];
        check_slot(s, key, len);
    }
}

static void test_name_on(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    int n = h_cluster_masters(hc, masters);
    assert_int_equal(n, 3);
    for (int m = 0; m < n; m++) {
        h_cluster_name_on(hc, masters[m], "name-on", name, sizeof name);
        assert_ptr_equal(h_cluster_owner(hc, h_slot(name, strlen(name))), masters[m]);
        printf("      %s -> slot %d on :%d\n", name, h_slot(name, strlen(name)),
               h_server_port(masters[m]));
    }
}

/* A lock as Redisson writes it, on its owner. */
static void raw_lock(const h_server *owner, const char *name) {
    redisContext *c = h_server_redis(owner);
    h_cmd_ok(c, "HSET %s %s 1", name, "other:1");
    h_cmd_ok(c, "PEXPIRE %s 30000", name);
    redisFree(c);
}

/* Error text (or "" if none) of a two-key script [name, channel] on s (ASKING first). */
static void two_key_script(const h_server *s, const char *name, char *err, size_t size) {
    redisContext *c = h_server_redis(s);
    char *ch = h_channel(name, strlen(name), NULL);
    redisReply *r;
    h_cmd_ok(c, "ASKING");
    r = h_cmd(c, "EVAL %s 2 %s %s", "return 1", name, ch);
    snprintf(err, size, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    free(ch);
    redisFree(c);
}

static void test_migration_phases(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    char name[128], err[256];
    h_migration m;
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[0], "migrate", name, sizeof name);
    int slot = h_slot(name, strlen(name));
    raw_lock(masters[0], name);
    h_cluster_migrate_begin(hc, slot, masters[1], &m);
    assert_ptr_equal(m.source, masters[0]);
    assert_int_equal(h_cluster_keys_in_slot(masters[0], slot), 1);
    assert_true(h_cluster_pttl(masters[0], name, strlen(name)) > 0);
    two_key_script(masters[0], name, err, sizeof err);
    printf("      MIGRATING, key on the source: two-key script says \"%s\"\n", err);
    assert_non_null(strstr(err, "TRYAGAIN"));
    assert_int_equal(h_cluster_migrate_keys(hc, &m), 1);
    assert_int_equal(h_cluster_keys_in_slot(masters[0], slot), 0);
    assert_int_equal(h_cluster_keys_in_slot(masters[1], slot), 1);
    assert_true(h_cluster_pttl(masters[1], name, strlen(name)) > 0); /* ASKING */
    two_key_script(masters[1], name, err, sizeof err);
    printf("      after MIGRATE, on the target with ASKING: \"%s\"\n", err);
    assert_non_null(strstr(err, "TRYAGAIN"));
    h_cluster_migrate_finish(hc, &m);
    assert_ptr_equal(h_cluster_owner(hc, slot), masters[1]);
    two_key_script(masters[1], name, err, sizeof err);
    assert_string_equal(err, "");
    redisContext *c = h_server_redis(masters[1]);
    char *count = h_cmd_str(c, "HGET %s %s", name, "other:1");
    assert_string_equal(count, "1");
    free(count);
    redisFree(c);
    h_cluster_migrate(hc, slot, masters[0]); /* and back, all phases in one */
    assert_ptr_equal(h_cluster_owner(hc, slot), masters[0]);
    assert_int_equal(h_cluster_keys_in_slot(masters[0], slot), 1);
}

static void test_kill_master(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[2], "kill", name, sizeof name);
    h_server *r = h_cluster_replica_of(hc, masters[2]);
    raw_lock(masters[2], name);
    H_WAIT_FOR(h_cluster_replica_has(r, name, strlen(name)), 5000);
    long long t0 = h_now_ms();
    h_server *heir = h_cluster_kill_master(hc, masters[2]);
    printf("      replica :%d promoted and cluster ok %lld ms after kill -9\n", h_server_port(heir),
           h_now_ms() - t0);
    assert_ptr_equal(heir, r);
    assert_true(h_cluster_pttl(heir, name, strlen(name)) > 0);
    h_cluster_wait_settled(hc, 1, 10000);
}

static void test_failover(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[1], "failover", name, sizeof name);
    raw_lock(masters[1], name);
    h_server *r = h_cluster_replica_of(hc, masters[1]);
    long long t0 = h_now_ms();
    assert_ptr_equal(h_cluster_failover(hc, r), r);
    printf("      CLUSTER FAILOVER: :%d master after %lld ms\n", h_server_port(r), h_now_ms() - t0);
    assert_true(h_cluster_says_master(r));
    assert_false(h_cluster_says_master(masters[1]));
    assert_true(h_cluster_pttl(r, name, strlen(name)) > 0);
    h_cluster_wait_settled(hc, 1, 10000);
    h_cluster_failover(hc, masters[1]); /* and back */
    assert_true(h_cluster_says_master(masters[1]));
    h_cluster_wait_settled(hc, 1, 10000);
}

static void test_replica_cut(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    char a[128], b[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[0], "cut-a", a, sizeof a);
    h_cluster_name_on(hc, masters[0], "cut-b", b, sizeof b);
    h_server *r = h_cluster_replica_of(hc, masters[0]);
    h_replica_cut(r);
    raw_lock(masters[0], a);
    h_sleep_ms(H_MS(500));
    assert_false(h_cluster_replica_has(r, a, strlen(a)));
    h_replica_heal(r);
    raw_lock(masters[0], b);
    H_WAIT_FOR(h_cluster_replica_has(r, a, strlen(a)) && h_cluster_replica_has(r, b, strlen(b)),
               10000);
}

static void test_cut_replica_promoted(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[1], "cut-kill", name, sizeof name);
    h_server *r = h_cluster_replica_of(hc, masters[1]);
    h_replica_cut(r);
    raw_lock(masters[1], name);
    long long t0 = h_now_ms();
    assert_ptr_equal(h_cluster_kill_master(hc, masters[1]), r);
    printf("      cut replica :%d promoted %lld ms after kill -9, without the key\n",
           h_server_port(r), h_now_ms() - t0);
    assert_int_equal(h_cluster_pttl(r, name, strlen(name)), -2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_stop), H_CLUSTER_TEST(test_slot_rule),
        H_CLUSTER_TEST(test_name_on),      H_CLUSTER_TEST(test_migration_phases),
        H_CLUSTER_TEST(test_kill_master),  H_CLUSTER_TEST(test_failover),
        H_CLUSTER_TEST(test_replica_cut),  H_CLUSTER_TEST(test_cut_replica_promoted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
