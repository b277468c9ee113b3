/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exclusion.c - the mutual-exclusion contest: shared memory, the forked
 * processes and their threads, and the parent's start / stop / report.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "child.h"
#include "exclusion.h"
#include "fail.h"
#include "timing.h"

/* Shared by every process (MAP_SHARED before fork). */
struct h_excl_shared {
    atomic_int inside;   /* holders in the critical section now */
    atomic_int overlaps; /* times a holder found another inside */
    atomic_long overruns; /* holders that left after their validity */
    long counter;        /* read, pause, write: exact only under exclusion */
    atomic_long acquisitions;
    atomic_long per_process[H_EXCL_MAX_PROCESSES];
    atomic_long refused[H_EXCL_MAX_PROCESSES]; /* ENOREPL, EIO, BUSY, ...: tried again */
    atomic_int last_refusal[H_EXCL_MAX_PROCESSES];
    atomic_long bad_unlocks; /* unlocks not RLOCK_OK */
    atomic_int last_bad_unlock;
    char bad_unlock_msg[256]; /* rlock_last_error() of one of them */
    atomic_int stop;
};

typedef struct worker {
    h_excl_shared *sh;
    const h_excl_ops *ops;
    void *ctx;
    int process;
} worker;

static void critical_section(h_excl_shared *sh, int process) {
    if (atomic_fetch_add(&sh->inside, 1) != 0)
        atomic_fetch_add(&sh->overlaps, 1);
    long seen = sh->counter;
    usleep(300);
    sh->counter = seen + 1;
    atomic_fetch_add(&sh->acquisitions, 1);
    atomic_fetch_add(&sh->per_process[process], 1);
    atomic_fetch_sub(&sh->inside, 1);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    h_excl_shared *sh = w->sh;
    while (!atomic_load(&sh->stop)) {
        long long valid_ms = -1;
        int rc = w->ops->acquire(w->ctx, &valid_ms);
        long long until = valid_ms >= 0 ? h_now_ms() + valid_ms : -1;
        if (rc != RLOCK_OK) {
            atomic_fetch_add(&sh->refused[w->process], 1);
            atomic_store(&sh->last_refusal[w->process], rc);
            usleep(20000);
            continue;
        }
        critical_section(sh, w->process);
        if (until >= 0 && h_now_ms() > until)
            atomic_fetch_add(&sh->overruns, 1);
        rc = w->ops->release(w->ctx);
        if (rc != RLOCK_OK) {
            atomic_store(&sh->last_bad_unlock, rc);
            snprintf(sh->bad_unlock_msg, sizeof sh->bad_unlock_msg, "%s", rlock_last_error());
            atomic_fetch_add(&sh->bad_unlocks, 1);
        }
    }
    return NULL;
}

/* One process: what ops opens, threads threads on it. */
H_NORETURN static void run_process(const h_excl_ops *ops, h_excl_shared *sh, int process,
                                   int threads) {
    pthread_t th[H_EXCL_MAX_THREADS];
    worker w = {.sh = sh, .ops = ops, .process = process};
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves none behind */
    w.ctx = ops->open(ops->arg, process);
    H_CHILD_CHECK(w.ctx != NULL, 2);
    for (int t = 0; t < threads; t++)
        H_CHILD_CHECK(pthread_create(&th[t], NULL, worker_main, &w) == 0, 4);
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    ops->close(w.ctx);
    h_child_exit(0);
}

/* The default contest: one client per process, one handle, watchdog lease. */
typedef struct one_lock {
    const rlock_config *cfg;
    const char *name;
    rlock_client *client;
    rlock *lock;
} one_lock;

static void *one_lock_open(const void *arg, int process) {
    static one_lock one; /* one per process: each child has its own copy */
    (void)process;
    one = *(const one_lock *)arg;
    H_CHILD_CHECK(rlock_client_open(one.cfg, &one.client) == RLOCK_OK, 2);
    H_CHILD_CHECK(rlock_get(one.client, one.name, &one.lock) == RLOCK_OK, 3);
    return &one;
}

static int one_lock_acquire(void *ctx, long long *valid_ms) {
    *valid_ms = -1;
    return rlock_try_lock(((one_lock *)ctx)->lock, 2000, RLOCK_LEASE_WATCHDOG);
}

static int one_lock_release(void *ctx) {
    return rlock_unlock(((one_lock *)ctx)->lock);
}

static void one_lock_close(void *ctx) {
    one_lock *one = ctx;
    rlock_free(one->lock);
    rlock_client_close(one->client);
}

void h_excl_config(rlock_config *cfg, const char *url) {
    rlock_config_init(cfg);
    cfg->url = url;
    cfg->watchdog_timeout_ms = 3000;
    cfg->retry_attempts = 40;
    cfg->retry_interval_ms = 250;
}

void h_excl_start(h_exclusion *ex, const rlock_config *cfg, const char *name, int processes,
                  int threads) {
    static one_lock one; /* read by the children, which are forked below */
    static const h_excl_ops ops = {one_lock_open, one_lock_acquire, one_lock_release,
                                   one_lock_close, &one};
    one = (one_lock){.cfg = cfg, .name = name};
    h_excl_start_ops(ex, &ops, processes, threads);
}

void h_excl_start_ops(h_exclusion *ex, const h_excl_ops *ops, int processes, int threads) {
    if (processes < 1 || processes > H_EXCL_MAX_PROCESSES || threads < 1 ||
        threads > H_EXCL_MAX_THREADS)
        H_FAIL("h_excl_start: %d processes x %d threads (at most %d x %d)", processes, threads,
               H_EXCL_MAX_PROCESSES, H_EXCL_MAX_THREADS);
    memset(ex, 0, sizeof *ex);
    ex->sh = mmap(NULL, sizeof *ex->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ex->sh == MAP_FAILED)
        H_FAIL("h_excl_start: mmap of the shared state failed");
    memset(ex->sh, 0, sizeof *ex->sh);
    ex->processes = processes;
    fflush(stdout); /* nothing buffered twice */
    for (int p = 0; p < processes; p++) {
        ex->pid[p] = fork();
        if (ex->pid[p] < 0)
            H_FAIL("h_excl_start: fork failed");
        if (ex->pid[p] == 0)
            run_process(ops, ex->sh, p, threads);
    }
}

long h_excl_acquisitions(const h_exclusion *ex) {
    return atomic_load(&ex->sh->acquisitions);
}

void h_excl_wait_more(const h_exclusion *ex, long more, long long timeout_ms) {
    long now = h_excl_acquisitions(ex);
    H_WAIT_FOR(h_excl_acquisitions(ex) > now + more, timeout_ms);
}

void h_excl_stop(h_exclusion *ex, long long timeout_ms, h_excl_result *r) {
    h_excl_shared *sh = ex->sh;
    int code[H_EXCL_MAX_PROCESSES];
    atomic_store(&sh->stop, 1);
    for (int p = 0; p < ex->processes; p++)
        code[p] = h_child_code(h_wait_child(ex->pid[p], timeout_ms));
    memset(r, 0, sizeof *r);
    r->processes = ex->processes;
    r->acquisitions = atomic_load(&sh->acquisitions);
    r->counter = sh->counter;
    r->overlaps = atomic_load(&sh->overlaps);
    r->overruns = atomic_load(&sh->overruns);
    for (int p = 0; p < ex->processes; p++) {
        r->per_process[p] = atomic_load(&sh->per_process[p]);
        r->refused[p] = atomic_load(&sh->refused[p]);
        r->last_refusal[p] = atomic_load(&sh->last_refusal[p]);
    }
    r->bad_unlocks = atomic_load(&sh->bad_unlocks);
    r->last_bad_unlock = atomic_load(&sh->last_bad_unlock);
    memcpy(r->bad_unlock_msg, sh->bad_unlock_msg, sizeof r->bad_unlock_msg);
    r->bad_unlock_msg[sizeof r->bad_unlock_msg - 1] = '\0';
    munmap(sh, sizeof *sh);
    ex->sh = NULL;
    for (int p = 0; p < ex->processes; p++)
        if (code[p] != 0)
            H_FAIL("contest process %d (pid %d) ended with code %d, expected 0", p, (int)ex->pid[p],
                   code[p]);
}

void h_excl_print(const h_excl_result *r) {
    printf("      %ld acquisitions, counter %ld, overlaps %d, overruns %ld, unlocks not OK %ld "
           "(last %s)\n",
           r->acquisitions, r->counter, r->overlaps, r->overruns, r->bad_unlocks,
           rlock_status_name(r->last_bad_unlock));
    if (r->bad_unlocks > 0)
        printf("      an unlock said: %s\n", r->bad_unlock_msg);
    for (int p = 0; p < r->processes; p++)
        printf("      process %d: %ld acquisitions, %ld attempts refused or timed out (last %s)\n",
               p, r->per_process[p], r->refused[p], rlock_status_name(r->last_refusal[p]));
}
