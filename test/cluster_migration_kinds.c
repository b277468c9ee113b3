/*
 * cluster_migration_kinds.c - the locks of several keys (read-write, fair,
 * fenced) while their slot migrates and a migration moved some of their
 * keys but not the others (issue 22, item 4). Each case takes a fresh name
 * on one master, holds the lock as the case says, sets the slot MIGRATING
 * to another master, MIGRATEs the chosen keys one by one (the others stay
 * on the source), and then uses the lock in that state: every call must
 * give its true answer at once -- no TRYAGAIN, no "non local key", no hold
 * read as gone -- and never two owners. The migration is then finished
 * (the remaining keys moved, SETSLOT NODE) and nothing was reported lost.
 *
 *   read-write  two readers (owners of one client) and the hash; moved: no
 *               key, one hold key, both hold keys, the hash, the hash and a
 *               hold key, all. Each reader in turn unlocks (the other
 *               still reads: a writer is busy), reads again and re-enters;
 *               then both leave and a writer takes the lock; names with
 *               and without a hash tag
 *   read-write, watchdog  two watchdog readers (1.5 s lease) with a hold
 *               key or the hash moved: renewed for three leases, never
 *               reported lost; then they leave and a writer gets it
 *   fair        a holder, a waiter in the queue (a thread of its own), the
 *               hash, the queue and the timeouts; moved: each subset of
 *               one or two keys. A third owner's try is busy, the holder
 *               re-enters and unlocks, the waiter gets the lock at once
 *   multi       a multi-lock of a fair lock whose slot migrates (held by
 *               another owner, then free) and a plain lock: one fan-out,
 *               busy then held
 *   fenced      a holder and the token counter; moved: either. Each
 *               acquisition's token is above the last, the resource
 *               helper's key and fence move key by key too
 *
 * Leases are explicit (60 s) except in the watchdog case. One cluster per
 * test.
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

#define LEASE 60000
#define MAX_KEYS 8

typedef struct mig {
    h_cluster *hc;
    h_cseen *seen;
    rlock_client *c;
    h_migration m;
    char name[128];
} mig;

static void open_case(mig *g, h_cluster *hc, const char *prefix) {
    h_server *masters[H_CLUSTER_NODES];
    memset(g, 0, sizeof *g);
    g->hc = hc;
    g->seen = h_cseen_new("A");
    g->c = h_cluster_open(hc, H_MS(3000), RLOCK_PUBSUB_AUTO, g->seen);
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    h_cluster_name_on(hc, masters[0], h_unique_name(prefix), g->name, sizeof g->name);
    g->m.source = masters[0];
    g->m.target = masters[1];
}

/* The keys of the slot on the source, into keys (MAX_KEYS); returns how many. */
static int source_keys(const mig *g, char keys[][256]) {
    redisContext *s = h_server_redis(g->m.source);
    redisReply *r = h_cmd(s, "CLUSTER GETKEYSINSLOT %d 100", g->m.slot);
    int n = 0;
    for (size_t i = 0; i < r->elements && n < MAX_KEYS; i++)
        snprintf(keys[n++], 256, "%s", r->element[i]->str);
    freeReplyObject(r);
    redisFree(s);
    return n;
}

/* The slot MIGRATING, and the keys named in `moved` MIGRATEd one by one. */
static void split(mig *g, const char *const *moved, int n) {
    h_cluster_migrate_begin(g->hc, h_slot(g->name, strlen(g->name)), g->m.target, &g->m);
    redisContext *s = h_server_redis(g->m.source);
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        long long until = h_now_ms() + h_scaled(5000);
        /* A node of a loaded machine may miss the 1 s node timeout and call the cluster down
           for a moment: the setup waits for it to come back, as an operator would. */
        do {
            if (r != NULL) {
                freeReplyObject(r);
                h_sleep_ms(100);
            }
            r = h_cmd(s, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %s", h_server_port(g->m.target), "",
                      moved[i]);
        } while (r->type == REDIS_REPLY_ERROR && strstr(r->str, "CLUSTERDOWN") != NULL &&
                 h_now_ms() < until);
        if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)
            H_FAIL("MIGRATE of %s: %s", moved[i], r->type == REDIS_REPLY_ERROR ? r->str : "?");
        freeReplyObject(r);
    }
    redisFree(s);
    printf("      %s: %d key(s) moved:", g->name, n);
    for (int i = 0; i < n; i++)
        printf(" %s", moved[i]);
    printf("\n");
}

static void finish_case(mig *g) {
    h_cluster_migrate_keys(g->hc, &g->m);
    h_cluster_migrate_finish(g->hc, &g->m);
    assert_int_equal(h_cseen_lost(g->seen), 0);
    rlock_client_close(g->c);
    h_cseen_free(g->seen);
}

/* ---- read-write -------------------------------------------------------------- */

/* Which keys a read-write case moves: hold keys by index, then the hash. */
typedef struct rw_case {
    int holds; /* the first `holds` hold keys */
    int hash;  /* and the hash: 1 first, 2 after the hold keys */
} rw_case;

/* me leaves and comes back while other reads on; a writer is busy throughout. */
static void reader_turn(rlock *r, rlock *w, uint64_t me, uint64_t other, uint64_t writer) {
    H_ASSERT_RC(rlock_unlock_as(r, me), RLOCK_OK);
    assert_int_equal(rlock_is_held_by(r, other), 1);
    assert_int_equal(rlock_is_held_by(r, me), 0);
    H_ASSERT_RC(rlock_try_lock_as(w, writer, 0, H_MS(LEASE)), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock_as(r, me, 0, H_MS(LEASE)), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(r, me, 0, H_MS(LEASE)), RLOCK_OK); /* a second hold key */
    assert_int_equal(rlock_hold_count_as(r, me), 2);
    H_ASSERT_RC(rlock_unlock_as(r, me), RLOCK_OK);
}

/* The name with a hash tag, "{<name>}:tagged": the same slot. */
static void tag_name(mig *g) {
    char plain[sizeof g->name];
    snprintf(plain, sizeof plain, "%s", g->name);
    snprintf(g->name, sizeof g->name, "{%.100s}:tagged", plain);
}

static void rw_split(h_cluster *hc, rw_case k, int tagged) {
    mig g;
    rlock *r, *w;
    char keys[MAX_KEYS][256];
    const char *moved[MAX_KEYS];
    int n = 0;
    open_case(&g, hc, "rwsplit");
    if (tagged)
        tag_name(&g);
    H_ASSERT_RC(rlock_get_rw(g.c, g.name, &r, &w), RLOCK_OK);
    uint64_t a = rlock_owner_new(), b = rlock_owner_new(), writer = rlock_owner_new();
    H_ASSERT_RC(rlock_lock_as(r, a, H_MS(LEASE)), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(r, b, H_MS(LEASE)), RLOCK_OK);
    g.m.slot = h_slot(g.name, strlen(g.name));
    int nkeys = source_keys(&g, keys);
    assert_int_equal(nkeys, 3); /* the hash and one hold key per reader */
    if (k.hash == 1)
        moved[n++] = g.name;
    for (int i = 0; i < nkeys && n < MAX_KEYS; i++)
        if (strcmp(keys[i], g.name) != 0 && (int)(n - (k.hash == 1)) < k.holds)
            moved[n++] = keys[i];
    if (k.hash == 2)
        moved[n++] = g.name;
    split(&g, moved, n);
    reader_turn(r, w, a, b, writer); /* the case first: a reader's unlock */
    reader_turn(r, w, b, a, writer);
    H_ASSERT_RC(rlock_unlock_as(r, a), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(r, b), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(w, writer, 0, H_MS(LEASE)), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(r, a, 0, H_MS(LEASE)), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock_as(w, writer), RLOCK_OK);
    rlock_free(r);
    rlock_free(w);
    finish_case(&g);
}

static void test_rw_keys_split(void **state) {
    const rw_case cases[] = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        rw_split(*state, cases[i], 0);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        rw_split(*state, cases[i], 1); /* a name with a hash tag */
}

/*
 * Watchdog readers (a 1.5 s lease, renewed every 500 ms) while one hold key
 * (hash 0) or the hash (hash 1) has moved: renewed through the split for
 * three leases, never reported lost; they unlock and a writer gets it.
 */
static void rw_watchdog_split(h_cluster *hc, int hash) {
    mig g;
    rlock *r, *w;
    char keys[MAX_KEYS][256];
    const char *moved[1];
    open_case(&g, hc, "rwwatch");
    rlock_client_close(g.c); /* a client of a short watchdog lease instead */
    g.c = h_cluster_open(hc, H_MS(1500), RLOCK_PUBSUB_AUTO, g.seen);
    H_ASSERT_RC(rlock_get_rw(g.c, g.name, &r, &w), RLOCK_OK);
    uint64_t a = rlock_owner_new(), b = rlock_owner_new(), writer = rlock_owner_new();
    H_ASSERT_RC(rlock_lock_as(r, a, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(r, b, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    g.m.slot = h_slot(g.name, strlen(g.name));
    int nkeys = source_keys(&g, keys);
    assert_int_equal(nkeys, 3);
    moved[0] = hash ? g.name : strcmp(keys[0], g.name) != 0 ? keys[0] : keys[1];
    split(&g, moved, 1);
    h_sleep_ms(H_MS(4500));
    printf("      renewal failures %d, lost %d\n",
           atomic_load(&g.seen->kinds[RLOCK_EVENT_RENEWAL_FAILED]), h_cseen_lost(g.seen));
    assert_int_equal(h_cseen_lost(g.seen), 0);
    assert_int_equal(rlock_is_held_by(r, a), 1);
    assert_int_equal(rlock_is_held_by(r, b), 1);
    H_ASSERT_RC(rlock_try_lock_as(w, writer, 0, H_MS(LEASE)), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock_as(r, a), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(r, b), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(w, writer, 0, H_MS(LEASE)), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(w, writer), RLOCK_OK);
    rlock_free(r);
    rlock_free(w);
    finish_case(&g);
}

static void test_rw_watchdog_keys_split(void **state) {
    rw_watchdog_split(*state, 0);
    rw_watchdog_split(*state, 1);
}

/* ---- fair -------------------------------------------------------------------- */

static void fair_split(h_cluster *hc, unsigned which) {
    mig g;
    rlock *f;
    char queue[160], timeouts[160];
    const char *moved[3];
    int n = 0;
    open_case(&g, hc, "fairsplit");
    H_ASSERT_RC(rlock_get_fair(g.c, g.name, &f), RLOCK_OK);
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", g.name);
    snprintf(timeouts, sizeof timeouts, "redisson_lock_timeout:{%s}", g.name);
    uint64_t holder = rlock_owner_new(), other = rlock_owner_new();
    H_ASSERT_RC(rlock_lock_as(f, holder, H_MS(LEASE)), RLOCK_OK);
    h_actor *waiter = h_actor_start();
    struct h_try t = {.lock = f, .wait_ms = H_MS(30000), .lease_ms = H_MS(LEASE)};
    h_actor_post(waiter, h_op_try_lock, &t);
    g.m.slot = h_slot(g.name, strlen(g.name));
    char keys[MAX_KEYS][256];
    H_WAIT_FOR(source_keys(&g, keys) == 3, 5000); /* queued: the queue and its timeouts */
    if (which & 1)
        moved[n++] = g.name;
    if (which & 2)
        moved[n++] = queue;
    if (which & 4)
        moved[n++] = timeouts;
    split(&g, moved, n);
    H_ASSERT_RC(rlock_try_lock_as(f, other, 0, H_MS(LEASE)), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock_as(f, holder, 0, H_MS(LEASE)), RLOCK_OK);
    assert_int_equal(rlock_hold_count_as(f, holder), 2);
    H_ASSERT_RC(rlock_unlock_as(f, holder), RLOCK_OK);
    assert_int_equal(h_actor_done(waiter), 0);
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_unlock_as(f, holder), RLOCK_OK);
    H_ASSERT_RC(h_actor_wait(waiter, 10000), RLOCK_OK);
    printf("      the waiter got it %lld ms after the unlock\n", h_actor_finished_ms(waiter) - t0);
    H_ASSERT_RC(rlock_try_lock_as(f, other, 0, H_MS(LEASE)), RLOCK_BUSY);
    H_ASSERT_RC(h_actor_call(waiter, h_op_unlock, f), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(f, other, 0, H_MS(LEASE)), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(f, other), RLOCK_OK);
    h_actor_stop(waiter);
    rlock_free(f);
    finish_case(&g);
}

static void test_fair_keys_split(void **state) {
    const unsigned cases[] = {0, 1, 2, 4, 6, 3};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        fair_split(*state, cases[i]);
}

/*
 * A multi-lock (one fan-out for its members) of a fair lock whose slot
 * migrates and a plain lock elsewhere: the fair lock held by another owner
 * (busy, the true answer: the exporting node has its hash, not its queue,
 * and answers TRYAGAIN), then free with no key left on the exporting node
 * (ASK; the importing node answers TRYAGAIN to three declared keys none of
 * which exists).
 */
static void test_multi_fair_keys_split(void **state) {
    mig g;
    rlock *f, *members[2];
    rlock_multi *m;
    char other[128];
    h_server *masters[H_CLUSTER_NODES];
    open_case(&g, *state, "multisplit");
    h_cluster_masters(g.hc, masters);
    h_cluster_name_on(g.hc, masters[2], h_unique_name("multiplain"), other, sizeof other);
    H_ASSERT_RC(rlock_get_fair(g.c, g.name, &f), RLOCK_OK);
    members[0] = f;
    members[1] = h_get(g.c, other);
    H_ASSERT_RC(rlock_multi_new(members, 2, &m), RLOCK_OK);
    uint64_t holder = rlock_owner_new();
    H_ASSERT_RC(rlock_lock_as(f, holder, H_MS(LEASE)), RLOCK_OK);
    split(&g, NULL, 0);
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, H_MS(LEASE)), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock_as(f, holder), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, H_MS(LEASE)), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    rlock_multi_free(m);
    rlock_free(members[0]);
    rlock_free(members[1]);
    finish_case(&g);
}

/* ---- fenced ------------------------------------------------------------------ */

static void fenced_split(h_cluster *hc, int counter_moved) {
    mig g;
    rlock *f;
    char counter[160], resource[160], fence[180];
    long long t1 = 0, t2 = 0, t3 = 0;
    open_case(&g, hc, "fencesplit");
    H_ASSERT_RC(rlock_get_fenced(g.c, g.name, &f), RLOCK_OK);
    snprintf(counter, sizeof counter, "redisson_lock_token:{%s}", g.name);
    snprintf(resource, sizeof resource, "{%s}:resource", g.name);
    snprintf(fence, sizeof fence, "rlock_fence:%s", resource); /* a key with a tag */
    uint64_t holder = rlock_owner_new(), other = rlock_owner_new();
    H_ASSERT_RC(rlock_try_lock_fenced_as(f, holder, 0, H_MS(LEASE), &t1), RLOCK_OK);
    H_ASSERT_RC(rlock_fenced_set(g.c, resource, t1, "one", 3), RLOCK_OK);
    g.m.slot = h_slot(g.name, strlen(g.name));
    const char *moved[] = {counter_moved ? counter : g.name, counter_moved ? fence : resource};
    split(&g, moved, 2);
    H_ASSERT_RC(rlock_try_lock_fenced_as(f, holder, 0, H_MS(LEASE), &t2), RLOCK_OK);
    H_ASSERT_RC(rlock_fenced_set(g.c, resource, t2, "two", 3), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced_as(f, other, 0, H_MS(LEASE), &t3), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock_as(f, holder), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(f, holder), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced_as(f, other, 0, H_MS(LEASE), &t3), RLOCK_OK);
    printf("      tokens %lld, %lld, %lld\n", t1, t2, t3);
    assert_true(t1 < t2 && t2 < t3);
    H_ASSERT_RC(rlock_fenced_set(g.c, resource, t1, "late", 4), RLOCK_ESTALE);
    H_ASSERT_RC(rlock_fenced_set(g.c, resource, t3, "three", 5), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(f, other), RLOCK_OK);
    rlock_free(f);
    finish_case(&g);
}

static void test_fenced_keys_split(void **state) {
    fenced_split(*state, 1);
    fenced_split(*state, 0);
}

int main(void) {
    if (getenv("CLUSTER_FILTER")) /* e.g. CLUSTER_FILTER='test_rw*' */
        cmocka_set_test_filter(getenv("CLUSTER_FILTER"));
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_rw_keys_split),
        H_CLUSTER_TEST(test_rw_watchdog_keys_split),
        H_CLUSTER_TEST(test_fair_keys_split),
        H_CLUSTER_TEST(test_multi_fair_keys_split),
        H_CLUSTER_TEST(test_fenced_keys_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
