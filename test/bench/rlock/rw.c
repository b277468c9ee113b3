/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rw.c - bench_rlock rw: the read-write lock (rlock_get_rw), two figures
 * (test/bench/run.sh section 12), for readers with holds of their own (the
 * library's only read path; threads that share one hold on an explicit
 * owner are the application's: examples/shared_read.c):
 *
 *   scale        T threads read-locking ONE lock (lock + unlock cycles) beside
 *                T threads on T plain locks (rlock_get), same rounds:
 *                readers share, so the read lock should cost about what a
 *                lock nobody else wants costs (target >= 0.9x); and beside T
 *                threads on T read locks of their own, which tells the cost
 *                of sharing one hash from that of Redisson's read layout (a
 *                key per hold, a mode field)
 *   writer wait  T reader threads of one client churn on one lock (read,
 *                hold --settle-us, unlock, read again: the read lock is
 *                never free between them) while a writer of another client
 *                takes the write lock -n times; its wait, from the call to
 *                its return. rlock holds new readers back while a writer
 *                waits, so a wait is about one reader generation (the holds
 *                under way when it asked), not unbounded
 */
#include <unistd.h>

#include "bench_rlock.h"

/* ---- scale ------------------------------------------------------------------------------ */

/* What the threads of a scale round lock; the rounds rotate through them. */
enum { SCALE_PLAIN, SCALE_READ_OWN, SCALE_READ_SHARED, SCALE_KINDS };

#define SCALE_MAX_ROUNDS 100

/*
 * The three configurations run in alternating rounds of one run (plain,
 * own read locks, one shared read lock, plain, ...), not one after the
 * other: on a shared machine the speed of loopback round trips changes from
 * one second to the next, and neighbouring rounds see the same conditions.
 */
typedef struct scale_ctx {
    rlock_client *client;
    rlock *shared;           /* the read lock every thread takes in SCALE_READ_SHARED */
    atomic_int what;         /* SCALE_*: this round's; set between rounds */
    int rounds[SCALE_KINDS]; /* rounds done per configuration */
    double ops[SCALE_KINDS][SCALE_MAX_ROUNDS], p50[SCALE_KINDS][SCALE_MAX_ROUNDS],
        p99[SCALE_KINDS][SCALE_MAX_ROUNDS];
} scale_ctx;

typedef struct scale_thread {
    scale_ctx *ctx;
    rlock *plain, *own_read, *own_write; /* this thread's own locks */
} scale_thread;

static void *scale_init(void *arg, int index) {
    scale_ctx *ctx = arg;
    char name[96];
    scale_thread *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ctx = ctx;
    snprintf(name, sizeof name, "bench:rw-own:%ld:%d", (long)getpid(), index);
    t->plain = get_lock(ctx->client, "bench:rw-plain:%ld:%ld", (long)getpid(), index);
    if (check(rlock_get_rw(ctx->client, name, &t->own_read, &t->own_write), "rlock_get_rw") < 0)
        exit(1);
    return t;
}

static int scale_cycle(void *state) {
    scale_thread *t = state;
    int what = atomic_load(&t->ctx->what);
    rlock *lock = what == SCALE_PLAIN      ? t->plain
                  : what == SCALE_READ_OWN ? t->own_read
                                           : t->ctx->shared;
    if (check(rlock_lock(lock), "rlock_lock") < 0)
        return -1;
    return check(rlock_unlock(lock), "rlock_unlock");
}

static void scale_fini(void *state) {
    scale_thread *t = state;
    rlock_free(t->plain);
    rlock_free(t->own_read);
    rlock_free(t->own_write);
    free(t);
}

static void scale_before(void *arg, int round) {
    scale_ctx *ctx = arg;
    atomic_store(&ctx->what, round % SCALE_KINDS);
}

static void scale_after(void *arg, int round, double ops, double p50, double p99) {
    scale_ctx *ctx = arg;
    int what = round % SCALE_KINDS, k = ctx->rounds[what]++;
    ctx->ops[what][k] = ops;
    ctx->p50[what][k] = p50;
    ctx->p99[what][k] = p99;
}

/* o->rounds rounds of each configuration, alternating; -1 on an error. */
static int scale_run(const options *o, scale_ctx *ctx, cycle_result *res) {
    cycle_ops ops = {scale_init, scale_cycle, scale_fini, ctx, scale_before, scale_after};
    int rounds = o->rounds < SCALE_MAX_ROUNDS ? o->rounds : SCALE_MAX_ROUNDS;
    fprintf(stderr, "  %d threads, rounds alternating: distinct plain locks, distinct read "
                    "locks, one read lock\n", o->threads);
    return run_cycles(&ops, o->threads, o->secs, SCALE_KINDS * rounds, res);
}

/* ---- writer wait ---------------------------------------------------------------------------- */

typedef struct churn {
    rlock *lock;
    int hold_us;
    atomic_long *stop, *reads, *failures;
} churn;

static void *churn_main(void *arg) {
    churn *c = arg;
    while (!atomic_load(c->stop)) {
        if (check(rlock_lock(c->lock), "rlock_lock (read)") < 0) {
            atomic_fetch_add(c->failures, 1);
            break;
        }
        usleep((useconds_t)c->hold_us);
        atomic_fetch_add(c->reads, 1);
        if (check(rlock_unlock(c->lock), "rlock_unlock (read)") < 0) {
            atomic_fetch_add(c->failures, 1);
            break;
        }
    }
    return NULL;
}

/* The writer: count write locks among the churning readers, each wait sampled. */
static int write_among(rlock *wr, long count, samples *waits) {
    for (long i = 0; i < count; i++) {
        usleep(3000); /* the readers' turn */
        uint64_t t0 = raw_now_ns();
        if (check(rlock_lock(wr), "rlock_lock (write)") < 0)
            return -1;
        samples_add(waits, raw_now_ns() - t0);
        usleep(200);
        if (check(rlock_unlock(wr), "rlock_unlock (write)") < 0)
            return -1;
    }
    return 0;
}

/* The writer among T churning readers of rd: its waits, and the reads done meanwhile. */
typedef struct wait_result {
    samples waits;
    double reads_per_s;
    int failed;
} wait_result;

static void writer_wait(const options *o, rlock *rd, rlock *wr, wait_result *res) {
    atomic_long stop = 0, reads = 0, failures = 0;
    churn c = {.lock = rd, .hold_us = o->settle_us, .stop = &stop, .reads = &reads,
               .failures = &failures};
    pthread_t *th = calloc((size_t)o->threads, sizeof *th);
    for (int i = 0; i < o->threads; i++)
        pthread_create(&th[i], NULL, churn_main, &c);
    raw_sleep_ms(100); /* under way */
    uint64_t t0 = raw_now_ns();
    long reads0 = atomic_load(&reads);
    int wrc = write_among(wr, o->count, &res->waits);
    double secs = (double)(raw_now_ns() - t0) / 1e9;
    res->reads_per_s = (double)(atomic_load(&reads) - reads0) / secs;
    atomic_store(&stop, 1);
    for (int i = 0; i < o->threads; i++)
        pthread_join(th[i], NULL);
    free(th);
    samples_sort(&res->waits);
    res->failed = wrc < 0 || atomic_load(&failures) > 0;
}

/* The JSON fields of one configuration: "<prefix>_ops_per_s" ... */
static void put_scale(jsonw *j, scale_ctx *sc, int what, const char *prefix, double plain) {
    char key[64];
    double ops = median(sc->ops[what], sc->rounds[what]);
    snprintf(key, sizeof key, "%s_ops_per_s", prefix);
    j_num(j, key, ops);
    snprintf(key, sizeof key, "%s_ratio", prefix);
    j_num(j, key, plain > 0 ? ops / plain : 0);
    snprintf(key, sizeof key, "%s_p50_ms", prefix);
    j_num(j, key, median(sc->p50[what], sc->rounds[what]));
    snprintf(key, sizeof key, "%s_p99_ms", prefix);
    j_num(j, key, median(sc->p99[what], sc->rounds[what]));
}

static void put_wait(jsonw *j, const wait_result *w, const char *prefix) {
    char key[64];
    snprintf(key, sizeof key, "%s_wait_p50_ms", prefix);
    j_num(j, key, samples_pct_ms(&w->waits, 50));
    snprintf(key, sizeof key, "%s_wait_p99_ms", prefix);
    j_num(j, key, samples_pct_ms(&w->waits, 99));
    snprintf(key, sizeof key, "%s_wait_max_ms", prefix);
    j_num(j, key, samples_pct_ms(&w->waits, 100));
    snprintf(key, sizeof key, "%s_reads_per_s_meanwhile", prefix);
    j_num(j, key, w->reads_per_s);
}

int bench_rw(const options *o) {
    char name[96];
    rlock *rd, *wr, *wrd, *wwr;
    cycle_result all;
    static scale_ctx sc; /* large: not on the stack */
    snprintf(name, sizeof name, "bench:rw:%ld", (long)getpid());
    rlock_client *readers = open_client(o, 0, o->threads), *writer = open_client(o, 0, 2);
    if (check(rlock_get_rw(readers, name, &rd, &wr), "rlock_get_rw") < 0 ||
        check(rlock_get_rw(writer, name, &wrd, &wwr), "rlock_get_rw") < 0)
        return 1;
    fprintf(stderr, "rw: %d readers, %d rounds of %.1f s; then %ld writes among churning readers "
                    "(read hold %d us)\n", o->threads, o->rounds, o->secs, o->count,
            o->settle_us);
    sc.client = readers;
    sc.shared = rd;
    int src = scale_run(o, &sc, &all);
    double plain_ops = median(sc.ops[SCALE_PLAIN], sc.rounds[SCALE_PLAIN]);
    double own_ops = median(sc.ops[SCALE_READ_OWN], sc.rounds[SCALE_READ_OWN]);
    double read_ops = median(sc.ops[SCALE_READ_SHARED], sc.rounds[SCALE_READ_SHARED]);

    wait_result ww = {0};
    writer_wait(o, rd, wwr, &ww);

    jsonw j;
    j_begin(&j, "rw");
    j_int(&j, "readers", o->threads);
    j_num(&j, "plain_ops_per_s", plain_ops);
    j_num(&j, "plain_p50_ms", median(sc.p50[SCALE_PLAIN], sc.rounds[SCALE_PLAIN]));
    j_num(&j, "plain_p99_ms", median(sc.p99[SCALE_PLAIN], sc.rounds[SCALE_PLAIN]));
    put_scale(&j, &sc, SCALE_READ_SHARED, "read", plain_ops);
    j_num(&j, "own_read_ops_per_s", own_ops);
    j_num(&j, "read_ratio_to_own", own_ops > 0 ? read_ops / own_ops : 0);
    j_int(&j, "writes", (long long)ww.waits.n);
    j_num(&j, "read_hold_ms", o->settle_us / 1000.0);
    put_wait(&j, &ww, "writer");
    j_int(&j, "errors", all.errors + ww.failed);
    j_int(&j, "rounds", o->rounds);
    j_num(&j, "round_s", o->secs);
    j_end(&j);
    samples_free(&ww.waits);
    rlock *handles[] = {rd, wr, wrd, wwr};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        rlock_free(handles[i]);
    rlock_client_close(readers);
    rlock_client_close(writer);
    return src < 0 || ww.failed ? 1 : 0;
}
