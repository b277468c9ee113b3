/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * verdict.c - the end of the demo: the final stock and sales read back from
 * Redis, items sold twice or never, hand-off percentiles, the summary, and
 * the exit status (0 only if nothing was oversold and every count is exact).
 */
#include <stdio.h>
#include <stdlib.h>

#include "demo.h"

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Percentile p (0..100) of sorted v[n], in ms; 0 when there are no samples. */
static double pct_ms(const uint64_t *v, long n, double p) {
    if (n == 0)
        return 0;
    long i = (long)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)v[i] / 1e6;
}

typedef struct verdict {
    long long stock_left, redis_sold;
    long twice, unsold; /* items sold more than once, items never sold */
} verdict;

static int read_verdict(const options *opt, shared *sh, verdict *v) {
    redisContext *redis = raw_connect(opt->url);
    if (redis == NULL || raw_int(redis, &v->stock_left, "GET " STOCK_KEY) < 0 ||
        raw_int(redis, &v->redis_sold, "GET " SOLD_KEY) < 0) {
        redisFree(redis);
        return -1;
    }
    redisFree(redis);
    v->twice = v->unsold = 0;
    for (long k = 1; k <= opt->stock; k++) {
        int sales = atomic_load(&sh->item_sales[k]);
        v->twice += sales > 1;
        v->unsold += sales == 0;
    }
    return 0;
}

/* Hand-off percentiles of one kind (stayed in the process, or crossed to another). */
typedef struct handoffs {
    long n;
    double p50, p99; /* ms */
} handoffs;

/* The hand-offs whose handoff_local is `local`, with their p50 and p99. */
static handoffs handoff_percentiles(shared *sh, int local) {
    handoffs h = {0, 0, 0};
    long total = atomic_load(&sh->nhandoffs);
    total = total < sh->handoff_cap ? total : sh->handoff_cap;
    uint64_t *lat = malloc((size_t)(total ? total : 1) * sizeof *lat);
    if (lat == NULL)
        return h;
    for (long i = 0; i < total; i++)
        if (atomic_load(&sh->handoff_local[i]) == local)
            lat[h.n++] = atomic_load(&sh->handoff_ns[i]);
    qsort(lat, (size_t)h.n, sizeof *lat, cmp_u64);
    h.p50 = pct_ms(lat, h.n, 50);
    h.p99 = pct_ms(lat, h.n, 99);
    free(lat);
    return h;
}

/* The library's default local_handoffs. */
static int default_local_handoffs(void) {
    rlock_config defaults;
    rlock_config_init(&defaults);
    return defaults.local_handoffs;
}

/* What the split of sales between processes means, and what to compare it with. */
static void explain_split(const options *opt, const handoffs *local, const handoffs *remote) {
    int in_a_row = opt->local_handoffs >= 0 ? opt->local_handoffs : default_local_handoffs();
    printf("\nWhat the split between processes means:\n");
    if (opt->fair) {
        printf("  A fair lock serves buyers of every process in the order they asked, so each\n"
               "  process sells about as much as the others; no in-process hand-off overtakes\n"
               "  the queue, and each hand-off wakes the queue's head only.\n");
        return;
    }
    if (in_a_row > 0)
        printf("  When a thread unlocks while another thread of its own process waits, rlock\n"
               "  hands the lock straight to it in one script: no PUBLISH, no wake-up, no\n"
               "  acquisition round trip (p50 %.3f ms here, against %.3f ms across processes).\n"
               "  %ld of %ld hand-offs stayed in their process. After %d in a row the next\n"
               "  unlock releases to everybody, so no process is shut out.\n",
               local->p50, remote->p50, local->n, local->n + remote->n, in_a_row);
    else
        printf("  Every unlock released the lock to all processes (--local-handoffs 0, as\n"
               "  Redisson does): each hand-off is a PUBLISH, a wake-up and a new attempt.\n");
    printf("  The lock is not fair (nor is Redisson's RLock): at a release the waiters race,\n"
           "  so processes sell in bursts and the split is uneven. Compare:\n"
           "    make demo DEMO_ARGS='--local-handoffs %d'   %s\n"
           "    make demo DEMO_ARGS='--fair'                an even split, in arrival order\n",
           in_a_row > 0 ? 0 : default_local_handoffs(),
           in_a_row > 0 ? "every hand-off crosses Redis" : "in-process hand-offs on (the default)");
}

static void print_summary(const options *opt, shared *sh, const verdict *v) {
    long sold = atomic_load(&sh->sold), acq = atomic_load(&sh->acquisitions);
    double secs = (double)(atomic_load(&sh->end_ns) - atomic_load(&sh->start_ns)) / 1e9;
    handoffs local = handoff_percentiles(sh, 1), remote = handoff_percentiles(sh, 0);
    printf("demo: %d processes x %d threads sold a stock of %ld under rlock \"%s\"\n", opt->procs,
           opt->threads, opt->stock, LOCK_NAME);
    printf("  sold             %ld (Redis sold counter %lld)\n", sold, v->redis_sold);
    printf("  oversold         %ld\n", sold - opt->stock);
    printf("  stock left       %lld (lowest seen under the lock: %ld)\n", v->stock_left,
           atomic_load(&sh->min_seen));
    printf("  items sold twice %ld, never sold %ld\n", v->twice, v->unsold);
    printf("  sold per process");
    for (int p = 0; p < opt->procs; p++)
        printf(" %ld", atomic_load(&sh->proc_sold[p]));
    printf("\n");
    printf("  lock ops         %ld acquisitions in %.2f s = %.0f/s (each with one reentrant hold;\n"
           "                   a sale holds the lock %ld us)\n",
           acq, secs, secs > 0 ? (double)acq / secs : 0, opt->work_us);
    printf("  hand-offs        in-process    %6ld  p50 %.3f ms  p99 %.3f ms\n", local.n, local.p50,
           local.p99);
    printf("                   cross-process %6ld  p50 %.3f ms  p99 %.3f ms\n", remote.n, remote.p50,
           remote.p99);
    explain_split(opt, &local, &remote);
}

/* Prints the summary; returns the exit status. */
int summarize(const options *opt, shared *sh, int failed_children) {
    verdict v;
    if (read_verdict(opt, sh, &v) < 0) {
        fprintf(stderr, "demo: cannot read the final stock\n");
        return 1;
    }
    print_summary(opt, sh, &v);
    long sold = atomic_load(&sh->sold), acq = atomic_load(&sh->acquisitions);
    long expected_acq = opt->stock + (long)opt->procs * opt->threads; /* + one last look each */
    int exact = sold == opt->stock && v.redis_sold == opt->stock && v.stock_left == 0 &&
                atomic_load(&sh->min_seen) >= 0 && v.twice == 0 && v.unsold == 0 &&
                acq == expected_acq;
    int ok = exact && atomic_load(&sh->errors) == 0 && failed_children == 0;
    if (!exact)
        printf("  counts are NOT exact (expected %ld acquisitions = stock + one last look per thread)\n",
               expected_acq);
    printf("%s\n", ok ? "OK: nothing oversold, every count exact" : "FAILED");
    return ok ? 0 : 1;
}
