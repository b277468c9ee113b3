/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uncontended.c - bench_rlock uncontended: lock+unlock cycles/s and latency,
 * threads on distinct locks (test/bench/run.sh section 2). With --stats-ms
 * a thread reads rlock_client_stats that often meanwhile, as an exporter
 * would (the figure beside the default run shows what reading costs).
 */
#include <unistd.h>

#include "bench_rlock.h"

typedef struct unc_ctx {
    rlock_client *client;
    long long lease;
} unc_ctx;

typedef struct unc_thread {
    rlock *lock;
    long long lease;
} unc_thread;

static void *unc_init(void *arg, int index) {
    unc_ctx *ctx = arg;
    unc_thread *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->lock = get_lock(ctx->client, "bench:unc:%ld:%ld", (long)getpid(), index);
    t->lease = ctx->lease;
    return t;
}

static int unc_cycle(void *state) {
    unc_thread *t = state;
    if (check(take(t->lock, t->lease), "rlock_lock") < 0)
        return -1;
    return check(rlock_unlock(t->lock), "rlock_unlock");
}

/* The exporter stand-in: rlock_client_stats every o->stats_ms until told to stop. */
typedef struct scraper {
    rlock_client *client;
    int every_ms;
    atomic_int stop;
    long reads;
    rlock_stats last;
} scraper;

static void *scrape_main(void *arg) {
    scraper *s = arg;
    while (!atomic_load(&s->stop)) {
        s->last.struct_size = sizeof s->last;
        if (rlock_client_stats(s->client, &s->last) == RLOCK_OK)
            s->reads++;
        raw_sleep_ms(s->every_ms);
    }
    return NULL;
}

static void unc_fini(void *state) {
    unc_thread *t = state;
    rlock_free(t->lock);
    free(t);
}

int bench_uncontended(const options *o) {
    unc_ctx ctx = {open_client(o, 0, o->threads), o->lease};
    fprintf(stderr, "uncontended: %d thread(s) on distinct locks, %d rounds of %.1f s\n",
            o->threads, o->rounds, o->secs);
    cycle_ops ops = {unc_init, unc_cycle, unc_fini, &ctx};
    cycle_result res;
    redisContext *redis = raw_or_exit(o->url);
    rstats s0, s1;
    scraper scrape = {.client = ctx.client, .every_ms = o->stats_ms};
    pthread_t scrape_thread;
    if (o->stats_ms > 0)
        pthread_create(&scrape_thread, NULL, scrape_main, &scrape);
    rstats_take(redis, "commandstats", &s0);
    double cpu0 = cpu_seconds(RUSAGE_SELF);
    int rc = run_cycles(&ops, o->threads, o->secs, o->rounds, &res);
    double cpu = cpu_seconds(RUSAGE_SELF) - cpu0; /* all our threads, the library's too */
    rstats_take(redis, "commandstats", &s1);
    if (o->stats_ms > 0) {
        atomic_store(&scrape.stop, 1);
        pthread_join(scrape_thread, NULL);
    }
    redisFree(redis);
    rlock_client_close(ctx.client);
    jsonw j;
    j_begin(&j, "uncontended");
    j_int(&j, "threads", o->threads);
    j_int(&j, "lease_ms", o->lease);
    j_cycle_result(&j, &res);
    j_int(&j, "register_client", o->register_client != 0);
    j_int(&j, "stats_ms", o->stats_ms);
    j_int(&j, "stats_reads", scrape.reads);
    j_num(&j, "client_cpu_us_per_cycle", cpu * 1e6 / (double)res.all_cycles);
    j_num(&j, "scripts_per_cycle", (double)(rstats_scripts(&s1) - rstats_scripts(&s0)) / (double)res.all_cycles);
    j_int(&j, "rounds", o->rounds);
    j_num(&j, "round_s", o->secs);
    j_end(&j);
    return rc < 0 ? 1 : 0;
}
