/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_sentinel.c - what replication costs, measured in one run against a
 * master, two replicas and three sentinels of its own (test/harness
 * sentinel.c; 127.0.0.1 only):
 *
 *   single     uncontended lock+unlock, 1 thread, redis:// to the master
 *   sentinel   the same through redis-sentinel:// (target >= 0.95x single)
 *   wait_base  raw hiredis: the same two scripts, each pipelined with WAIT 1
 *   wait       rlock with replica_acks 1 (target >= 0.9x wait_base)
 *   failover   SENTINEL FAILOVER with a waiter blocked on a held lock and a
 *              watchdog lock held: from "a replica says ROLE master" to the
 *              waiter's acquisition and to the first renewal seen on the new
 *              master (target <= 300 ms each)
 *
 *   bench_sentinel [-d SECONDS] [-r ROUNDS] [-f FAILOVERS]
 *
 * Prints progress on stderr and one JSON line on stdout (test/bench/run.sh).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "harness.h"
#include "kind/kind.h"

/* ---- uncontended cycles through rlock ------------------------------------------- */

typedef struct unc_ctx {
    rlock_client *client;
} unc_ctx;

static void *unc_init(void *arg, int index) {
    unc_ctx *ctx = arg;
    char name[64];
    rlock *lock = NULL;
    snprintf(name, sizeof name, "bench:sentinel:%d:%d", (int)getpid(), index);
    return rlock_get(ctx->client, name, &lock) == RLOCK_OK ? lock : NULL;
}

static int unc_cycle(void *state) {
    if (rlock_lock(state) != RLOCK_OK)
        return -1;
    return rlock_unlock(state) == RLOCK_OK ? 0 : -1;
}

static void unc_fini(void *state) {
    rlock_free(state);
}

static rlock_client *open_client(const char *url, int replica_acks) {
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.replica_acks = replica_acks;
    cfg.retry_attempts = 20;
    cfg.retry_interval_ms = 250;
    if (rlock_client_open(&cfg, &c) != RLOCK_OK) {
        fprintf(stderr, "bench_sentinel: open %s: %s\n", url, rlock_last_error());
        exit(1);
    }
    return c;
}

static void cycles(const char *what, const char *url, int acks, double secs, int rounds,
                   cycle_result *res) {
    unc_ctx ctx = {open_client(url, acks)};
    cycle_ops ops = {unc_init, unc_cycle, unc_fini, &ctx};
    fprintf(stderr, "%s: 1 thread, %d rounds of %.1f s\n", what, rounds, secs);
    if (run_cycles(&ops, 1, secs, rounds, res) != 0)
        exit(1);
    rlock_client_close(ctx.client);
}

/* ---- the raw baseline: EVALSHA + WAIT 1 pipelined ---------------------------------- */

static char acquire_sha[41], release_sha[41]; /* loaded once on the master */

typedef struct raw_thread {
    redisContext *c;
    const char *acq[9], *rel[8];
    char key[64], channel[96];
} raw_thread;

static void *raw_init(void *arg, int index) {
    raw_thread *t = calloc(1, sizeof *t);
    if (t == NULL || (t->c = raw_connect(arg)) == NULL) {
        free(t);
        return NULL;
    }
    snprintf(t->key, sizeof t->key, "bench:sentinel:raw:%d:%d", (int)getpid(), index);
    snprintf(t->channel, sizeof t->channel, "redisson_lock__channel:{%s}", t->key);
    const char *acq[] = {"EVALSHA", acquire_sha, "1", t->key, "30000", "bench-owner:1", "0",
                         t->channel, "publish"};
    const char *rel[] = {"EVALSHA", release_sha,  "1", t->key, "bench-owner:1", "1",
                         t->channel, "publish"};
    memcpy(t->acq, acq, sizeof acq);
    memcpy(t->rel, rel, sizeof rel);
    return t;
}

/* A script (argc words) and WAIT 1 in one round trip, as rlock sends them; 0 if both answered. */
static int script_and_wait(raw_thread *t, int argc, const char **argv) {
    redisReply *r = NULL, *w = NULL;
    redisAppendCommandArgv(t->c, argc, argv, NULL);
    redisAppendCommand(t->c, "WAIT 1 1000");
    int ok = redisGetReply(t->c, (void **)&r) == REDIS_OK &&
             redisGetReply(t->c, (void **)&w) == REDIS_OK && r != NULL && w != NULL &&
             r->type != REDIS_REPLY_ERROR && w->type == REDIS_REPLY_INTEGER && w->integer >= 1;
    if (r)
        freeReplyObject(r);
    if (w)
        freeReplyObject(w);
    return ok ? 0 : -1;
}

static int raw_cycle(void *state) {
    raw_thread *t = state;
    return script_and_wait(t, 9, t->acq) == 0 ? script_and_wait(t, 8, t->rel) : -1;
}

static void raw_fini(void *state) {
    raw_thread *t = state;
    redisFree(t->c);
    free(t);
}

static int load(redisContext *c, int script, char *sha) {
    return raw_load_script(c, rlock__script_body(script), sha);
}

static void raw_cycles(const char *url, double secs, int rounds, cycle_result *res) {
    redisContext *c = raw_connect(url);
    if (c == NULL || load(c, RLOCK__SCRIPT_ACQUIRE, acquire_sha) < 0 ||
        load(c, RLOCK__SCRIPT_RELEASE, release_sha) < 0) {
        fprintf(stderr, "bench_sentinel: cannot load the scripts\n");
        exit(1);
    }
    redisFree(c);
    cycle_ops ops = {raw_init, raw_cycle, raw_fini, (void *)url};
    fprintf(stderr, "wait_base: raw EVALSHA + WAIT 1, 1 thread, %d rounds of %.1f s\n", rounds,
            secs);
    if (run_cycles(&ops, 1, secs, rounds, res) != 0)
        exit(1);
}

/* ---- failover ------------------------------------------------------------------- */

typedef struct failover_run {
    h_sentinels *hs;
    const h_server *before;     /* the master before */
    atomic_llong writable_ns;   /* a replica said ROLE master */
    atomic_llong acquired_ns;   /* the waiter got the lock */
    atomic_llong renewed_ns;    /* the watchdog lock's PTTL jumped on the new master */
    atomic_int switched;        /* the holder's client switched */
    atomic_int stop;
    const char *lock_name, *renew_name;
} failover_run;

static void on_event(const rlock_event *ev, void *arg) {
    failover_run *f = arg;
    if (f != NULL && ev->kind == RLOCK_EVENT_MASTER_SWITCHED)
        atomic_store(&f->switched, 1);
}

/* Polls the replicas' ROLE every 2 ms; then the new master's PTTL of renew_name. */
static void *watcher_main(void *arg) {
    failover_run *f = arg;
    h_server *now = NULL;
    while (now == NULL && !atomic_load(&f->stop)) {
        for (int d = 0; d < 3 && now == NULL; d++) {
            if (f->hs->data[d] == f->before)
                continue;
            redisContext *c = raw_connect(h_server_url(f->hs->data[d]));
            redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
            if (r && r->type == REDIS_REPLY_ARRAY && strcmp(r->element[0]->str, "master") == 0)
                now = f->hs->data[d];
            if (r)
                freeReplyObject(r);
            if (c)
                redisFree(c);
        }
        if (now == NULL)
            raw_sleep_ms(2);
    }
    atomic_store(&f->writable_ns, (long long)raw_now_ns());
    redisContext *c = now ? raw_connect(h_server_url(now)) : NULL;
    long long last = -3;
    while (c != NULL && !atomic_load(&f->stop) && atomic_load(&f->renewed_ns) == 0) {
        redisReply *r = redisCommand(c, "PTTL %s", f->renew_name);
        long long pttl = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
        if (r)
            freeReplyObject(r);
        if (last > 0 && pttl > last + 50)
            atomic_store(&f->renewed_ns, (long long)raw_now_ns());
        last = pttl;
        raw_sleep_ms(1);
    }
    if (c)
        redisFree(c);
    return NULL;
}

/* The waiter: blocked on lock_name until the holder's unlock on the new master. */
static void *waiter_main(void *arg) {
    rlock *lock = arg;
    return (void *)(intptr_t)rlock_try_lock(lock, 60000, RLOCK_LEASE_WATCHDOG);
}

static rlock_client *open_events(const char *url, failover_run *f) {
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = 30000;
    cfg.retry_attempts = 20;
    cfg.retry_interval_ms = 250;
    cfg.on_event = on_event;
    cfg.callback_arg = f;
    if (rlock_client_open(&cfg, &c) != RLOCK_OK) {
        fprintf(stderr, "bench_sentinel: open %s: %s\n", url, rlock_last_error());
        exit(1);
    }
    return c;
}

/* SENTINEL FAILOVER, not waiting for anything (a settling set-up refuses: ask again). */
static void start_failover(h_sentinels *hs) {
    redisContext *c = raw_connect(h_server_url(hs->sentinel[0]));
    for (int tries = 0; c != NULL && tries < 100; tries++) {
        redisReply *r = redisCommand(c, "SENTINEL FAILOVER %s", H_SENTINEL_MASTER_NAME);
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject(r);
        if (ok)
            break;
        raw_sleep_ms(100);
    }
    if (c)
        redisFree(c);
}

/* One failover; *to_acquire_ms and *to_renew_ms from the moment the new master is writable. */
static void one_failover(h_sentinels *hs, int n, double *to_acquire_ms, double *to_renew_ms) {
    char lock_name[64], renew_name[64];
    failover_run f = {.hs = hs, .lock_name = lock_name, .renew_name = renew_name};
    pthread_t watcher, waiter;
    rlock *held, *wanted, *renewed;
    void *rc;
    snprintf(lock_name, sizeof lock_name, "bench:failover:%d:%d", (int)getpid(), n);
    snprintf(renew_name, sizeof renew_name, "bench:renewed:%d:%d", (int)getpid(), n);
    rlock_client *a = open_events(hs->url, &f), *b = open_events(hs->url, NULL);
    if (rlock_get(a, lock_name, &held) || rlock_get(b, lock_name, &wanted) ||
        rlock_get(a, renew_name, &renewed) || rlock_lock(held) || rlock_lock(renewed)) {
        fprintf(stderr, "bench_sentinel: failover set-up: %s\n", rlock_last_error());
        exit(1);
    }
    pthread_create(&waiter, NULL, waiter_main, wanted);
    raw_sleep_ms(200);
    f.before = h_sentinels_named_master(hs, 0);
    pthread_create(&watcher, NULL, watcher_main, &f);
    start_failover(hs);
    while (!atomic_load(&f.switched))
        raw_sleep_ms(0.1);
    long long switched_ns = (long long)raw_now_ns();
    rlock_unlock(held); /* the holder lets go as soon as its client is on the new master */
    long long unlocked_ns = (long long)raw_now_ns();
    pthread_join(waiter, &rc);
    atomic_store(&f.acquired_ns, (long long)raw_now_ns());
    for (int i = 0; i < 5000 && atomic_load(&f.renewed_ns) == 0; i++)
        raw_sleep_ms(1);
    atomic_store(&f.stop, 1);
    pthread_join(watcher, NULL);
    if ((intptr_t)rc != RLOCK_OK || atomic_load(&f.renewed_ns) == 0) {
        fprintf(stderr, "bench_sentinel: failover %d: waiter %s, renewal %s\n", n + 1,
                rlock_status_name((int)(intptr_t)rc),
                atomic_load(&f.renewed_ns) ? "seen" : "not seen on the new master");
        exit(1);
    }
    *to_acquire_ms = (double)(atomic_load(&f.acquired_ns) - atomic_load(&f.writable_ns)) / 1e6;
    *to_renew_ms = (double)(atomic_load(&f.renewed_ns) - atomic_load(&f.writable_ns)) / 1e6;
    fprintf(stderr, "  failover %d: writable -> waiter acquired %.0f ms, -> renewed %.0f ms "
                    "(holder told of the switch at %.0f ms, its unlock done at %.0f ms)\n",
            n + 1, *to_acquire_ms, *to_renew_ms,
            (double)(switched_ns - atomic_load(&f.writable_ns)) / 1e6,
            (double)(unlocked_ns - atomic_load(&f.writable_ns)) / 1e6);
    rlock_unlock(wanted); /* another thread's hold: ENOTOWNER, harmless; it expires */
    rlock_unlock(renewed);
    rlock_free(held);
    rlock_free(wanted);
    rlock_free(renewed);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* The next failover needs a settled set-up: named by every sentinel, both replicas
 * following it (the old master is demoted about 10 s after the failover). */
static void settle(h_sentinels *hs) {
    h_server *m = NULL;
    H_WAIT_FOR((m = h_sentinels_named_master(hs, 0)) != NULL && h_replicas_linked(m) == 2,
               30000);
    h_sentinels_wait_named(hs, m, 30000);
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    double secs = 1, acq[16], ren[16];
    int rounds = 3, failovers = 3, opt;
    while ((opt = getopt(argc, argv, "d:r:f:")) != -1) {
        if (opt == 'd')
            secs = arg_num("-d", optarg, 0.1, 60);
        else if (opt == 'r')
            rounds = (int)arg_num("-r", optarg, 1, 20);
        else if (opt == 'f')
            failovers = (int)arg_num("-f", optarg, 1, 16);
        else
            return fprintf(stderr, "usage: bench_sentinel [-d S] [-r N] [-f N]\n"), 2;
    }
    h_sentinels *hs = h_sentinels_start();
    const char *master = h_server_url(hs->data[0]);
    cycle_result single, sentinel, wait_base, wait;
    cycles("single", master, 0, secs, rounds, &single);
    cycles("sentinel", hs->url, 0, secs, rounds, &sentinel);
    raw_cycles(master, secs, rounds, &wait_base);
    cycles("wait (replica_acks 1)", master, 1, secs, rounds, &wait);
    for (int n = 0; n < failovers; n++) {
        if (n > 0)
            settle(hs);
        one_failover(hs, n, &acq[n], &ren[n]);
    }
    jsonw j;
    j_begin(&j, "sentinel");
    j_num(&j, "single_ops", single.ops_per_s);
    j_num(&j, "sentinel_ops", sentinel.ops_per_s);
    j_num(&j, "sentinel_p50_ms", sentinel.p50_ms);
    j_num(&j, "sentinel_p99_ms", sentinel.p99_ms);
    j_num(&j, "wait_base_ops", wait_base.ops_per_s);
    j_num(&j, "wait_ops", wait.ops_per_s);
    j_num(&j, "wait_p50_ms", wait.p50_ms);
    j_num(&j, "wait_p99_ms", wait.p99_ms);
    j_num(&j, "nowait_p50_ms", single.p50_ms);
    j_num(&j, "nowait_p99_ms", single.p99_ms);
    j_int(&j, "failovers", failovers);
    j_num(&j, "to_acquire_ms", median(acq, failovers));
    j_num(&j, "to_renew_ms", median(ren, failovers));
    j_end(&j);
    h_sentinels_stop(hs);
    return 0;
}
