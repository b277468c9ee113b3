/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_stress.c - mutual exclusion under load, plain and through a faulty link.
 *
 *   scenario 8  4 processes x 8 threads, 20 s, one lock: random hold times, a mix of
 *               rlock_lock, rlock_try_lock (wait 1 s, lease 5 s) and reentrant
 *               acquisitions. Inside the critical section a non-atomic counter is
 *               incremented (read, pause, write) and an "inside" marker, shared by
 *               all processes, is checked on entry and on exit. Must hold: zero
 *               violations, the counter equals the number of acquisitions, no error,
 *               every thread acquired at least once (min/max per thread printed)
 *               (user-needs F25).
 *   scenario 9  the same through the test proxy (test/proxy.c), which delays every
 *               chunk by 0-3 ms and cuts a random connection every 150 ms on
 *               average: zero violations and an exact counter; errors are counted
 *               and printed, never double ownership.
 *
 * The threads behave as the header tells applications to: after RLOCK_EIO from an
 * acquisition they call again (which adopts an acquisition whose reply was lost);
 * after RLOCK_EIO from unlock they call unlock again. The marker is cleared before
 * the unlock is sent.
 *
 * No on_lock_lost without a fault (a renewal round racing a full unlock) is
 * checked in a tight loop by fault_spurious_lost.c.
 *
 * Environment: FAULT_STRESS_SECONDS (default 20), FAULT_STRESS_PROCS (4),
 * FAULT_STRESS_THREADS (8). SOAK_MINUTES (set by `make soak MINUTES=N`) overrides
 * the duration: each of the two scenarios runs N*60/2 seconds, N minutes in all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

#define MAX_PROCS 16
#define MAX_THREADS 64
#define NSTATUS 8 /* -rc for rc in RLOCK_EINVAL..RLOCK_ECLOSED, 0 unused */

/* Shared by every process (MAP_SHARED, made before fork); atomics only, except
 * the counter, which only the lock protects. */
struct shared {
    long long start_ms, stop_ms; /* CLOCK_MONOTONIC is system-wide */
    long counter;                /* non-atomic on purpose */
    int inside;                  /* 0, or the slot (1-based) of the thread inside */
    long violations;
    long acquisitions[MAX_PROCS * MAX_THREADS];
    long errors[NSTATUS];        /* acquisition errors by -status */
    long unlock_errors[NSTATUS]; /* unlock errors (before the retry that completed it) */
    long busy;                   /* try_lock timeouts (RLOCK_BUSY): not errors */
    long reentrant;              /* reentrant acquisitions */
    long gave_up;                /* acquisitions or unlocks abandoned after many EIO */
    long lost;                   /* on_lock_lost calls */
    long open_failures;
    long long max_wait_ms;       /* longest single acquisition call that succeeded */
    char first_violation[200];
};

struct stress {
    struct shared *sh;
    const char *url;
    const char *name;
    int procs, threads;
    long long wd;
};

struct worker {
    struct stress *st;
    rlock *lock;
    int slot; /* 1-based */
};

static unsigned xorshift(unsigned long long *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (unsigned)(*s >> 20);
}

static void add(long *p, long v) {
    __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}

static void note_status(long *table, int rc) {
    int i = -rc;
    if (i <= 0 || i >= NSTATUS)
        i = 0;
    add(&table[i], 1);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    if (us > 0)
        nanosleep(&ts, NULL);
}

static void enter(struct shared *sh, int slot) {
    int prev = __atomic_exchange_n(&sh->inside, slot, __ATOMIC_SEQ_CST);
    if (prev != 0 && __atomic_add_fetch(&sh->violations, 1, __ATOMIC_SEQ_CST) == 1)
        snprintf(sh->first_violation, sizeof sh->first_violation,
                 "thread %d entered while thread %d was inside", slot, prev);
}

static void leave(struct shared *sh, int slot) {
    int prev = __atomic_exchange_n(&sh->inside, 0, __ATOMIC_SEQ_CST);
    if (prev != slot && __atomic_add_fetch(&sh->violations, 1, __ATOMIC_SEQ_CST) == 1)
        snprintf(sh->first_violation, sizeof sh->first_violation,
                 "thread %d left and found thread %d's marker", slot, prev);
}

/* Unlock, calling again after RLOCK_EIO as the header says. */
static void release(struct worker *w) {
    int i, rc = RLOCK_EIO;
    for (i = 0; i < 50 && rc == RLOCK_EIO; i++) {
        rc = rlock_unlock(w->lock);
        if (rc != RLOCK_OK)
            note_status(w->st->sh->unlock_errors, rc);
        if (rc == RLOCK_EIO)
            sleep_us(20000);
    }
    if (rc == RLOCK_EIO)
        add(&w->st->sh->gave_up, 1);
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct shared *sh = w->st->sh;
    unsigned long long seed = (unsigned long long)h_now_us() * 2654435761ULL + (unsigned)w->slot;
    long mine = 0;

    while (h_now_ms() < sh->start_ms)
        sleep_us(1000);
    while (h_now_ms() < sh->stop_ms) {
        unsigned op = xorshift(&seed) % 4;
        long long t0 = h_now_ms(), waited;
        long c;
        int rc;

        if (op == 2)
            rc = rlock_try_lock(w->lock, 1000, 5000);
        else
            rc = rlock_lock(w->lock);
        if (rc == RLOCK_BUSY) {
            add(&sh->busy, 1);
            continue;
        }
        if (rc != RLOCK_OK) {
            note_status(sh->errors, rc); /* the next call adopts a lost acquisition */
            sleep_us(1000);
            continue;
        }
        waited = h_now_ms() - t0;
        if (waited > __atomic_load_n(&sh->max_wait_ms, __ATOMIC_RELAXED))
            __atomic_store_n(&sh->max_wait_ms, waited, __ATOMIC_RELAXED);

        enter(sh, w->slot);
        c = sh->counter;
        sleep_us((long)(xorshift(&seed) % 2000)); /* hold 0-2 ms */
        sh->counter = c + 1;
        mine++;
        if (op == 3) {
            /* Reentrant: take it again, then give that hold back. */
            int i;
            rc = RLOCK_EIO;
            for (i = 0; i < 50 && rc == RLOCK_EIO; i++) {
                rc = rlock_lock(w->lock);
                if (rc != RLOCK_OK)
                    note_status(sh->errors, rc);
            }
            if (rc == RLOCK_OK) {
                add(&sh->reentrant, 1);
                release(w);
            } else {
                add(&sh->gave_up, 1);
            }
        }
        leave(sh, w->slot);
        release(w);
        sleep_us((long)(xorshift(&seed) % 1000)); /* think 0-1 ms */
    }
    sh->acquisitions[w->slot - 1] = mine;
    return NULL;
}

static void lost_cb(const char *name, void *arg) {
    struct shared *sh = arg;
    (void)name;
    add(&sh->lost, 1);
}

static int stress_child(void *arg, int in, int out) {
    struct stress *st = arg;
    struct shared *sh = st->sh;
    struct worker w[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock *l = NULL;
    char line[64];
    int proc, i, rc = RLOCK_EIO;
    (void)out;

    if (h_line_recv(in, line, sizeof line, 30000) < 0)
        return 3;
    proc = atoi(line);
    h_config(&cfg);
    cfg.url = st->url;
    cfg.watchdog_timeout_ms = st->wd;
    cfg.on_lock_lost = lost_cb;
    cfg.callback_arg = sh;
    /* Through the proxy the first connection may be cut: try again. */
    for (i = 0; i < 20 && rc != RLOCK_OK; i++) {
        rc = rlock_client_open(&cfg, &c);
        if (rc != RLOCK_OK) {
            add(&sh->open_failures, 1);
            sleep_us(50000);
        }
    }
    if (rc != RLOCK_OK || rlock_get(c, st->name, &l) != RLOCK_OK)
        return 2;
    for (i = 0; i < st->threads; i++) {
        w[i].st = st;
        w[i].lock = l; /* one handle shared by all threads */
        w[i].slot = proc * st->threads + i + 1;
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0)
            return 4;
    }
    for (i = 0; i < st->threads; i++)
        pthread_join(th[i], NULL);
    rlock_free(l);
    rlock_client_close(c);
    return 0;
}

static int env_int(const char *name, int def, int lo, int hi) {
    const char *s = getenv(name);
    int v;
    if (!s || !*s)
        return def;
    v = atoi(s);
    return v < lo ? lo : v > hi ? hi : v;
}

/* Seconds each scenario runs. */
static long long duration_s(void) {
    const char *soak = getenv("SOAK_MINUTES");
    if (soak && *soak && atof(soak) > 0)
        return (long long)(atof(soak) * 60 / 2 + 0.5);
    return env_int("FAULT_STRESS_SECONDS", 20, 1, 24 * 3600);
}

/* What a stress run added up to. */
struct tally {
    long long total, minv, maxv;
    int zero_threads;
    char errs[400], uerrs[400]; /* " NAME=count" per status */
};

/* Adds up the acquisitions of the nthreads threads and the errors by status. */
static void tally_up(const struct shared *sh, int nthreads, struct tally *t) {
    int i;
    t->total = 0;
    t->minv = -1;
    t->maxv = 0;
    t->zero_threads = 0;
    t->errs[0] = t->uerrs[0] = '\0';
    for (i = 0; i < nthreads; i++) {
        long a = sh->acquisitions[i];
        t->total += a;
        if (t->minv < 0 || a < t->minv)
            t->minv = a;
        if (a > t->maxv)
            t->maxv = a;
        if (a == 0)
            t->zero_threads++;
    }
    for (i = 0; i < NSTATUS; i++) {
        if (sh->errors[i])
            snprintf(t->errs + strlen(t->errs), sizeof t->errs - strlen(t->errs), " %s=%ld",
                     i ? rlock_status_name(-i) : "other", sh->errors[i]);
        if (sh->unlock_errors[i])
            snprintf(t->uerrs + strlen(t->uerrs), sizeof t->uerrs - strlen(t->uerrs), " %s=%ld",
                     i ? rlock_status_name(-i) : "other", sh->unlock_errors[i]);
    }
}

/* The scenario's line of figures. */
static void print_tally(int with_proxy, const struct stress *st, long long secs,
                        const struct tally *t, const struct h_proxy_stats *ps) {
    const struct shared *sh = st->sh;
    printf("scenario %d%s: %d processes x %d threads, %lld s: %lld acquisitions (%.0f/s), "
           "%ld reentrant; violations %ld; counter %ld (%s); per thread min %lld max %lld; "
           "try_lock timeouts %ld; acquisition errors:%s; unlock errors:%s; gave up %ld; "
           "on_lock_lost %ld; longest acquisition %lld ms; open retries %ld",
           with_proxy ? 9 : 8, with_proxy ? " (proxy)" : "", st->procs, st->threads, secs, t->total,
           (double)t->total / (double)secs, sh->reentrant, sh->violations, sh->counter,
           sh->counter == t->total ? "exact" : "WRONG", t->minv, t->maxv, sh->busy,
           t->errs[0] ? t->errs : " none", t->uerrs[0] ? t->uerrs : " none", sh->gave_up, sh->lost,
           sh->max_wait_ms, sh->open_failures);
    if (with_proxy)
        printf("; proxy: %ld connections, %ld cut, %ld refused, %lld/%lld bytes up/down",
               ps->accepted, ps->cuts, ps->refused, ps->bytes_up, ps->bytes_down);
    printf("\n");
}

/* Mutual exclusion and an exact counter; without faults, no error and every
 * thread served. */
static void check_tally(int with_proxy, const struct shared *sh, const struct tally *t,
                        int nthreads) {
    int i;
    if (sh->violations)
        H_FAIL("mutual exclusion violated %ld times; first: %s", sh->violations,
               sh->first_violation);
    assert_int_equal(sh->counter, t->total);
    assert_true(t->total > 0);
    if (!with_proxy) {
        long errors = 0;
        for (i = 0; i < NSTATUS; i++)
            errors += sh->errors[i] + sh->unlock_errors[i];
        if (errors)
            H_FAIL("errors without any fault injected:%s /%s", t->errs, t->uerrs);
        assert_int_equal(sh->gave_up, 0);
        if (t->zero_threads)
            H_FAIL("%d of %d threads never acquired the lock", t->zero_threads, nthreads);
    }
}

/*
 * Waits until the proxy's thread has made its first allocations (its poll
 * array, a connection's pair) and is idle: under ASan (GCC 12's allocator
 * has no fork handler) a child forked while another thread is inside
 * malloc inherits the allocator's lock held and hangs at its first
 * allocation -- the child never ends. An idle proxy allocates nothing
 * until a connection comes, and every child is forked before any connects.
 */
static void proxy_settled(h_proxy *px) {
    struct sockaddr_in addr = {.sin_family = AF_INET};
    struct h_proxy_stats ps;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_port = htons((uint16_t)h_proxy_port(px));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    H_WAIT_FOR((h_proxy_stats(px, &ps), ps.accepted == 1 && ps.open == 1), 5000);
    close(fd);
    H_WAIT_FOR((h_proxy_stats(px, &ps), ps.open == 0), 5000);
}

/* Runs the stress processes for secs seconds (with_proxy: through px, made
 * faulty meanwhile; *ps gets its stats). Returns when the last one ended. */
static long long run_children(struct stress *st, int with_proxy, h_proxy *px, long long secs,
                              struct h_proxy_stats *ps) {
    struct shared *sh = st->sh;
    h_child ch[MAX_PROCS];
    long long t_end;
    int i;

    /* Children first (nothing of rlock's runs in this process meanwhile), all of them
       before any connects (proxy_settled says why). */
    if (with_proxy)
        proxy_settled(px);
    sh->start_ms = h_now_ms() + H_MS(1000);
    sh->stop_ms = sh->start_ms + secs * 1000;
    for (i = 0; i < st->procs; i++)
        h_child_start(&ch[i], stress_child, st);
    for (i = 0; i < st->procs; i++)
        h_child_send(&ch[i], "%d", i);
    if (with_proxy) {
        h_proxy_set_delay(px, 0, 3);
        h_proxy_set_cuts(px, 150);
    }
    for (i = 0; i < st->procs; i++) {
        int code = h_child_finish(&ch[i], secs * 1000 + 60000);
        if (code != 0)
            H_FAIL("stress process %d ended with code %d", i, code);
    }
    t_end = h_now_ms();
    if (with_proxy) {
        h_proxy_stats(px, ps);
        h_proxy_set_cuts(px, 0);
    }
    return t_end;
}

static void run_stress(int with_proxy) {
    h_server *srv = h_server_start();
    h_proxy *px = NULL;
    struct shared *sh;
    struct stress st;
    redisContext *r;
    struct h_proxy_stats ps;
    long long secs = duration_s(), t_end;
    int nthreads;
    long lost;
    struct tally t;

    memset(&ps, 0, sizeof ps);
    st.procs = env_int("FAULT_STRESS_PROCS", 4, 1, MAX_PROCS);
    st.threads = env_int("FAULT_STRESS_THREADS", 8, 1, MAX_THREADS);
    st.wd = H_MS(5000);
    st.name = h_unique_name(with_proxy ? "stress-proxy" : "stress");
    nthreads = st.procs * st.threads;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    st.sh = sh;
    if (with_proxy) {
        px = h_proxy_start(h_server_port(srv));
        st.url = h_proxy_url(px);
    } else {
        st.url = h_server_url(srv);
    }
    t_end = run_children(&st, with_proxy, px, secs, &ps);

    tally_up(sh, nthreads, &t);
    print_tally(with_proxy, &st, secs, &t, &ps);
    check_tally(with_proxy, sh, &t, nthreads);

    /* Nothing is left behind (an acquisition whose reply was lost by a thread
     * that then stopped expires with its lease). */
    r = h_server_redis(srv);
    H_WAIT_FOR(h_exists(r, st.name, strlen(st.name)) == 0, st.wd + 2000);
    H_WAIT_FOR(h_numsub(r, st.name, strlen(st.name)) == 0, 5000);
    printf("scenario %d: lock free %lld ms after the last process exited\n",
           with_proxy ? 9 : 8, h_now_ms() - t_end);
    lost = sh->lost;
    redisFree(r);
    h_proxy_stop(px);
    munmap(sh, sizeof *sh);
    h_server_stop(srv);
    /* Checked last: mutual exclusion and counts above are the scenario's core. */
    if (!with_proxy && lost != 0)
        H_FAIL("no fault was injected, yet on_lock_lost was called %ld times (the same race "
               "as test_no_spurious_lost: a renewal round racing a full unlock)", lost);
}

static void test_stress(void **state) {
    (void)state;
    run_stress(0);
}

static void test_stress_proxy(void **state) {
    (void)state;
    run_stress(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress),
        cmocka_unit_test(test_stress_proxy),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
