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
#include <sys/wait.h>
#include <unistd.h>

#include "bench_rlock.h"

#define FIFO_OWNER_MAX 64
#define FIFO_MAX_ACQ 2000000

enum { FIFO_WAIT, FIFO_RUN, FIFO_STOP };

typedef struct fifo_shm {
    atomic_long ready, phase, errors;
    atomic_long seq;           /* acquisitions so far (taken inside the critical section) */
    atomic_long checked, inversions, unchecked;
    _Atomic uint64_t released_ns; /* the holder's unlock call */
    char next_owner[FIFO_OWNER_MAX]; /* the queue's head the holder read ("" if empty) */
    char inverted[FIFO_OWNER_MAX * 2 + 8]; /* the first inversion: expected, got */
    atomic_long acq_per_worker[256];
    uint64_t lat[FIFO_MAX_ACQ]; /* by seq: hand-off ns, 0 if not checked */
} fifo_shm;

typedef struct fifo_worker {
    const options *o;
    fifo_shm *sh;
    rlock *lock;
    const char *name, *queue_key;
    long index;
    char me[FIFO_OWNER_MAX]; /* our owner field */
} fifo_worker;

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

/* The critical section: check the order, read the queue's head for the next one. */
static int fifo_critical(fifo_worker *w, redisContext *redis, uint64_t got_ns) {
    fifo_shm *sh = w->sh;
    atomic_thread_fence(memory_order_acquire); /* the previous holder's next_owner */
    long seq = atomic_fetch_add(&sh->seq, 1);
    if (w->me[0] == '\0' && fifo_str(redis, w->me, sizeof w->me, "HKEYS %s", w->name) < 0)
        return -1;
    if (sh->next_owner[0] == '\0') {
        atomic_fetch_add(&sh->unchecked, 1);
    } else {
        atomic_fetch_add(&sh->checked, 1);
        if (seq < FIFO_MAX_ACQ)
            sh->lat[seq] = got_ns - atomic_load(&sh->released_ns);
        if (strcmp(sh->next_owner, w->me) != 0 && atomic_fetch_add(&sh->inversions, 1) == 0)
            snprintf(sh->inverted, sizeof sh->inverted, "%s, got %s", sh->next_owner, w->me);
    }
    atomic_fetch_add(&sh->acq_per_worker[w->index], 1);
    if (fifo_str(redis, sh->next_owner, sizeof sh->next_owner, "LINDEX %s 0", w->queue_key) < 0)
        return -1;
    atomic_thread_fence(memory_order_release);
    return 0;
}

static void *fifo_worker_main(void *arg) {
    fifo_worker *w = arg;
    fifo_shm *sh = w->sh;
    redisContext *redis = raw_connect(w->o->url);
    atomic_fetch_add(&sh->ready, 1);
    if (redis == NULL) {
        atomic_fetch_add(&sh->errors, 1);
        return NULL;
    }
    while (atomic_load(&sh->phase) == FIFO_WAIT)
        raw_sleep_ms(1);
    while (atomic_load(&sh->phase) == FIFO_RUN) {
        if (check(rlock_lock(w->lock), "rlock_lock") < 0) {
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        int bad = fifo_critical(w, redis, raw_now_ns());
        atomic_store(&sh->released_ns, raw_now_ns());
        if (check(rlock_unlock(w->lock), "rlock_unlock") < 0 || bad) {
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
    }
    redisFree(redis);
    return NULL;
}

static void fifo_child(const options *o, fifo_shm *sh, int proc, const char *name,
                       const char *queue_key) {
    rlock_client *c = open_client(o, 0, o->threads);
    rlock *lock = NULL; /* one handle shared by the process's threads */
    if (check(rlock_get_fair(c, name, &lock), "rlock_get_fair") < 0)
        _exit(1);
    fifo_worker w[256];
    pthread_t tid[256];
    for (int t = 0; t < o->threads; t++) {
        w[t] = (fifo_worker){.o = o, .sh = sh, .lock = lock, .name = name,
                             .queue_key = queue_key, .index = (long)proc * o->threads + t};
        pthread_create(&tid[t], NULL, fifo_worker_main, &w[t]);
    }
    for (int t = 0; t < o->threads; t++)
        pthread_join(tid[t], NULL);
    rlock_free(lock);
    rlock_client_close(c);
    _exit(atomic_load(&sh->errors) ? 1 : 0);
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
    fprintf(stderr, "fifo: %d processes x %d threads on one fair lock for %.1f s\n", o->procs,
            o->threads, o->secs);
    pid_t pids[256];
    for (int p = 0; p < o->procs; p++)
        if ((pids[p] = fork_child()) == 0)
            fifo_child(o, sh, p, name, queue_key);
    while (atomic_load(&sh->ready) < workers && atomic_load(&sh->errors) == 0)
        raw_sleep_ms(1);
    uint64_t t0 = raw_now_ns();
    atomic_store(&sh->phase, FIFO_RUN);
    raw_sleep_ms(o->secs * 1000);
    atomic_store(&sh->phase, FIFO_STOP);
    double elapsed = (double)(raw_now_ns() - t0) / 1e9;
    int failed = 0;
    for (int p = 0; p < o->procs; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
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
    j_int(&j, "errors", atomic_load(&sh->errors) + failed);
    j_end(&j);
    samples_free(&s);
    int bad = failed || atomic_load(&sh->errors) || n > FIFO_MAX_ACQ;
    munmap(sh, sizeof *sh);
    return bad ? 1 : 0;
}
