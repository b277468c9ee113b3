/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uncontended.c - bench_cluster's uncontended section: lock+unlock, 1 thread,
 * names spread over the 3 masters, rlock vs raw hiredis sending the same two
 * EVALSHA straight to the owning master, rounds interleaved; MOVED/ASK of
 * every master before and after, scripts and PUBLISH verb per cycle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "bench_cluster.h"
#include "kind/kind.h"

#define UNC_PER_MASTER 16
#define UNC_NAMES (UNC_PER_MASTER * NMASTERS)

static char unc_names[UNC_NAMES][48]; /* m0, m1, m2, m0, ... */
static int unc_owner[UNC_NAMES];

static void unc_pick_names(void) {
    int have[NMASTERS] = {0}, total = 0;
    char buf[48];
    for (int i = 0; total < UNC_NAMES; i++) {
        snprintf(buf, sizeof buf, "bench:cl:unc:%d:%d", (int)getpid(), i);
        int m = owner_index(buf);
        if (m < 0 || have[m] == UNC_PER_MASTER)
            continue;
        int k = have[m]++ * NMASTERS + m;
        memcpy(unc_names[k], buf, sizeof buf);
        unc_owner[k] = m;
        total++;
    }
}

typedef struct unc_rlock {
    rlock *lock[UNC_NAMES];
    int next;
} unc_rlock;

static void *unc_rlock_init(void *arg, int index) {
    unc_rlock *t = calloc(1, sizeof *t);
    (void)index;
    for (int i = 0; t != NULL && i < UNC_NAMES; i++)
        if (rlock_get(arg, unc_names[i], &t->lock[i]) != RLOCK_OK)
            return NULL;
    return t;
}

static int unc_rlock_cycle(void *state) {
    unc_rlock *t = state;
    rlock *l = t->lock[t->next];
    t->next = (t->next + 1) % UNC_NAMES;
    int rc = rlock_lock(l);
    if (rc != RLOCK_OK) {
        fprintf(stderr, "  rlock_lock: %s\n", rlock_last_error());
        return -1;
    }
    rc = rlock_unlock(l);
    if (rc != RLOCK_OK)
        fprintf(stderr, "  rlock_unlock: %s\n", rlock_last_error());
    return rc == RLOCK_OK ? 0 : -1;
}

static void unc_rlock_fini(void *state) {
    unc_rlock *t = state;
    for (int i = 0; i < UNC_NAMES; i++)
        rlock_free(t->lock[i]);
    free(t);
}

/* The raw client: a connection per master, the argv of every name's two scripts. */
static char acquire_sha[41], release_sha[41];

typedef struct unc_raw {
    redisContext *c[NMASTERS];
    char owner[64];
    char channel[UNC_NAMES][80];
    const char *acq[UNC_NAMES][9], *rel[UNC_NAMES][8];
    int next;
} unc_raw;

static int load_sha(redisContext *c, int script, char *sha) {
    return raw_load_script(c, rlock__script_body(script), sha);
}

static void *unc_raw_init(void *arg, int index) {
    unc_raw *t = calloc(1, sizeof *t);
    uuid_t u;
    char uuid[37];
    (void)arg;
    uuid_generate(u);
    uuid_unparse_lower(u, uuid);
    snprintf(t->owner, sizeof t->owner, "%s:%d", uuid, index + 1);
    for (int m = 0; m < NMASTERS; m++)
        t->c[m] = master_conn(m);
    for (int i = 0; i < UNC_NAMES; i++) {
        snprintf(t->channel[i], sizeof t->channel[i], "redisson_lock__channel:{%.47s}",
                 unc_names[i]);
        /* SPUBLISH: the channel's hash tag is the name, so it is in the name's slot. */
        const char *acq[] = {"EVALSHA", acquire_sha, "1", unc_names[i], "30000", t->owner, "0",
                             t->channel[i], "spublish"};
        const char *rel[] = {"EVALSHA", release_sha, "1",           unc_names[i],
                             t->owner,  "1",         t->channel[i], "spublish"};
        memcpy(t->acq[i], acq, sizeof acq);
        memcpy(t->rel[i], rel, sizeof rel);
    }
    return t;
}

static int unc_raw_cycle(void *state) {
    unc_raw *t = state;
    int i = t->next;
    redisContext *c = t->c[unc_owner[i]];
    t->next = (i + 1) % UNC_NAMES;
    redisReply *r = redisCommandArgv(c, 9, t->acq[i], NULL);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->integer == 1 && r->element[1]->integer == 1;
    if (!ok)
        fprintf(stderr, "  raw acquire: %s\n", r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    if (r)
        freeReplyObject(r);
    if (!ok)
        return -1;
    r = redisCommandArgv(c, 8, t->rel[i], NULL);
    ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    if (!ok)
        fprintf(stderr, "  raw release: %s\n", r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static void unc_raw_fini(void *state) {
    unc_raw *t = state;
    for (int m = 0; m < NMASTERS; m++)
        redisFree(t->c[m]);
    free(t);
}

/* Loads both scripts on every master (connections in mc) and picks the names. */
static void unc_prepare(redisContext **mc) {
    for (int m = 0; m < NMASTERS; m++) {
        mc[m] = master_conn(m);
        if (load_sha(mc[m], RLOCK__SCRIPT_ACQUIRE, acquire_sha) < 0 ||
            load_sha(mc[m], RLOCK__SCRIPT_RELEASE, release_sha) < 0)
            die("%s", "SCRIPT LOAD failed");
    }
    unc_pick_names();
}

/*
 * One side of a comparison: its ops and state, and what its cycles cost so
 * far: wall and CPU seconds (the process's: every thread's, user + system),
 * and each cycle's latency when lat is kept.
 */
typedef struct unc_side {
    const char *what;
    const cycle_ops *ops;
    void *state;
    double wall, cpu;
    long long cycles;
    samples lat;
} unc_side;

/*
 * Raw and rlock run in turn, UNC_BLOCK cycles at a time (~25 ms here), so
 * that both meet the same moments of a loaded machine: with whole rounds of a
 * second in turn, pairs of the same code differed by +-15 % and more.
 */
#define UNC_BLOCK 250

/* Runs n cycles of side's ops on this thread (latencies kept if keep). */
static void unc_block(unc_side *side, long n, int keep) {
    double cpu0 = cpu_seconds(RUSAGE_SELF);
    uint64_t t0 = raw_now_ns(), start = t0;
    for (long i = 0; i < n; i++) {
        if (side->ops->cycle(side->state) < 0)
            die("%s", "a cycle failed");
        uint64_t end = raw_now_ns();
        if (keep)
            samples_add(&side->lat, end - start);
        start = end;
    }
    side->wall += (double)(raw_now_ns() - t0) / 1e9;
    side->cpu += cpu_seconds(RUSAGE_SELF) - cpu0;
    side->cycles += n;
}

static void unc_reset(unc_side *side) {
    side->wall = side->cpu = 0;
    side->cycles = 0;
    side->lat.n = 0;
}

/* Both sides' states made (one thread: the index is 0). */
static void unc_sides_init(unc_side *side, const cycle_ops *raw, const cycle_ops *rl) {
    side[0] = (unc_side){.what = "raw", .ops = raw};
    side[1] = (unc_side){.what = "rlock", .ops = rl};
    for (int k = 0; k < 2; k++)
        if ((side[k].state = side[k].ops->init(side[k].ops->arg, 0)) == NULL)
            die("%s", "cycle init failed");
}

static void unc_sides_fini(unc_side *side) {
    for (int k = 0; k < 2; k++) {
        side[k].ops->fini(side[k].state);
        samples_free(&side[k].lat);
    }
}

void bench_uncontended_count(long cycles) {
    redisContext *mc[NMASTERS];
    unc_prepare(mc);
    rlock_client *client = open_cluster_client(RLOCK_PUBSUB_AUTO, 0, NULL, NULL);
    cycle_ops raw = {unc_raw_init, unc_raw_cycle, unc_raw_fini, NULL};
    cycle_ops rl = {unc_rlock_init, unc_rlock_cycle, unc_rlock_fini, client};
    unc_side side[2];
    fprintf(stderr, "uncontended, counted: %ld raw and %ld rlock cycles (1 thread), in "
                    "alternating blocks of %d\n", cycles, cycles, UNC_BLOCK);
    unc_sides_init(side, &raw, &rl);
    for (long done = 0; done < cycles; done += UNC_BLOCK)
        for (int k = 0; k < 2; k++)
            unc_block(&side[k], cycles - done < UNC_BLOCK ? cycles - done : UNC_BLOCK, 0);
    for (int k = 0; k < 2; k++)
        fprintf(stderr, "  %s: %.1f us per cycle, client CPU %.1f us per cycle\n", side[k].what,
                side[k].wall * 1e6 / (double)cycles, side[k].cpu * 1e6 / (double)cycles);
    fprintf(stderr, "  rlock / raw cycles per second: %.3f\n", side[0].wall / side[1].wall);
    unc_sides_fini(side);
    rlock_client_close(client);
    for (int m = 0; m < NMASTERS; m++)
        redisFree(mc[m]);
}

/* A pair: blocks of raw and rlock in turn until each has run secs (latencies kept if keep). */
static void unc_pair(unc_side *side, double secs, int keep) {
    for (int k = 0; k < 2; k++)
        unc_reset(&side[k]);
    while (side[0].wall < secs || side[1].wall < secs)
        for (int k = 0; k < 2; k++)
            unc_block(&side[k], UNC_BLOCK, keep);
}

/* A side's figures for one pair: cycles/s, p50, p99 (ms), client CPU us per cycle. */
static void unc_figures(unc_side *side, double *ops, double *p50, double *p99, double *cpu) {
    samples_sort(&side->lat);
    *ops = (double)side->cycles / side->wall;
    *p50 = samples_pct_ms(&side->lat, 50);
    *p99 = samples_pct_ms(&side->lat, 99);
    *cpu = side->cpu * 1e6 / (double)side->cycles;
}

void bench_uncontended(double secs, int rounds, unc_result *out) {
    redisContext *mc[NMASTERS];
    unc_prepare(mc);
    rlock_client *client = open_cluster_client(RLOCK_PUBSUB_AUTO, 0, NULL, NULL);
    cycle_ops raw = {unc_raw_init, unc_raw_cycle, unc_raw_fini, NULL};
    cycle_ops rl = {unc_rlock_init, unc_rlock_cycle, unc_rlock_fini, client};
    double ro[32], r50[32], r99[32], o[32], p50[32], p99[32], rcpu[32], cpu[32], pr[32];
    long long all = 0, raw_all = 0;
    unc_side side[2];
    fprintf(stderr, "uncontended: 1 thread, %d names (%d per master), %d pairs of (raw %.1f s, "
                    "rlock %.1f s) in alternating blocks of %d cycles\n",
            UNC_NAMES, UNC_PER_MASTER, rounds, secs, secs, UNC_BLOCK);
    unc_sides_init(side, &raw, &rl);
    unc_pair(side, 0.3, 0); /* not recorded: fills rlock's slot table and pools */
    redirects a, b;
    redirects_take(mc, &a);
    long long s0 = calls_all(mc, "evalsha") + calls_all(mc, "eval");
    long long sp0 = calls_all(mc, "spublish"), pb0 = calls_all(mc, "publish");
    for (int r = 0; r < rounds; r++) {
        unc_pair(side, secs, 1);
        unc_figures(&side[0], &ro[r], &r50[r], &r99[r], &rcpu[r]);
        unc_figures(&side[1], &o[r], &p50[r], &p99[r], &cpu[r]);
        raw_all += side[0].cycles;
        all += side[1].cycles;
        pr[r] = o[r] / ro[r];
        fprintf(stderr, "  pair %d: raw %.0f/s, rlock %.0f/s (%.3f); client CPU us/cycle raw %.1f, "
                        "rlock %.1f\n", r + 1, ro[r], o[r], o[r] / ro[r], rcpu[r], cpu[r]);
    }
    redirects_take(mc, &b);
    /* The raw side fails on any error reply: the redirects, and every script and
     * publish beyond its two scripts and one SPUBLISH a cycle, are rlock's. */
    long long scripts = calls_all(mc, "evalsha") + calls_all(mc, "eval") - s0 - 2 * raw_all;
    *out = (unc_result){
        .raw_ops = median(ro, rounds), .raw_p50 = median(r50, rounds),
        .raw_p99 = median(r99, rounds), .ops = median(o, rounds), .p50 = median(p50, rounds),
        .p99 = median(p99, rounds), .moved = b.moved - a.moved, .ask = b.ask - a.ask,
        .cycles = all, .spublish = calls_all(mc, "spublish") - sp0 - raw_all,
        .publish = calls_all(mc, "publish") - pb0, .raw_cpu_us = median(rcpu, rounds),
        .cpu_us = median(cpu, rounds)};
    out->ratio = median(pr, rounds); /* sorted: */
    out->ratio_min = pr[0];
    out->ratio_max = pr[rounds - 1];
    out->redirects_per_cycle = all ? (double)(out->moved + out->ask) / (double)all : NAN;
    out->scripts_per_cycle = all ? (double)scripts / (double)all : NAN;
    unc_sides_fini(side);
    rlock_client_close(client);
    for (int m = 0; m < NMASTERS; m++)
        redisFree(mc[m]);
}
