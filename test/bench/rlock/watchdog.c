/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watchdog.c - bench_rlock watchdog: N held watchdog locks, renewal cost and
 * correctness (run.sh section 6).
 */
#include <unistd.h>

#include "bench_rlock.h"

/*
 * N watchdog locks held by a few threads (holds belong to threads, and a
 * thread that exits gives its holds up, so the holders stay alive until the
 * end). While they hold, INFO commandstats is sampled every 25 ms: each
 * renewal round shows as a burst of EVALSHA calls. The window spans whole
 * rounds: it opens after a burst ends and closes after the last burst of
 * three lease timeouts ends.
 */
typedef struct wd_holder {
    rlock_client *client;
    rlock **locks;
    long from, to;
    atomic_long *acquired, *errors;
    pthread_mutex_t *mutex;
    pthread_cond_t *cond;
    int *done;
} wd_holder;

static void *wd_holder_main(void *arg) {
    wd_holder *h = arg;
    for (long k = h->from; k < h->to; k++) {
        h->locks[k] = get_lock(h->client, "bench:wd:%ld:%ld", (long)getpid(), k);
        if (check(rlock_lock(h->locks[k]), "rlock_lock") < 0) {
            atomic_fetch_add(h->errors, 1);
            break;
        }
        atomic_fetch_add(h->acquired, 1);
    }
    pthread_mutex_lock(h->mutex);
    while (!*h->done)
        pthread_cond_wait(h->cond, h->mutex);
    pthread_mutex_unlock(h->mutex);
    return NULL;
}

typedef struct wd_window {
    int rounds;
    long long scripts;
    double wall, cpu, redis_cpu;
} wd_window;

/* Samples until `rounds` bursts of script calls have ended (or max_ms). */
static int wd_count_bursts(redisContext *redis, int rounds, int max_ms, long long *scripts) {
    rstats s;
    long long last = -1, first = -1;
    int bursts = 0, in_burst = 0;
    for (int t = 0; t < max_ms && bursts < rounds; t += 25) {
        rstats_take(redis, "commandstats", &s);
        long long now = rstats_scripts(&s);
        if (first < 0)
            first = now;
        if (last >= 0 && now > last)
            in_burst = 1;
        else if (in_burst && now == last) {
            in_burst = 0;
            bursts++;
        }
        last = now;
        raw_sleep_ms(25);
    }
    *scripts = last - first;
    return bursts;
}

static void wd_measure(redisContext *redis, const options *o, wd_window *w) {
    long long ignored;
    int max_ms = (int)(o->timeout * 4);
    wd_count_bursts(redis, 1, max_ms, &ignored); /* align with the end of a round */
    rstats r0, r1;
    rstats_take(redis, "cpu", &r0);
    double cpu0 = cpu_seconds(RUSAGE_SELF), me0 = cpu_seconds(RUSAGE_THREAD);
    uint64_t t0 = raw_now_ns();
    w->rounds = wd_count_bursts(redis, o->rounds, max_ms * o->rounds, &w->scripts);
    w->wall = (double)(raw_now_ns() - t0) / 1e9;
    rstats_take(redis, "cpu", &r1);
    w->redis_cpu = r1.cpu - r0.cpu; /* includes answering our INFO calls */
    /* The process's CPU less this sampling thread's own. */
    w->cpu = (cpu_seconds(RUSAGE_SELF) - cpu0) - (cpu_seconds(RUSAGE_THREAD) - me0);
}

/* Pipelined PTTL of every lock: how many exist, and the lowest TTL. */
static long wd_sweep(redisContext *redis, long n, long long *min_ttl) {
    long held = 0;
    *min_ttl = -1;
    for (long first = 0; first < n; first += 1000) {
        long k = n - first < 1000 ? n - first : 1000;
        for (long i = 0; i < k; i++)
            redisAppendCommand(redis, "PTTL bench:wd:%ld:%ld", (long)getpid(), first + i);
        for (long i = 0; i < k; i++) {
            void *raw;
            if (redisGetReply(redis, &raw) != REDIS_OK)
                return -1;
            redisReply *r = raw;
            if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
                held++;
                *min_ttl = *min_ttl < 0 || r->integer < *min_ttl ? r->integer : *min_ttl;
            }
            freeReplyObject(r);
        }
    }
    return held;
}

static void wd_delete(redisContext *redis, long n) {
    for (long i = 0; i < n; i++)
        redisAppendCommand(redis, "UNLINK bench:wd:%ld:%ld", (long)getpid(), i);
    for (long i = 0; i < n; i++) {
        void *raw;
        if (redisGetReply(redis, &raw) != REDIS_OK)
            return;
        freeReplyObject(raw);
    }
}

/* The JSON line of a run. */
static void wd_report(const options *o, long n, double acquire_s, const wd_window *w, double since,
                      long held, long long min_ttl, long errors) {
    double rounds = w->rounds > 0 ? w->rounds : NAN;
    jsonw j;
    j_begin(&j, "watchdog");
    j_int(&j, "locks", n);
    j_int(&j, "watchdog_timeout_ms", o->timeout);
    j_num(&j, "acquire_s", acquire_s);
    j_int(&j, "rounds", w->rounds);
    j_num(&j, "window_s", w->wall);
    j_num(&j, "scripts_per_round", (double)w->scripts / rounds);
    j_num(&j, "locks_per_script", w->scripts ? (double)n * w->rounds / (double)w->scripts : NAN);
    j_num(&j, "client_cpu_ms_per_round", w->cpu * 1e3 / rounds);
    j_num(&j, "client_cpu_pct_core", w->wall > 0 ? 100 * w->cpu / w->wall : NAN);
    j_num(&j, "redis_cpu_ms_per_round", w->redis_cpu * 1e3 / rounds);
    j_num(&j, "held_after_s", since);
    j_int(&j, "held", held);
    j_int(&j, "min_ttl_ms", min_ttl);
    j_int(&j, "lost_callbacks", atomic_load(&lost_locks));
    j_int(&j, "all_held", held == n);
    j_int(&j, "errors", errors);
    j_end(&j);
}

int bench_watchdog(const options *o) {
    long n = o->count;
    rlock_client *c = open_client(o, o->timeout, o->threads);
    redisContext *redis = raw_or_exit(o->url);
    rlock **locks = calloc((size_t)n, sizeof *locks);
    atomic_long acquired = 0, errors = 0;
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    int done = 0;
    wd_holder *hs = calloc((size_t)o->threads, sizeof *hs);
    pthread_t *tids = calloc((size_t)o->threads, sizeof *tids);
    fprintf(stderr, "watchdog: %ld locks (watchdog_timeout %lld ms) from %d threads\n", n, o->timeout,
            o->threads);
    uint64_t t0 = raw_now_ns();
    for (int i = 0; i < o->threads; i++) {
        hs[i] = (wd_holder){c, locks, n * i / o->threads, n * (i + 1) / o->threads, &acquired, &errors,
                            &mutex, &cond, &done};
        pthread_create(&tids[i], NULL, wd_holder_main, &hs[i]);
    }
    while (atomic_load(&acquired) + atomic_load(&errors) < n && atomic_load(&errors) == 0)
        raw_sleep_ms(5);
    double acquire_s = (double)(raw_now_ns() - t0) / 1e9;
    fprintf(stderr, "  acquired %ld in %.2f s; measuring %d renewal rounds\n", atomic_load(&acquired),
            acquire_s, o->rounds);

    wd_window w = {0};
    long long min_ttl = -1;
    long held = -1;
    if (atomic_load(&errors) == 0) {
        wd_measure(redis, o, &w);
        held = wd_sweep(redis, n, &min_ttl);
    }
    double since = (double)(raw_now_ns() - t0) / 1e9 - acquire_s;
    pthread_mutex_lock(&mutex);
    done = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mutex);
    for (int i = 0; i < o->threads; i++)
        pthread_join(tids[i], NULL);
    rlock_client_close(c);
    for (long k = 0; k < n; k++)
        rlock_free(locks[k]);
    wd_delete(redis, n);
    redisFree(redis);

    wd_report(o, n, acquire_s, &w, since, held, min_ttl, atomic_load(&errors));
    free(locks);
    free(hs);
    free(tids);
    return held == n && atomic_load(&errors) == 0 ? 0 : 1;
}
