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

/* Hand-off p50 and p99 in ms; returns how many hand-offs were timed. */
static long handoff_percentiles(shared *sh, double *p50, double *p99) {
    long n = atomic_load(&sh->nhandoffs);
    n = n < sh->handoff_cap ? n : sh->handoff_cap;
    uint64_t *lat = malloc((size_t)(n ? n : 1) * sizeof *lat);
    *p50 = *p99 = 0;
    if (lat == NULL)
        return 0;
    for (long i = 0; i < n; i++)
        lat[i] = atomic_load(&sh->handoff_ns[i]);
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
    *p50 = pct_ms(lat, n, 50);
    *p99 = pct_ms(lat, n, 99);
    free(lat);
    return n;
}

static void print_summary(const options *opt, shared *sh, const verdict *v) {
    long sold = atomic_load(&sh->sold), acq = atomic_load(&sh->acquisitions);
    double secs = (double)(atomic_load(&sh->end_ns) - atomic_load(&sh->start_ns)) / 1e9;
    double p50, p99;
    long n = handoff_percentiles(sh, &p50, &p99);
    printf("demo: %d processes x %d threads sold a stock of %ld under rlock \"%s\"\n", opt->procs,
           opt->threads, opt->stock, LOCK_NAME);
    printf("  sold            %ld (Redis sold counter %lld)\n", sold, v->redis_sold);
    printf("  oversold        %ld\n", sold - opt->stock);
    printf("  stock left      %lld (lowest seen under the lock: %ld)\n", v->stock_left,
           atomic_load(&sh->min_seen));
    printf("  items sold twice %ld, never sold %ld\n", v->twice, v->unsold);
    printf("  sold per process");
    for (int p = 0; p < opt->procs; p++)
        printf(" %ld", atomic_load(&sh->proc_sold[p]));
    printf("\n");
    printf("  lock ops        %ld acquisitions in %.2f s = %.0f/s (each with one reentrant hold)\n",
           acq, secs, secs > 0 ? (double)acq / secs : 0);
    printf("  hand-off        p50 %.3f ms  p99 %.3f ms  (%ld hand-offs to a waiting thread)\n", p50,
           p99, n);
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
