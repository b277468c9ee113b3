/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watchdog.c - bench_cluster's watchdog section: W watchdog locks held by one
 * client, watchdog_timeout 3000 ms; per renewal round and master, EVALSHA
 * calls, connections, round trips and Redis CPU; the rlock-watchdog thread's
 * CPU, and the locks still held or lost.
 *
 * Round trips: the program is linked with -Wl,--wrap=rlock__io_flush (see
 * the Makefile): every flush of a connection's output buffer that the
 * rlock-watchdog thread makes is counted per destination port. One flush is
 * one pipeline written, whose replies are then read: one round trip. This
 * reads an internal symbol of the library, on purpose: the server cannot
 * tell a pipeline from single commands.
 *
 * Rounds: rlock__holds_snapshot is wrapped too; the watchdog takes one
 * snapshot of the holds table per round, so its calls with locks to renew
 * count the rounds that ran (the bursts of EVALSHA seen from outside can
 * merge or split on a loaded machine: one run counted 5 bursts for 6 rounds).
 *
 * The wraps are __wrap_rlock__io_flush and __wrap_rlock__holds_snapshot below.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cluster.h"
#include "engine/engine.h"

/* Pipelines flushed by the rlock-watchdog thread, per master (see the top of this file). */
static atomic_int wd_counting;
static atomic_llong wd_flushes[NMASTERS + 1]; /* [NMASTERS]: another port */
static _Thread_local int is_watchdog = -1;

int __real_rlock__io_flush(redisContext *ctx, int64_t deadline_ms);
int __wrap_rlock__io_flush(redisContext *ctx, int64_t deadline_ms);

int __wrap_rlock__io_flush(redisContext *ctx, int64_t deadline_ms) {
    if (atomic_load(&wd_counting)) {
        if (is_watchdog < 0) {
            char name[16] = "";
            pthread_getname_np(pthread_self(), name, sizeof name);
            is_watchdog = strcmp(name, "rlock-watchdog") == 0;
        }
        if (is_watchdog) {
            int m = master_of_port(ctx->tcp.port);
            atomic_fetch_add(&wd_flushes[m < 0 ? NMASTERS : m], 1);
        }
    }
    return __real_rlock__io_flush(ctx, deadline_ms);
}

/* Renewal rounds with locks to renew, while counting (see the top of this file). */
static atomic_int wd_rounds;

int __real_rlock__holds_snapshot(rlock__holds *h, rlock__buf *entries, rlock__buf *names,
                                 size_t *n);
int __wrap_rlock__holds_snapshot(rlock__holds *h, rlock__buf *entries, rlock__buf *names,
                                 size_t *n);

int __wrap_rlock__holds_snapshot(rlock__holds *h, rlock__buf *entries, rlock__buf *names,
                                 size_t *n) {
    int status = __real_rlock__holds_snapshot(h, entries, names, n);
    if (atomic_load(&wd_counting) && status == RLOCK_OK && *n > 0)
        atomic_fetch_add(&wd_rounds, 1);
    return status;
}

static atomic_long wd_lost, wd_failed, wd_events;

static void wd_on_event(const rlock_event *ev, void *arg) {
    (void)arg;
    atomic_fetch_add(&wd_events, 1);
    if (ev->kind == RLOCK_EVENT_LOCK_LOST)
        atomic_fetch_add(&wd_lost, 1);
    else if (ev->kind == RLOCK_EVENT_RENEWAL_FAILED)
        atomic_fetch_add(&wd_failed, 1);
    if (atomic_load(&wd_events) <= 5)
        fprintf(stderr, "  event %d %s: %s\n", (int)ev->kind, ev->name ? ev->name : "-",
                ev->detail);
}

typedef struct wd_holder {
    rlock_client *client;
    rlock **locks;
    long from, to;
    atomic_long *acquired, *errors;
    atomic_int *done;
} wd_holder;

static void wd_name(char *buf, size_t size, long k) {
    snprintf(buf, size, "bench:cl:wd:%d:%ld", (int)getpid(), k);
}

static void *wd_holder_main(void *arg) {
    wd_holder *h = arg;
    char name[64];
    for (long k = h->from; k < h->to; k++) {
        wd_name(name, sizeof name, k);
        if (rlock_get(h->client, name, &h->locks[k]) != RLOCK_OK ||
            rlock_lock(h->locks[k]) != RLOCK_OK) {
            fprintf(stderr, "  acquire %s: %s\n", name, rlock_last_error());
            atomic_fetch_add(h->errors, 1);
            break;
        }
        atomic_fetch_add(h->acquired, 1);
    }
    while (!atomic_load(h->done)) /* holds belong to this thread: it stays */
        raw_sleep_ms(20);
    return NULL;
}

/* The thread of this process named name (its /proc/self/task entry), or 0. */
static int thread_named(const char *name) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int tid = 0;
    while (d != NULL && tid == 0 && (e = readdir(d)) != NULL) {
        char path[300], comm[32] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f != NULL && fgets(comm, sizeof comm, f) != NULL) {
            comm[strcspn(comm, "\n")] = '\0';
            if (strcmp(comm, name) == 0)
                tid = atoi(e->d_name);
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return tid;
}

/* utime + stime of a thread, in seconds. */
static double thread_cpu(int tid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(buf, sizeof buf, f) == NULL) {
        if (f)
            fclose(f);
        return NAN;
    }
    fclose(f);
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                            &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long long evalsha_of(redisContext *c) {
    rstats s;
    return rstats_take(c, "commandstats", &s) == 0 ? rstats_calls(&s, "evalsha") : -1;
}

/* Connections whose last command was EVALSHA, used within the last second. */
static int evalsha_conns(redisContext *c) {
    redisReply *r = redisCommand(c, "CLIENT LIST");
    int n = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        char *save = NULL;
        for (char *line = strtok_r(r->str, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            if (strstr(line, " cmd=evalsha ") != NULL && strstr(line, " idle=0 ") != NULL)
                n++;
    }
    if (r)
        freeReplyObject(r);
    return n;
}

/*
 * Samples the masters' EVALSHA counts every 25 ms until a burst (a renewal
 * round) has ended: calls seen, then 50 ms without any. Returns 0, or -1
 * after max_ms.
 */
static int wd_burst_end(redisContext **mc, int max_ms) {
    long long last = -1;
    int burst = 0, quiet = 0;
    for (int t = 0; t < max_ms; t += 25) {
        long long now = 0;
        for (int m = 0; m < NMASTERS; m++)
            now += evalsha_of(mc[m]);
        if (last >= 0 && now > last)
            burst = 1, quiet = 0;
        else if (burst && now == last && ++quiet == 2)
            return 0;
        last = now;
        raw_sleep_ms(25);
    }
    return -1;
}

/* Pipelined PTTL of every lock on its master: how many are held, the lowest TTL. */
static long wd_sweep(redisContext **mc, long n, long long *min_ttl) {
    long held = 0;
    char name[64];
    *min_ttl = -1;
    for (long first = 0; first < n; first += 3000) {
        long k = n - first < 3000 ? n - first : 3000;
        int *owner = calloc((size_t)k, sizeof *owner);
        for (long i = 0; i < k; i++) {
            wd_name(name, sizeof name, first + i);
            owner[i] = owner_index(name);
            redisAppendCommand(mc[owner[i]], "PTTL %s", name);
        }
        for (long i = 0; i < k; i++) {
            void *raw;
            if (redisGetReply(mc[owner[i]], &raw) != REDIS_OK)
                die("%s", "PTTL sweep: connection broke");
            redisReply *r = raw;
            if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
                held++;
                *min_ttl = *min_ttl < 0 || r->integer < *min_ttl ? r->integer : *min_ttl;
            }
            freeReplyObject(r);
        }
        free(owner);
    }
    return held;
}

void bench_watchdog(long n, int nthreads, int rounds, wd_result *out) {
    redisContext *mc[NMASTERS];
    rstats c0[NMASTERS], c1[NMASTERS];
    memset(out, 0, sizeof *out);
    out->locks = n;
    for (int m = 0; m < NMASTERS; m++)
        mc[m] = master_conn(m);
    char name[64];
    for (long k = 0; k < n; k++) {
        wd_name(name, sizeof name, k);
        out->locks_on[owner_index(name)] += 1;
    }
    rlock_client *c = open_cluster_client(RLOCK_PUBSUB_AUTO, 3000, wd_on_event, NULL);
    rlock **locks = calloc((size_t)n, sizeof *locks);
    atomic_long acquired = 0, errors = 0;
    atomic_int done = 0;
    wd_holder *hs = calloc((size_t)nthreads, sizeof *hs);
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    fprintf(stderr, "watchdog: %ld locks (%.0f/%.0f/%.0f per master), watchdog_timeout 3000 ms, "
                    "acquired by %d threads\n",
            n, out->locks_on[0], out->locks_on[1], out->locks_on[2], nthreads);
    uint64_t t0 = raw_now_ns();
    for (int i = 0; i < nthreads; i++) {
        hs[i] = (wd_holder){c, locks, n * i / nthreads, n * (i + 1) / nthreads, &acquired, &errors,
                            &done};
        pthread_create(&tids[i], NULL, wd_holder_main, &hs[i]);
    }
    while (atomic_load(&acquired) + atomic_load(&errors) < n && atomic_load(&errors) == 0)
        raw_sleep_ms(5);
    out->acquire_s = (double)(raw_now_ns() - t0) / 1e9;
    fprintf(stderr, "  acquired %ld in %.2f s (%.0f/s); measuring %d renewal rounds\n",
            atomic_load(&acquired), out->acquire_s, (double)atomic_load(&acquired) / out->acquire_s,
            rounds);
    int wd_tid = thread_named("rlock-watchdog");
    if (atomic_load(&errors) == 0 && wd_tid > 0 && wd_burst_end(mc, 5000) == 0) {
        for (int m = 0; m < NMASTERS; m++)
            rstats_take(mc[m], "commandstats cpu", &c0[m]);
        for (int m = 0; m <= NMASTERS; m++)
            atomic_store(&wd_flushes[m], 0);
        atomic_store(&wd_rounds, 0);
        atomic_store(&wd_counting, 1);
        double tcpu0 = thread_cpu(wd_tid);
        double pcpu0 = cpu_seconds(RUSAGE_SELF), me0 = cpu_seconds(RUSAGE_THREAD);
        uint64_t w0 = raw_now_ns();
        for (int r = 0; r < rounds; r++) {
            if (wd_burst_end(mc, 5000) < 0)
                break;
            for (int m = 0; m < NMASTERS; m++) {
                int k = evalsha_conns(mc[m]);
                out->max_conns[m] = k > out->max_conns[m] ? k : out->max_conns[m];
            }
        }
        out->window_s = (double)(raw_now_ns() - w0) / 1e9;
        double tcpu = thread_cpu(wd_tid) - tcpu0;
        double pcpu = (cpu_seconds(RUSAGE_SELF) - pcpu0) - (cpu_seconds(RUSAGE_THREAD) - me0);
        atomic_store(&wd_counting, 0);
        out->rounds = atomic_load(&wd_rounds);
        for (int m = 0; m < NMASTERS; m++)
            rstats_take(mc[m], "commandstats cpu", &c1[m]);
        double rr = out->rounds ? out->rounds : NAN;
        for (int m = 0; m < NMASTERS; m++) {
            out->evalsha_per_round[m] = (double)rstats_delta(&c0[m], &c1[m], "evalsha") / rr;
            out->rtt_per_round[m] = (double)atomic_load(&wd_flushes[m]) / rr;
            out->redis_cpu_ms_per_round[m] = (c1[m].cpu - c0[m].cpu) * 1e3 / rr;
        }
        out->other_flushes = atomic_load(&wd_flushes[NMASTERS]);
        out->thread_cpu_pct = 100 * tcpu / out->window_s;
        out->process_cpu_pct = 100 * pcpu / out->window_s;
        out->held = wd_sweep(mc, n, &out->min_ttl);
    } else {
        fprintf(stderr, "  no measurement: errors %ld, watchdog thread %d\n",
                atomic_load(&errors), wd_tid);
        out->held = -1;
    }
    out->lost = atomic_load(&wd_lost);
    out->failed = atomic_load(&wd_failed);
    for (int m = 0; m < NMASTERS; m++)
        fprintf(stderr, "  master :%d: %.0f locks, %.0f EVALSHA/round (%.1f locks each), "
                        "%.2f round trips/round, %d connection(s), Redis CPU %.1f ms/round\n",
                master_port[m], out->locks_on[m], out->evalsha_per_round[m],
                out->locks_on[m] / out->evalsha_per_round[m], out->rtt_per_round[m],
                out->max_conns[m], out->redis_cpu_ms_per_round[m]);
    fprintf(stderr, "  %d rounds in %.2f s; rlock-watchdog thread CPU %.2f %% of a core (process "
                    "%.2f %%); held %ld/%ld (min PTTL %lld ms); LOCK_LOST %lld, RENEWAL_FAILED "
                    "%lld\n",
            out->rounds, out->window_s, out->thread_cpu_pct, out->process_cpu_pct, out->held, n,
            out->min_ttl, out->lost, out->failed);
    atomic_store(&done, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    rlock_client_close(c);
    for (long k = 0; k < n; k++)
        rlock_free(locks[k]);
    for (int m = 0; m < NMASTERS; m++) {
        raw_ok(mc[m], "FLUSHALL");
        redisFree(mc[m]);
    }
    free(locks);
    free(hs);
    free(tids);
    if (atomic_load(&errors) != 0)
        out->held = -1;
}
