/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench.h - what the benchmark programs share: timing, percentiles, Redis
 * INFO snapshots, shared memory, the timed lock/unlock cycle driver, and the
 * one-line JSON result each program prints on stdout.
 *
 * The baseline (raw hiredis) and the rlock programs run their cycles through
 * the same driver, run_cycles(), so that the two figures differ only by what
 * one cycle does.
 *
 * Header-only (static inline): every .c file in test/bench is its own program
 * (bench_rlock's subcommands are in test/bench/rlock/ and bench_cluster's
 * sections in test/bench/cluster/, each linked with its program).
 */
#ifndef RLOCK_BENCH_H
#define RLOCK_BENCH_H

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rawredis.h"

/* ---- samples and percentiles ---------------------------------------------- */

typedef struct samples {
    uint64_t *v; /* nanoseconds */
    size_t n, cap;
} samples;

static inline int samples_add(samples *s, uint64_t ns) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4096;
        uint64_t *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = ns;
    return 0;
}

static inline void samples_free(samples *s) {
    free(s->v);
    *s = (samples){0};
}

static inline int bench_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static inline void samples_sort(samples *s) {
    qsort(s->v, s->n, sizeof *s->v, bench_cmp_u64);
}

/* Percentile p (0..100, nearest rank) of sorted samples, in ms. */
static inline double samples_pct_ms(const samples *s, double p) {
    if (s->n == 0)
        return 0;
    size_t i = (size_t)ceil(p / 100.0 * (double)s->n);
    i = i == 0 ? 0 : i - 1;
    return (double)s->v[i < s->n ? i : s->n - 1] / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[n] (sorts v). */
static inline double median(double *v, int n) {
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Writes sorted samples as "percentile ms" lines for gnuplot; NULL path = no file. */
static inline void samples_write_cdf(const samples *s, const char *path) {
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f == NULL)
        return;
    /* A few thousand points draw the body; every point of the top 1 % is kept,
     * so the tail drawn on a log-percentile axis is the measured one. Each
     * sample sits at its plotting position (i + 0.5) / n: never 100 %, which
     * a log-percentile axis cannot show. */
    size_t step = s->n > 2000 ? s->n / 2000 : 1, tail = s->n - s->n / 100;
    for (size_t i = 0; i < s->n; i++)
        if (i % step == 0 || i >= tail || i + 1 == s->n)
            fprintf(f, "%.5f %.6f\n", 100.0 * ((double)i + 0.5) / (double)s->n,
                    (double)s->v[i] / 1e6);
    fclose(f);
}

/* ---- process CPU ---------------------------------------------------------- */

static inline double cpu_seconds(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- shared memory --------------------------------------------------------- */

/* Zeroed memory shared with children forked afterwards; exits on failure. */
static inline void *shared_alloc(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

/*
 * fork() whose child dies with its parent: a benchmark killed by a timeout
 * must not leave children hammering the server behind it.
 */
static inline pid_t fork_child(void) {
    pid_t parent = getpid();
    fflush(NULL); /* or the child would flush our buffers a second time */
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* the parent died before prctl */
            _exit(1);
    }
    return pid;
}

/* ---- Redis INFO snapshots ----------------------------------------------------- */

#define RSTATS_MAX_CMDS 96

/*
 * The server-side counters the benchmarks difference. Commands run by Lua
 * scripts (redis.call) are counted in commandstats like any other, so
 * cmds_total includes them.
 */
typedef struct rstats {
    double cpu;               /* used_cpu_sys + used_cpu_user, seconds */
    long long used_memory;    /* bytes */
    long long cmds_total;     /* sum of every cmdstat_*:calls */
    int ncmds;
    char names[RSTATS_MAX_CMDS][40];
    long long calls[RSTATS_MAX_CMDS];
} rstats;

static inline long long rstats_calls(const rstats *s, const char *name) {
    for (int i = 0; i < s->ncmds; i++)
        if (strcmp(s->names[i], name) == 0)
            return s->calls[i];
    return 0;
}

/* Script calls: what the lock operations cost in round trips to Lua. */
static inline long long rstats_scripts(const rstats *s) {
    return rstats_calls(s, "evalsha") + rstats_calls(s, "eval");
}

static inline void rstats_parse_line(rstats *s, const char *line) {
    double d;
    long long v;
    char name[40];
    if (sscanf(line, "used_cpu_sys:%lf", &d) == 1 || sscanf(line, "used_cpu_user:%lf", &d) == 1)
        s->cpu += d;
    else if (sscanf(line, "used_memory:%lld", &v) == 1)
        s->used_memory = v;
    else if (sscanf(line, "cmdstat_%39[^:]:calls=%lld", name, &v) == 2) {
        s->cmds_total += v;
        if (s->ncmds < RSTATS_MAX_CMDS) {
            memcpy(s->names[s->ncmds], name, sizeof name);
            s->calls[s->ncmds++] = v;
        }
    }
}

/* INFO of the given sections ("commandstats", "cpu memory commandstats"...). */
static inline int rstats_take(redisContext *c, const char *sections, rstats *s) {
    memset(s, 0, sizeof *s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "INFO %s", sections);
    redisReply *r = redisCommand(c, cmd);
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        if (r)
            freeReplyObject(r);
        return -1;
    }
    char *save = NULL;
    for (char *line = strtok_r(r->str, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save))
        rstats_parse_line(s, line);
    freeReplyObject(r);
    return 0;
}

/* Calls of name between two snapshots. */
static inline long long rstats_delta(const rstats *a, const rstats *b, const char *name) {
    return rstats_calls(b, name) - rstats_calls(a, name);
}

/*
 * Waits until no script call has run for quiet_ms (sampling every 25 ms, at
 * most max_ms): the sign that every waiter has gone to sleep. Returns 0 when
 * quiet, -1 on timeout or error.
 */
static inline int wait_scripts_quiet(redisContext *c, int quiet_ms, int max_ms) {
    rstats s;
    long long last = -1;
    int still = 0;
    for (int waited = 0; waited < max_ms; waited += 25) {
        if (rstats_take(c, "commandstats", &s) < 0)
            return -1;
        long long now = rstats_scripts(&s);
        still = now == last ? still + 25 : 0;
        if (still >= quiet_ms)
            return 0;
        last = now;
        raw_sleep_ms(25);
    }
    return -1;
}

/* ---- JSON result line ---------------------------------------------------------- */

/* One flat JSON object per program run, printed on stdout for run.sh. */
typedef struct jsonw {
    char buf[16384];
    size_t n;
} jsonw;

static inline void j_raw(jsonw *j, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void j_raw(jsonw *j, const char *key, const char *fmt, ...) {
    if (j->n + 64 >= sizeof j->buf)
        return;
    j->n += (size_t)snprintf(j->buf + j->n, sizeof j->buf - j->n, "%s\"%s\":", j->n > 1 ? "," : "",
                             key);
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(j->buf + j->n, sizeof j->buf - j->n, fmt, ap);
    va_end(ap);
    if (w > 0)
        j->n = j->n + (size_t)w < sizeof j->buf ? j->n + (size_t)w : sizeof j->buf - 1;
}

static inline void j_begin(jsonw *j, const char *bench) {
    j->n = 0;
    j->buf[j->n++] = '{';
    j->buf[j->n] = '\0';
    j_raw(j, "bench", "\"%s\"", bench);
}

static inline void j_num(jsonw *j, const char *key, double v) {
    if (isfinite(v))
        j_raw(j, key, "%.6g", v);
    else
        j_raw(j, key, "null");
}

static inline void j_int(jsonw *j, const char *key, long long v) {
    j_raw(j, key, "%lld", v);
}

/* Strings here are our own identifiers: no escaping needed. */
static inline void j_str(jsonw *j, const char *key, const char *v) {
    j_raw(j, key, "\"%s\"", v);
}

static inline void j_end(jsonw *j) {
    printf("%s}\n", j->buf);
    fflush(stdout);
}

/* ---- timed lock/unlock cycles on N threads ---------------------------------------- */

/*
 * What one thread does: init makes its state (a connection, a handle...) or
 * returns NULL; cycle runs one lock+unlock and returns 0, or -1 on an error.
 */
typedef struct cycle_ops {
    void *(*init)(void *arg, int index);
    int (*cycle)(void *state);
    void (*fini)(void *state);
    void *arg;
    /* Optional (NULL: none): called before and after each measured round (not the
     * warm-up), e.g. to alternate what the threads do from round to round. */
    void (*before_round)(void *arg, int round);
    void (*after_round)(void *arg, int round, double ops_per_s, double p50_ms, double p99_ms);
} cycle_ops;

typedef struct cycle_result {
    double ops_per_s, p50_ms, p99_ms, p999_ms; /* medians over the rounds */
    double ops_min, ops_max, p99_min, p99_max; /* their spread over the rounds (error bars) */
    long long cycles;                          /* all rounds */
    long long all_cycles;                      /* with the warm-up: for per-cycle Redis counts */
    long long errors;
} cycle_result;

typedef struct cycle_run {
    const cycle_ops *ops;
    pthread_barrier_t start, done;
    _Atomic uint64_t deadline_ns;
    atomic_int quit;
    atomic_llong errors;
} cycle_run;

typedef struct cycle_thread {
    cycle_run *run;
    int index;
    samples lat;
    pthread_t tid;
} cycle_thread;

static inline void *cycle_thread_main(void *arg) {
    cycle_thread *t = arg;
    cycle_run *run = t->run;
    void *state = run->ops->init(run->ops->arg, t->index);
    if (state == NULL)
        atomic_fetch_add(&run->errors, 1);
    for (;;) {
        pthread_barrier_wait(&run->start);
        if (atomic_load(&run->quit))
            break;
        uint64_t deadline = atomic_load(&run->deadline_ns), now = raw_now_ns();
        while (state != NULL && now < deadline) {
            if (run->ops->cycle(state) < 0) {
                atomic_fetch_add(&run->errors, 1);
                break;
            }
            uint64_t end = raw_now_ns();
            samples_add(&t->lat, end - now);
            now = end;
        }
        pthread_barrier_wait(&run->done);
    }
    if (state != NULL)
        run->ops->fini(state);
    return NULL;
}

/* Runs one round of secs on every thread; fills ops/s and percentiles. */
static inline void cycle_round(cycle_run *run, cycle_thread *th, int nthreads, double secs,
                               double *ops, double *p50, double *p99, double *p999,
                               long long *cycles) {
    for (int i = 0; i < nthreads; i++)
        th[i].lat.n = 0;
    uint64_t start = raw_now_ns();
    atomic_store(&run->deadline_ns, start + (uint64_t)(secs * 1e9));
    pthread_barrier_wait(&run->start);
    pthread_barrier_wait(&run->done);
    double elapsed = (double)(raw_now_ns() - start) / 1e9;
    samples all = {0};
    for (int i = 0; i < nthreads; i++)
        for (size_t k = 0; k < th[i].lat.n; k++)
            samples_add(&all, th[i].lat.v[k]);
    samples_sort(&all);
    *ops = (double)all.n / elapsed;
    *p50 = samples_pct_ms(&all, 50);
    *p99 = samples_pct_ms(&all, 99);
    *p999 = samples_pct_ms(&all, 99.9);
    *cycles += (long long)all.n;
    samples_free(&all);
}

/* The smallest and largest of v[n] (0 and 0 when n is 0). */
static inline void spread(const double *v, int n, double *lo, double *hi) {
    *lo = *hi = n > 0 ? v[0] : 0;
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

/* A cycle_result's figures, as every cycles row reports them. */
static inline void j_cycle_result(jsonw *j, const cycle_result *res) {
    j_num(j, "ops_per_s", res->ops_per_s);
    j_num(j, "ops_min", res->ops_min);
    j_num(j, "ops_max", res->ops_max);
    j_num(j, "p50_ms", res->p50_ms);
    j_num(j, "p99_ms", res->p99_ms);
    j_num(j, "p99_min_ms", res->p99_min);
    j_num(j, "p99_max_ms", res->p99_max);
    j_num(j, "p999_ms", res->p999_ms);
    j_int(j, "cycles", res->cycles);
    j_int(j, "errors", res->errors);
}

/*
 * Runs ops on nthreads threads: a 0.3 s warm-up, then rounds of secs each.
 * Fills *res with the medians over the rounds. Returns 0, or -1 if a thread
 * failed (res->errors says how often).
 */
static inline int run_cycles(const cycle_ops *ops, int nthreads, double secs, int rounds,
                             cycle_result *res) {
    cycle_run run = {.ops = ops};
    cycle_thread *th = calloc((size_t)nthreads, sizeof *th);
    double *ops_s = calloc((size_t)rounds + 1, sizeof(double));
    double *p50 = calloc((size_t)rounds + 1, sizeof(double));
    double *p99 = calloc((size_t)rounds + 1, sizeof(double));
    double *p999 = calloc((size_t)rounds + 1, sizeof(double));
    memset(res, 0, sizeof *res);
    pthread_barrier_init(&run.start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&run.done, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        th[i] = (cycle_thread){.run = &run, .index = i};
        pthread_create(&th[i].tid, NULL, cycle_thread_main, &th[i]);
    }
    long long warm = 0;
    cycle_round(&run, th, nthreads, 0.3, &ops_s[rounds], &p50[rounds], &p99[rounds],
                &p999[rounds], &warm);
    for (int r = 0; r < rounds && atomic_load(&run.errors) == 0; r++) {
        if (ops->before_round != NULL)
            ops->before_round(ops->arg, r);
        cycle_round(&run, th, nthreads, secs, &ops_s[r], &p50[r], &p99[r], &p999[r], &res->cycles);
        if (ops->after_round != NULL)
            ops->after_round(ops->arg, r, ops_s[r], p50[r], p99[r]);
        fprintf(stderr, "  round %d: %.0f cycles/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms\n",
                r + 1, ops_s[r], p50[r], p99[r], p999[r]);
    }
    atomic_store(&run.quit, 1);
    pthread_barrier_wait(&run.start);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i].tid, NULL);
        samples_free(&th[i].lat);
    }
    res->all_cycles = res->cycles + warm;
    res->ops_per_s = median(ops_s, rounds);
    res->p50_ms = median(p50, rounds);
    res->p99_ms = median(p99, rounds);
    res->p999_ms = median(p999, rounds);
    spread(ops_s, rounds, &res->ops_min, &res->ops_max);
    spread(p99, rounds, &res->p99_min, &res->p99_max);
    res->errors = atomic_load(&run.errors);
    pthread_barrier_destroy(&run.start);
    pthread_barrier_destroy(&run.done);
    free(th);
    free(ops_s);
    free(p50);
    free(p99);
    free(p999);
    return res->errors ? -1 : 0;
}

/* ---- command line ---------------------------------------------------------------- */

/* $RLOCK_TEST_URL, else the default local server. */
static inline const char *default_url(void) {
    const char *env = getenv("RLOCK_TEST_URL");
    return env && *env ? env : "redis://127.0.0.1:6379";
}

/* Parses a number in [lo, hi] or exits with a message. */
static inline double arg_num(const char *opt, const char *arg, double lo, double hi) {
    char *end;
    double v = strtod(arg, &end);
    if (*end != '\0' || !(v >= lo && v <= hi)) {
        fprintf(stderr, "bad value for %s: '%s' (%g..%g)\n", opt, arg, lo, hi);
        exit(2);
    }
    return v;
}

#endif /* RLOCK_BENCH_H */
