/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_rw.c - the read-write lock (rlock_get_rw) on a Redis Cluster of
 * the test's own (harness/cluster.c):
 *
 *   wake-up    names on every master (and a "{tag}" name), sharded and
 *              classic pub/sub: the per-hold keys and the waiting writers'
 *              set live on the name's master; readers of two clients waiting
 *              behind a writer all go at its unlock ("1"), a writer waiting
 *              behind readers goes at the last read unlock ("0") -- at the
 *              message, not the TTL
 *   renewal    read holds (several threads per lock), write holds and plain
 *              locks on all three masters, renewed together by the
 *              watchdog's per-node scripts for several leases: nothing lost,
 *              every hold's key re-armed on its master
 *   ignored    rlock_config.shared_reads_ms set (ignored after 0.5): on
 *              each master three threads of a client read through holds of
 *              their own, renewed by the per-node scripts; a writer goes at
 *              the last unlock
 *   names      names whose keys would span slots ("a}b", "a{b", "a{}b",
 *              "}{", "{}") are refused with RLOCK_EINVAL, before any command
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

static long long op_try(void *arg) {
    struct h_try *t = arg;
    return rlock_try_lock(t->lock, t->wait_ms, t->lease_ms);
}

/* The first read hold's key of client id's reader of name on node, malloc'd (NULL if none). */
static char *first_hold_key(redisContext *node, const char *name, const char *id) {
    redisReply *rep = h_cmd(node, "HKEYS %s", name);
    char *key = NULL;
    int tagged = strchr(name, '{') != NULL;
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && !key; i++) {
        const char *f = rep->element[i]->str;
        if (strncmp(f, id, 36) == 0 && strstr(f, ":write") == NULL &&
            asprintf(&key, "%s%s%s:%s:rwlock_timeout:1", tagged ? "" : "{", name,
                     tagged ? "" : "}", f) < 0)
            abort();
    }
    freeReplyObject(rep);
    return key;
}

#define READERS 3

/*
 * A writes; READERS readers (two of B, one of C) wait and all go at A's
 * unlock; then D's writer waits for them and goes at the last read unlock.
 * Every key is on name's master.
 */
static void wake_ups(const h_cluster *hc, rlock_client *const cl[4], const char *name) {
    rlock *r[4], *w[4];
    h_actor *t[READERS + 1];
    struct h_try tries[READERS + 1];
    h_server *owner = h_cluster_owner(hc, h_slot(name, strlen(name)));
    assert_non_null(owner);
    redisContext *node = h_server_redis(owner);
    for (int i = 0; i < 4; i++)
        H_ASSERT_RC(rlock_get_rw(cl[i], name, &r[i], &w[i]), RLOCK_OK);

    H_ASSERT_RC(rlock_lock(w[0]), RLOCK_OK);
    for (int i = 0; i < READERS; i++) {
        t[i] = h_actor_start();
        tries[i] = (struct h_try){.lock = i < 2 ? r[1] : r[2], .wait_ms = H_MS(10000),
                                  .lease_ms = RLOCK_LEASE_WATCHDOG};
        h_actor_post(t[i], op_try, &tries[i]);
    }
    h_sleep_ms(300); /* asleep (their attempts are busy: a writer holds it) */
    long long unlocked = h_now_ms();
    H_ASSERT_RC(rlock_unlock(w[0]), RLOCK_OK);
    long long last = 0;
    for (int i = 0; i < READERS; i++) {
        H_ASSERT_RC(h_actor_wait(t[i], 5000), RLOCK_OK);
        long long took = h_actor_finished_ms(t[i]) - unlocked;
        last = took > last ? took : last;
    }
    assert_true(last < H_MS(1000));
    assert_int_equal(h_cmd_int(node, "HLEN %s", name), READERS + 1);
    char *key = first_hold_key(node, name, rlock_client_id(cl[2]));
    assert_non_null(key);
    assert_true(h_cluster_pttl(owner, key, strlen(key)) > 0); /* on the name's master */
    free(key);

    /* D's writer waits behind the readers (in the writers' set, on that master too). */
    t[READERS] = h_actor_start();
    tries[READERS] = (struct h_try){.lock = w[3], .wait_ms = H_MS(10000),
                                    .lease_ms = RLOCK_LEASE_WATCHDOG};
    h_actor_post(t[READERS], op_try, &tries[READERS]);
    char writers[300];
    snprintf(writers, sizeof writers, strchr(name, '{') ? "rlock_rwlock_writers:%s"
                                                         : "rlock_rwlock_writers:{%s}", name);
    H_WAIT_FOR(h_cluster_pttl(owner, writers, strlen(writers)) > 0, 3000);
    for (int i = 0; i < READERS - 1; i++)
        H_ASSERT_RC(h_actor_call(t[i], h_op_unlock, tries[i].lock), RLOCK_OK);
    h_sleep_ms(100);
    assert_false(h_actor_done(t[READERS]));
    unlocked = h_now_ms();
    H_ASSERT_RC(h_actor_call(t[READERS - 1], h_op_unlock, tries[READERS - 1].lock), RLOCK_OK);
    H_ASSERT_RC(h_actor_wait(t[READERS], 5000), RLOCK_OK);
    long long writer = h_actor_finished_ms(t[READERS]) - unlocked;
    printf("      %s: slot %d on :%d, readers woken %lld ms after the write unlock, the "
           "writer %lld ms after the last read unlock\n",
           name, h_slot(name, strlen(name)), h_server_port(owner), last, writer);
    assert_true(writer < H_MS(1000));
    H_ASSERT_RC(h_actor_call(t[READERS], h_op_unlock, w[3]), RLOCK_OK);
    assert_int_equal(h_exists(node, name, strlen(name)), 0);
    assert_int_equal(h_exists(node, writers, strlen(writers)), 0);

    for (int i = 0; i <= READERS; i++)
        h_actor_stop(t[i]);
    for (int i = 0; i < 4; i++) {
        rlock_free(r[i]);
        rlock_free(w[i]);
    }
    redisFree(node);
}

static void test_wake_ups(void **state) {
    h_cluster *hc = *state;
    static const int modes[] = {RLOCK_PUBSUB_AUTO, RLOCK_PUBSUB_CLASSIC};
    h_server *masters[H_CLUSTER_NODES];
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        static const char *const who[] = {"A", "B", "C", "D"};
        h_cseen *seen[4];
        rlock_client *cl[4];
        printf("      pubsub mode %d\n", modes[k]);
        for (int i = 0; i < 4; i++) {
            seen[i] = h_cseen_new(who[i]);
            cl[i] = h_cluster_open(hc, H_MS(10000), modes[k], seen[i]);
        }
        for (int m = 0; m < 3; m++) {
            char name[128];
            h_cluster_name_on(hc, masters[m], h_unique_name("rw"), name, sizeof name);
            wake_ups(hc, cl, name);
        }
        char tagged[128];
        snprintf(tagged, sizeof tagged, "{%s}:rw", h_unique_name("tag"));
        wake_ups(hc, cl, tagged);
        for (int i = 0; i < 4; i++) {
            rlock_client_close(cl[i]);
            assert_int_equal(h_cseen_lost(seen[i]), 0);
            h_cseen_free(seen[i]);
        }
    }
}

#define RENEW_THREADS 2

/*
 * On each master: a lock read by RENEW_THREADS threads, one written, one
 * plain lock; held for three leases. The watchdog's per-node scripts renew
 * them all (read holds by RW_RENEW_NODE, the others by RENEW_NODE).
 */
static void test_renewal(void **state) {
    h_cluster *hc = *state;
    long long wd = H_MS(1500);
    h_server *masters[H_CLUSTER_NODES];
    h_cseen *seen = h_cseen_new("A");
    rlock_client *c = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, seen);
    rlock *rd[3], *wr[3], *plain[3];
    char read_name[3][128], write_name[3][128], plain_name[3][128];
    h_actor *t[3][RENEW_THREADS];
    assert_int_equal(h_cluster_masters(hc, masters), 3);

    for (int m = 0; m < 3; m++) {
        rlock *unused;
        h_cluster_name_on(hc, masters[m], h_unique_name("rwr"), read_name[m], 128);
        h_cluster_name_on(hc, masters[m], h_unique_name("rww"), write_name[m], 128);
        h_cluster_name_on(hc, masters[m], h_unique_name("plain"), plain_name[m], 128);
        H_ASSERT_RC(rlock_get_rw(c, read_name[m], &rd[m], &unused), RLOCK_OK);
        rlock_free(unused);
        H_ASSERT_RC(rlock_get_rw(c, write_name[m], &unused, &wr[m]), RLOCK_OK);
        rlock_free(unused);
        plain[m] = h_get(c, plain_name[m]);
        for (int i = 0; i < RENEW_THREADS; i++) {
            t[m][i] = h_actor_start();
            H_ASSERT_RC(h_actor_call(t[m][i], h_op_lock, rd[m]), RLOCK_OK);
        }
        H_ASSERT_RC(rlock_lock(wr[m]), RLOCK_OK);
        H_ASSERT_RC(rlock_lock(plain[m]), RLOCK_OK);
    }
    h_sleep_ms(3 * wd);
    for (int m = 0; m < 3; m++) {
        redisContext *node = h_server_redis(masters[m]);
        assert_true(h_cluster_pttl(masters[m], read_name[m], strlen(read_name[m])) > wd / 2);
        assert_true(h_cluster_pttl(masters[m], write_name[m], strlen(write_name[m])) > wd / 2);
        assert_true(h_cluster_pttl(masters[m], plain_name[m], strlen(plain_name[m])) > wd / 2);
        assert_int_equal(h_cmd_int(node, "HLEN %s", read_name[m]), RENEW_THREADS + 1);
        char *key = first_hold_key(node, read_name[m], rlock_client_id(c));
        assert_non_null(key);
        assert_true(h_cluster_pttl(masters[m], key, strlen(key)) > wd / 2);
        free(key);
        redisFree(node);
    }
    assert_int_equal(h_cseen_lost(seen), 0);
    for (int m = 0; m < 3; m++) {
        for (int i = 0; i < RENEW_THREADS; i++) {
            H_ASSERT_RC(h_actor_call(t[m][i], h_op_unlock, rd[m]), RLOCK_OK);
            h_actor_stop(t[m][i]);
        }
        H_ASSERT_RC(rlock_unlock(wr[m]), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(plain[m]), RLOCK_OK);
        rlock_free(rd[m]);
        rlock_free(wr[m]);
        rlock_free(plain[m]);
    }
    rlock_client_close(c);
    h_cseen_free(seen);
}

/*
 * rlock_config.shared_reads_ms set, which no longer does anything: on each
 * master, three threads of one client read a lock through a hold each (a
 * field per thread, the hold keys on the name's master), renewed by the
 * per-node scripts for several leases; a writer of another client goes at
 * the last read unlock. (Threads that share one hold on an explicit owner:
 * examples/shared_read.c, test_rw_shared.c.)
 */
static void test_ignored_shared_reads(void **state) {
    h_cluster *hc = *state;
    long long wd = H_MS(1500);
    h_server *masters[H_CLUSTER_NODES];
    h_cseen *seen = h_cseen_new("S");
    rlock_config cfg;
    h_cluster_config(hc, &cfg, wd, RLOCK_PUBSUB_AUTO, seen);
    cfg.shared_reads_ms = 200;
    rlock_client *c = h_open_config(&cfg), *w = h_cluster_open(hc, H_MS(10000),
                                                               RLOCK_PUBSUB_AUTO, NULL);
    rlock *rd[3], *wr[3], *wrd[3], *wwr[3];
    char name[3][128];
    h_actor *t[3][READERS];
    assert_int_equal(h_cluster_masters(hc, masters), 3);

    for (int m = 0; m < 3; m++) {
        h_cluster_name_on(hc, masters[m], h_unique_name("rws"), name[m], 128);
        H_ASSERT_RC(rlock_get_rw(c, name[m], &rd[m], &wr[m]), RLOCK_OK);
        H_ASSERT_RC(rlock_get_rw(w, name[m], &wrd[m], &wwr[m]), RLOCK_OK);
        for (int i = 0; i < READERS; i++) {
            t[m][i] = h_actor_start();
            H_ASSERT_RC(h_actor_call(t[m][i], h_op_lock, rd[m]), RLOCK_OK);
        }
    }
    h_sleep_ms(3 * wd);
    for (int m = 0; m < 3; m++) {
        redisContext *node = h_server_redis(masters[m]);
        assert_int_equal(h_cmd_int(node, "HLEN %s", name[m]), 1 + READERS); /* mode + each */
        char *key = first_hold_key(node, name[m], rlock_client_id(c));
        assert_non_null(key);
        assert_true(h_cluster_pttl(masters[m], key, strlen(key)) > wd / 2);
        free(key);
        redisFree(node);
        H_ASSERT_RC(rlock_try_lock(wwr[m], 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
        h_actor *writer = h_actor_start();
        struct h_try wt = {.lock = wwr[m], .wait_ms = H_MS(10000),
                           .lease_ms = RLOCK_LEASE_WATCHDOG};
        h_actor_post(writer, op_try, &wt);
        for (int i = 0; i < READERS - 1; i++)
            H_ASSERT_RC(h_actor_call(t[m][i], h_op_unlock, rd[m]), RLOCK_OK);
        h_sleep_ms(100);
        assert_false(h_actor_done(writer));
        long long unlocked = h_now_ms();
        H_ASSERT_RC(h_actor_call(t[m][READERS - 1], h_op_unlock, rd[m]), RLOCK_OK);
        H_ASSERT_RC(h_actor_wait(writer, 5000), RLOCK_OK);
        long long took = h_actor_finished_ms(writer) - unlocked;
        printf("      %s: read holds renewed on :%d; the writer %lld ms after the last "
               "read unlock\n", name[m], h_server_port(masters[m]), took);
        assert_true(took < H_MS(1000));
        H_ASSERT_RC(h_actor_call(writer, h_op_unlock, wwr[m]), RLOCK_OK);
        h_actor_stop(writer);
        for (int i = 0; i < READERS; i++)
            h_actor_stop(t[m][i]);
    }
    assert_int_equal(h_cseen_lost(seen), 0);
    for (int m = 0; m < 3; m++) {
        rlock *handles[] = {rd[m], wr[m], wrd[m], wwr[m]};
        for (int k = 0; k < 4; k++)
            rlock_free(handles[k]);
    }
    rlock_client_close(c);
    rlock_client_close(w);
    h_cseen_free(seen);
}

static void test_names(void **state) {
    h_cluster *hc = *state;
    h_cseen *seen = h_cseen_new("A");
    rlock_client *a = h_cluster_open(hc, H_MS(10000), RLOCK_PUBSUB_AUTO, seen);
    static const char *const refused[] = {"a}b", "a{b", "a{}b", "}{", "{}"};
    static const char *const accepted[] = {"plain", "{t}x", "x{t}", "a}b{c}", "with space"};
    rlock *r = (rlock *)&r, *w = (rlock *)&w;
    (void)hc;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        H_ASSERT_RC(rlock_get_rw(a, refused[i], &r, &w), RLOCK_EINVAL);
        assert_null(r);
        assert_null(w);
        assert_non_null(strstr(rlock_last_error(), "Cluster slot"));
    }
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        H_ASSERT_RC(rlock_get_rw(a, accepted[i], &r, &w), RLOCK_OK);
        rlock_free(r);
        rlock_free(w);
    }
    rlock_client_close(a);
    h_cseen_free(seen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_wake_ups),
        H_CLUSTER_TEST(test_renewal),
        H_CLUSTER_TEST(test_ignored_shared_reads),
        H_CLUSTER_TEST(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
