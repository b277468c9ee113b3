/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_exclusion.c - mutual exclusion on a Redis Cluster while the
 * lock's slot changes hands: 4 processes x 4 threads (each process opens its
 * own redis-cluster:// client) take one lock over and over. Each holder
 * checks, in memory the processes share, that nobody else is inside, and
 * increments a counter with a read, a pause and a write: the counter is
 * exact only if no two holders overlapped (the contest:
 * harness/exclusion.h).
 *
 *   migration   the lock's slot is moved to another master and back, twice,
 *               in the three phases (IMPORTING/MIGRATING, MIGRATE of
 *               whatever lock key exists at that moment, SETSLOT NODE),
 *               with pauses in each phase: zero overlaps, exact count, and
 *               every unlock RLOCK_OK (no hold lost); the same for a
 *               fair lock and for a read-write lock's write handle, whose
 *               other keys the migration moves too (and the contest's
 *               scripts gather on the importing node when it split them)
 *   failover    CLUSTER FAILOVER of the lock's master, then back (a
 *               coordinated failover loses no acknowledged write, so no
 *               WAIT is needed; the lease outlasts the old master's write
 *               pause, H_FAILOVER_WATCHDOG_MS): zero overlaps, exact count,
 *               every unlock RLOCK_OK
 *
 * All also require that every process kept acquiring, and that acquiring
 * went on after the last change. Durations are scaled by TEST_TIMEOUT_SCALE.
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

#define PROCESSES 4
#define THREADS 4

typedef struct contest {
    h_exclusion ex;
    char name[128];
    int slot;
} contest;

static void start_contest(contest *ct, h_cluster *hc, h_server *master, long long watchdog_ms) {
    rlock_config cfg;
    h_excl_config(&cfg, hc->url); /* 40 retries 250 ms apart */
    cfg.watchdog_timeout_ms = watchdog_ms;
    h_cluster_name_on(hc, master, h_unique_name("exclusion"), ct->name, sizeof ct->name);
    ct->slot = h_slot(ct->name, strlen(ct->name));
    h_excl_start(&ct->ex, &cfg, ct->name, PROCESSES, THREADS);
    H_WAIT_FOR(h_excl_acquisitions(&ct->ex) > 100, 20000); /* going */
}

static void finish_contest(contest *ct) {
    h_excl_result r;
    h_excl_wait_more(&ct->ex, 50, 20000); /* still going */
    h_excl_stop(&ct->ex, 30000, &r);      /* fails unless every process exited 0 */
    h_excl_print(&r);
    assert_int_equal(r.overlaps, 0);
    assert_int_equal(r.counter, r.acquisitions);
    for (int p = 0; p < PROCESSES; p++)
        assert_true(r.per_process[p] > 0);
    assert_int_equal(r.bad_unlocks, 0); /* no hold lost on the way */
}

/* One move of the slot, pausing in each phase while the contest goes on. */
static void move_slot(h_cluster *hc, contest *ct, h_server *target) {
    h_migration m;
    long long pause = H_MS(400);
    long before = h_excl_acquisitions(&ct->ex);
    h_cluster_migrate_begin(hc, ct->slot, target, &m);
    h_cluster_migrate_keys(hc, &m); /* at once: the lock is likely held, its key moves */
    h_sleep_ms(pause);
    h_cluster_migrate_keys(hc, &m); /* none: new keys are made on the target (ASK) */
    h_sleep_ms(pause);
    h_cluster_migrate_finish(hc, &m);
    printf("      slot %d :%d -> :%d (%d key(s) moved), %ld acquisitions meanwhile\n", ct->slot,
           h_server_port(m.source), h_server_port(target), m.moved,
           h_excl_acquisitions(&ct->ex) - before);
    h_sleep_ms(pause);
}

static void test_exclusion_during_migration(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    contest ct;
    h_cluster_masters(hc, masters);
    start_contest(&ct, hc, masters[0], H_MS(3000));
    for (int round = 0; round < 2; round++) {
        move_slot(hc, &ct, masters[1]);
        move_slot(hc, &ct, masters[0]);
    }
    finish_contest(&ct);
}

/* ---- the kinds of several keys: a fair lock, a read-write lock's write handle ---- */

typedef struct kind_arg {
    rlock_config cfg;
    char name[128];
    int fair; /* else the write lock of rlock_get_rw */
} kind_arg;

typedef struct kind_ctx {
    rlock_client *client;
    rlock *lock, *read;
} kind_ctx;

static void *kind_open(const void *arg, int process) {
    const kind_arg *k = arg;
    kind_ctx *x = calloc(1, sizeof *x);
    (void)process;
    if (x == NULL || rlock_client_open(&k->cfg, &x->client) != RLOCK_OK)
        return NULL;
    int rc = k->fair ? rlock_get_fair(x->client, k->name, &x->lock)
                     : rlock_get_rw(x->client, k->name, &x->read, &x->lock);
    return rc == RLOCK_OK ? x : NULL;
}

static int kind_acquire(void *ctx, long long *valid_ms) {
    *valid_ms = -1;
    return rlock_lock(((kind_ctx *)ctx)->lock);
}

static int kind_release(void *ctx) {
    return rlock_unlock(((kind_ctx *)ctx)->lock);
}

static void kind_close(void *ctx) {
    kind_ctx *x = ctx;
    rlock_free(x->lock);
    rlock_free(x->read);
    rlock_client_close(x->client);
    free(x);
}

/*
 * The same contest over a fair lock or a read-write lock's write handle,
 * whose keys (the queue and its timeouts, the waiting writers' set) the
 * migration moves along with the hash, and which the contest's scripts
 * gather on the importing node when the migration has split them.
 */
static void kind_during_migration(h_cluster *hc, int fair) {
    h_server *masters[H_CLUSTER_NODES];
    kind_arg k = {.fair = fair};
    contest ct;
    h_cluster_masters(hc, masters);
    h_excl_config(&k.cfg, hc->url);
    h_cluster_name_on(hc, masters[0], h_unique_name(fair ? "fairexcl" : "rwexcl"), k.name,
                      sizeof k.name);
    snprintf(ct.name, sizeof ct.name, "%s", k.name);
    ct.slot = h_slot(ct.name, strlen(ct.name));
    h_excl_ops ops = {kind_open, kind_acquire, kind_release, kind_close, &k};
    h_excl_start_ops(&ct.ex, &ops, PROCESSES, THREADS);
    H_WAIT_FOR(h_excl_acquisitions(&ct.ex) > 100, 20000); /* going */
    for (int round = 0; round < 2; round++) {
        move_slot(hc, &ct, masters[1]);
        move_slot(hc, &ct, masters[0]);
    }
    finish_contest(&ct);
}

static void test_fair_exclusion_during_migration(void **state) {
    kind_during_migration(*state, 1);
}

static void test_rw_exclusion_during_migration(void **state) {
    kind_during_migration(*state, 0);
}

static void test_exclusion_during_failover(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    contest ct;
    h_cluster_masters(hc, masters);
    h_server *replica = h_cluster_replica_of(hc, masters[2]);
    start_contest(&ct, hc, masters[2], H_MS(H_FAILOVER_WATCHDOG_MS));
    for (int round = 0; round < 2; round++) {
        h_server *to = round == 0 ? replica : masters[2];
        long before = h_excl_acquisitions(&ct.ex);
        long long t0 = h_now_ms();
        h_cluster_failover(hc, to);
        printf("      CLUSTER FAILOVER to :%d in %lld ms, %ld acquisitions meanwhile\n",
               h_server_port(to), h_now_ms() - t0, h_excl_acquisitions(&ct.ex) - before);
        h_cluster_wait_settled(hc, 1, 20000); /* the next failover needs a linked replica */
        h_excl_wait_more(&ct.ex, 50, 20000);
    }
    finish_contest(&ct);
}

int main(void) {
    if (getenv("CLUSTER_FILTER")) /* e.g. CLUSTER_FILTER='test_fair*' */
        cmocka_set_test_filter(getenv("CLUSTER_FILTER"));
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_exclusion_during_migration),
        H_CLUSTER_TEST(test_exclusion_during_failover),
        H_CLUSTER_TEST(test_fair_exclusion_during_migration),
        H_CLUSTER_TEST(test_rw_exclusion_during_migration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
