/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fifo.c - bench_rlock fifo: P processes x T threads loop lock + unlock on
 * one fair lock (rlock_get_fair) for D seconds, and count the acquisitions
 * that broke first-in-first-out order.
 *
 * What an inversion is. Fair order is the order of the lock's queue in Redis
 * (redisson_lock_queue:{name}, written by the acquire script: a waiter joins
 * at the tail once, so list order is join order). Every holder, inside its
 * critical section, reads the queue's head (LINDEX 0) and leaves it in
 * shared memory; nobody else can change the head then (joins go to the tail,
 * nobody here gives up or dies). The next acquisition must be that head's:
 * an acquisition by any other owner after a holder saw a non-empty queue is
 * one inversion. An acquisition after a holder saw an empty queue is not
 * checked (any first attempt may take a free lock with nobody queued), and
 * is counted apart. The owners are named as Redis names them: each thread
 * reads its own field of the lock's hash (HKEYS) in its first critical
 * section.
 *
 * Also measured: the hand-off under contention, from the holder's unlock
 * call (CLOCK_MONOTONIC, shared memory) to the return of the next holder's
 * rlock_lock, for the checked acquisitions (the next holder was queued).
 * A fair lock never hands over within a process: each of these went
 * through Redis (the unlock message to the head's own channel).
 */
#include <unistd.h>

#include "bench_rlock.h"

#define FIFO_OWNER_MAX 64
#define FIFO_MAX_ACQ 2000000

typedef struct fifo_shm {
    workers_shm w;             /* ready, phase, errors (workers.c) */
    atomic_long seq;           /* acquisitions so far (taken inside the critical section) */
    atomic_long checked, inversions, unchecked;
    _Atomic uint64_t released_ns; /* the holder's unlock call */
    char next_owner[FIFO_OWNER_MAX]; /* the queue's head the holder read ("" if empty) */
    char inverted[FIFO_OWNER_MAX * 2 + 8]; /* the first inversion: expected, got */
    const char *name, *queue_key;      /* the lock, its queue (set before the fork) */
    char me[256][FIFO_OWNER_MAX];      /* each worker's owner field (its own slot only) */
    atomic_long acq_per_worker[256];
    uint64_t lat[FIFO_MAX_ACQ]; /* by seq: hand-off ns, 0 if not checked */
} fifo_shm;

/* A string reply of c (nil: ""); -1 on an error. */
static int fifo_str(redisContext *c, char *out, size_t size, const char *fmt, const char *arg) {
    redisReply *r = redisCommand(c, fmt, arg);
    int ok = r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL ||
                           (r->type == REDIS_REPLY_ARRAY && r->elements == 1));
    const redisReply *s = ok && r->type == REDIS_REPLY_ARRAY ? r->element[0] : r;
    if (ok)
        snprintf(out, size, "%.*s", s->type == REDIS_REPLY_STRING ? (int)s->len : 0,
                 s->type == REDIS_REPLY_STRING ? s->str : "");
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/*
 * The critical section: check the order, read the queue's head for the
 * next one, stamp the unlock that follows.
 */
static int fifo_critical(const workers_spec *spec, long index, redisContext *redis) {
    fifo_shm *sh = spec->arg;
    uint64_t got_ns = raw_now_ns();
    char *me = sh->me[index];
    atomic_thread_fence(memory_order_acquire); /* the previous holder's next_owner */
    long seq = atomic_fetch_add(&sh->seq, 1);
    if (me[0] == '\0' && fifo_str(redis, me, FIFO_OWNER_MAX, "HKEYS %s", sh->name) < 0)
        return -1;
    if (sh->next_owner[0] == '\0') {
        atomic_fetch_add(&sh->unchecked, 1);
    } else {
        atomic_fetch_add(&sh->checked, 1);
        if (seq < FIFO_MAX_ACQ)
            sh->lat[seq] = got_ns - atomic_load(&sh->released_ns);
        if (strcmp(sh->next_owner, me) != 0 && atomic_fetch_add(&sh->inversions, 1) == 0)
            snprintf(sh->inverted, sizeof sh->inverted, "%s, got %s", sh->next_owner, me);
    }
    atomic_fetch_add(&sh->acq_per_worker[index], 1);
    if (fifo_str(redis, sh->next_owner, sizeof sh->next_owner, "LINDEX %s 0", sh->queue_key) < 0)
        return -1;
    atomic_thread_fence(memory_order_release);
    atomic_store(&sh->released_ns, raw_now_ns());
    return 0;
}

int bench_fifo(const options *o) {
    int workers = o->procs * o->threads;
    char name[64], queue_key[96];
    if (workers > 256) {
        fprintf(stderr, "fifo: at most 256 threads in all\n");
        return 2;
    }
    snprintf(name, sizeof name, "bench:fifo:%d", (int)getpid());
    snprintf(queue_key, sizeof queue_key, "redisson_lock_queue:{%s}", name);
    fifo_shm *sh = shared_alloc(sizeof *sh);
    sh->name = name;
    sh->queue_key = queue_key;
    fprintf(stderr, "fifo: %d processes x %d threads on one fair lock for %.1f s\n", o->procs,
            o->threads, o->secs);
    workers_spec spec = {.o = o, .sh = &sh->w, .name = name, .fair = 1,
                         .critical = fifo_critical, .arg = sh};
    pid_t pids[256];
    workers_start(&spec, pids);
    uint64_t t0 = raw_now_ns();
    atomic_store(&sh->w.phase, WORKERS_RUN);
    raw_sleep_ms(o->secs * 1000);
    double elapsed = (double)(raw_now_ns() - t0) / 1e9; /* a last few acquisitions follow */
    int failed = workers_stop(&spec, pids);
    long n = atomic_load(&sh->seq), lo = -1, hi = 0;
    samples s = {0};
    for (long i = 0; i < n && i < FIFO_MAX_ACQ; i++)
        if (sh->lat[i] > 0)
            samples_add(&s, sh->lat[i]);
    samples_sort(&s);
    for (int i = 0; i < workers; i++) {
        long a = atomic_load(&sh->acq_per_worker[i]);
        lo = lo < 0 || a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    long inversions = atomic_load(&sh->inversions);
    fprintf(stderr, "  %ld acquisitions (%.0f/s), %ld checked, %ld after an empty queue; "
                    "inversions %ld%s%s; hand-off p50 %.3f ms, p99 %.3f ms\n",
            n, (double)n / elapsed, atomic_load(&sh->checked), atomic_load(&sh->unchecked),
            inversions, inversions ? ": first expected " : "", inversions ? sh->inverted : "",
            samples_pct_ms(&s, 50), samples_pct_ms(&s, 99));
    redisContext *r = raw_or_exit(o->url);
    raw_ok(r, "DEL %s %s redisson_lock_timeout:{%s}", name, queue_key, name);
    redisFree(r);
    jsonw j;
    j_begin(&j, "fifo");
    j_int(&j, "procs", o->procs);
    j_int(&j, "threads", o->threads);
    j_int(&j, "acquisitions", n);
    j_num(&j, "acq_per_s", (double)n / elapsed);
    j_int(&j, "checked", atomic_load(&sh->checked));
    j_int(&j, "unchecked", atomic_load(&sh->unchecked));
    j_int(&j, "inversions", inversions);
    j_int(&j, "min_per_thread", lo);
    j_int(&j, "max_per_thread", hi);
    j_int(&j, "handoffs", (long long)s.n);
    put_latency(&j, &s);
    j_int(&j, "errors", atomic_load(&sh->w.errors) + failed);
    j_end(&j);
    samples_free(&s);
    int bad = failed || atomic_load(&sh->w.errors) || n > FIFO_MAX_ACQ;
    munmap(sh, sizeof *sh);
    return bad ? 1 : 0;
}
