/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * seller.c - the selling side of the demo: the shared mapping, one buyer
 * thread (lock, reentrant buy, unlock, timing hand-offs), and one forked
 * process with its own client and T buyers.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "demo.h"

/* ---- shared memory ---------------------------------------------------------- */

static void *map_shared(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("demo: mmap");
        exit(1);
    }
    return p; /* zero-filled */
}

shared *make_shared(const options *opt) {
    shared *sh = map_shared(sizeof *sh);
    /* Each outer acquisition sells at most one item, and each buyer makes one
     * last acquisition to see the stock at 0: that bounds the hand-offs. */
    sh->handoff_cap = opt->stock + (long)opt->procs * opt->threads + 16;
    sh->handoff_ns = map_shared((size_t)sh->handoff_cap * sizeof *sh->handoff_ns);
    sh->handoff_local = map_shared((size_t)sh->handoff_cap * sizeof *sh->handoff_local);
    sh->item_sales = map_shared((size_t)(opt->stock + 1) * sizeof *sh->item_sales);
    atomic_store(&sh->min_seen, opt->stock);
    return sh;
}

static void atomic_min(atomic_long *v, long x) {
    long cur = atomic_load(v);
    while (x < cur && !atomic_compare_exchange_weak(v, &cur, x)) {
    }
}

static void atomic_max_u64(_Atomic uint64_t *v, uint64_t x) {
    uint64_t cur = atomic_load(v);
    while (x > cur && !atomic_compare_exchange_weak(v, &cur, x)) {
    }
}

/* ---- one buyer ---------------------------------------------------------------- */

static void fail(shared *sh, const char *what, int status) {
    fprintf(stderr, "demo[%d]: %s: %s\n", (int)getpid(), what, status ? rlock_strerror(status) : "failed");
    atomic_fetch_add(&sh->errors, 1);
}

/*
 * Records how long the lock took to reach us after its previous holder let
 * go, and whether that holder was a thread of our own process. Only
 * acquisitions that really waited count: if the previous release was
 * stamped before we even called rlock_lock(), the lock was free (or was
 * being released) when we asked, and no hand-off to a waiter took place.
 */
static void record_handoff(shared *sh, int proc, uint64_t called_ns, uint64_t got_ns) {
    int previous = atomic_exchange(&sh->holder_proc, proc + 1); /* we hold the lock */
    uint64_t released = atomic_load(&sh->released_ns);
    if (released <= called_ns || released > got_ns) /* the latter only if the lock is broken */
        return;
    long i = atomic_fetch_add(&sh->nhandoffs, 1);
    if (i < sh->handoff_cap) {
        atomic_store(&sh->handoff_ns[i], got_ns - released);
        atomic_store(&sh->handoff_local[i], previous == proc + 1);
    }
}

/* Books one sale of the item numbered `item` (the stock value it was sold at). */
static void record_sale(buyer *b, long long item) {
    shared *sh = b->sh;
    atomic_min(&sh->min_seen, (long)item);
    if (item <= b->opt->stock) /* a value out of range would be a bug too */
        atomic_fetch_add(&sh->item_sales[item], 1);
    atomic_fetch_add(&sh->sold, 1);
    atomic_fetch_add(&sh->proc_sold[b->proc], 1);
}

/*
 * The buy path. It takes the lock again although the caller holds it: a
 * reentrant hold, as a library function called from locked code would.
 * Returns 1 when the stock is gone, 0 after a sale, -1 on an error.
 */
static int buy_one(buyer *b, redisContext *redis) {
    shared *sh = b->sh;
    int status = rlock_lock(b->lock);
    if (status != RLOCK_OK) {
        fail(sh, "reentrant rlock_lock", status);
        return -1;
    }
    long long stock = -1;
    int result = -1;
    if (raw_int(redis, &stock, "GET " STOCK_KEY) < 0) {
        fail(sh, "GET stock", 0);
    } else if (stock <= 0) {
        atomic_min(&sh->min_seen, (long)stock);
        result = 1;
    } else {
        if (b->opt->work_us > 0) /* the payment call, made between the read and the write */
            raw_sleep_ms((double)b->opt->work_us / 1000.0);
        if (raw_ok(redis, "SET " STOCK_KEY " %lld", stock - 1) < 0 ||
            raw_ok(redis, "INCR " SOLD_KEY) < 0) {
            fail(sh, "SET stock", 0);
        } else {
            record_sale(b, stock);
            result = 0;
        }
    }
    status = rlock_unlock(b->lock);
    if (status != RLOCK_OK) {
        fail(sh, "inner rlock_unlock", status);
        result = -1;
    }
    return result;
}

/* Lock, buy, unlock until the stock is gone or something fails. */
static void *buyer_main(void *arg) {
    buyer *b = arg;
    shared *sh = b->sh;
    redisContext *redis = raw_connect(b->opt->url);
    if (redis == NULL) {
        fail(sh, "raw connection", 0);
        return NULL;
    }
    while (!atomic_load(&sh->go))
        raw_sleep_ms(1);
    for (;;) {
        uint64_t called = raw_now_ns();
        int status = rlock_lock(b->lock);
        if (status != RLOCK_OK) {
            fail(sh, "rlock_lock", status);
            break;
        }
        record_handoff(sh, b->proc, called, raw_now_ns());
        atomic_fetch_add(&sh->acquisitions, 1);
        int result = buy_one(b, redis);
        atomic_store(&sh->released_ns, raw_now_ns());
        status = rlock_unlock(b->lock);
        if (status != RLOCK_OK) {
            fail(sh, "rlock_unlock", status);
            break;
        }
        if (result != 0)
            break;
    }
    atomic_max_u64(&sh->end_ns, raw_now_ns());
    redisFree(redis);
    return NULL;
}

/* ---- one process ---------------------------------------------------------------- */

/* Runs in a forked child: its own client, one shared handle, T buyers. */
static void child_main(const options *opt, shared *sh, int proc) {
    rlock_config cfg;
    rlock_client *client = NULL;
    rlock *lock = NULL;
    rlock_config_init(&cfg);
    cfg.url = opt->url;
    if (opt->local_handoffs >= 0)
        cfg.local_handoffs = opt->local_handoffs;
    int status = rlock_client_open(&cfg, &client);
    if (status == RLOCK_OK)
        status = opt->fair ? rlock_get_fair(client, LOCK_NAME, &lock)
                           : rlock_get(client, LOCK_NAME, &lock);
    atomic_fetch_add(&sh->ready, 1);
    if (status != RLOCK_OK) {
        fail(sh, "rlock_client_open", status);
        rlock_client_close(client);
        _exit(1);
    }
    pthread_t tids[256];
    buyer b = {opt, sh, lock, proc}; /* the handle is thread-safe: all buyers share it */
    int started = 0;
    for (; started < opt->threads; started++)
        if (pthread_create(&tids[started], NULL, buyer_main, &b) != 0)
            break;
    if (started < opt->threads)
        fail(sh, "pthread_create", 0);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    rlock_free(lock);
    rlock_client_close(client);
    _exit(0);
}

/* Forks the sellers; returns how many were started. */
int spawn(const options *opt, shared *sh, pid_t *pids) {
    fflush(NULL); /* or the children would flush our buffers again */
    for (int i = 0; i < opt->procs; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("demo: fork");
            return i;
        }
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans selling on if we are killed */
            child_main(opt, sh, i);
        }
    }
    return opt->procs;
}

