/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * herd.c - bench_rlock herd: W waiting threads of one process, script calls
 * per hand-off (run.sh section 5).
 */
#include <unistd.h>

#include "bench_rlock.h"

/*
 * W threads block on a lock the main thread holds. Once they are all asleep
 * (no script call for 200 ms), the main thread unlocks and the lock travels
 * through all W of them, each unlocking right after it gets it. The script
 * calls Redis saw from the main thread's unlock to the W-th acquisition,
 * divided by W, is the cost of one hand-off: 2 (one release, one successful
 * acquire) when only one waiter wakes per release, growing with W when
 * every waiter wakes and retries (the thundering herd).
 */
typedef struct herd {
    rlock *lock;
    int w;
    pthread_barrier_t start, end;
    atomic_long arrived, acquired, quit, errors;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int last_may_release; /* the W-th owner waits for this: the window closes first */
} herd;

static void *herd_main(void *arg) {
    herd *h = arg;
    for (;;) {
        pthread_barrier_wait(&h->start);
        if (atomic_load(&h->quit))
            return NULL;
        atomic_fetch_add(&h->arrived, 1);
        if (check(rlock_lock(h->lock), "rlock_lock") < 0) {
            atomic_fetch_add(&h->errors, 1);
            atomic_fetch_add(&h->acquired, 1);
        } else {
            if (atomic_fetch_add(&h->acquired, 1) + 1 == h->w) {
                pthread_mutex_lock(&h->mutex);
                while (!h->last_may_release)
                    pthread_cond_wait(&h->cond, &h->mutex);
                pthread_mutex_unlock(&h->mutex);
            }
            if (check(rlock_unlock(h->lock), "rlock_unlock") < 0)
                atomic_fetch_add(&h->errors, 1);
        }
        pthread_barrier_wait(&h->end);
    }
}

/* One round; returns script calls per hand-off and stores the mean hand-off time. */
static double herd_round(herd *h, redisContext *redis, double *handoff_ms) {
    atomic_store(&h->arrived, 0);
    atomic_store(&h->acquired, 0);
    h->last_may_release = 0;
    if (check(rlock_lock(h->lock), "rlock_lock (main)") < 0)
        exit(1);
    pthread_barrier_wait(&h->start);
    wait_at_least(&h->arrived, h->w, &h->errors);
    if (wait_scripts_quiet(redis, 200, 20000) < 0)
        fprintf(stderr, "  waiters did not settle in 20 s\n");
    rstats s0, s1;
    rstats_take(redis, "commandstats", &s0);
    uint64_t t0 = raw_now_ns();
    if (check(rlock_unlock(h->lock), "rlock_unlock (main)") < 0)
        exit(1);
    wait_at_least(&h->acquired, h->w, &h->errors);
    *handoff_ms = (double)(raw_now_ns() - t0) / 1e6 / h->w;
    rstats_take(redis, "commandstats", &s1);
    pthread_mutex_lock(&h->mutex);
    h->last_may_release = 1;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mutex);
    pthread_barrier_wait(&h->end);
    return (double)(rstats_scripts(&s1) - rstats_scripts(&s0)) / h->w;
}

int bench_herd(const options *o) {
    rlock_client *c = open_client(o, 0, 0);
    redisContext *redis = raw_or_exit(o->url);
    herd h = {.w = o->waiters};
    h.lock = get_lock(c, "bench:herd:%ld:%ld", (long)getpid(), o->waiters);
    pthread_barrier_init(&h.start, NULL, (unsigned)h.w + 1);
    pthread_barrier_init(&h.end, NULL, (unsigned)h.w + 1);
    pthread_mutex_init(&h.mutex, NULL);
    pthread_cond_init(&h.cond, NULL);
    pthread_t *tids = calloc((size_t)h.w, sizeof *tids);
    for (int i = 0; i < h.w; i++)
        pthread_create(&tids[i], NULL, herd_main, &h);
    double per[100] = {0}, ms[100] = {0}, worst = 0, best = 0;
    int rounds = o->rounds < 100 ? o->rounds : 100, done = 0;
    fprintf(stderr, "herd: %d waiting threads in one process, %d rounds\n", h.w, rounds);
    for (; done < rounds && atomic_load(&h.errors) == 0; done++) {
        per[done] = herd_round(&h, redis, &ms[done]);
        worst = per[done] > worst ? per[done] : worst;
        best = done == 0 || per[done] < best ? per[done] : best;
        fprintf(stderr, "  round %d: %.2f script calls per hand-off, %.3f ms per hand-off\n",
                done + 1, per[done], ms[done]);
    }
    atomic_store(&h.quit, 1);
    pthread_barrier_wait(&h.start);
    for (int i = 0; i < h.w; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    rlock_free(h.lock);
    rlock_client_close(c);
    redisFree(redis);
    jsonw j;
    j_begin(&j, "herd");
    j_int(&j, "waiters", h.w);
    j_int(&j, "rounds", done);
    j_num(&j, "scripts_per_handoff", median(per, done));
    j_num(&j, "scripts_per_handoff_min", best);
    j_num(&j, "scripts_per_handoff_max", worst);
    j_num(&j, "handoff_ms", median(ms, done));
    j_int(&j, "errors", atomic_load(&h.errors));
    j_end(&j);
    return atomic_load(&h.errors) ? 1 : 0;
}
