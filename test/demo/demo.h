/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * demo.h - what the files of the "don't oversell" demo share (main.c: the
 * options and the parent; seller.c: the selling processes and their buyer
 * threads; verdict.c: the final counts and the summary). See main.c for what
 * the demo does.
 */
#ifndef RLOCK_DEMO_H
#define RLOCK_DEMO_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "rawredis.h"
#include "rlock.h"

#define LOCK_NAME "demo:stock"
#define STOCK_KEY "demo:stock:items"
#define SOLD_KEY "demo:stock:sold"

typedef struct options {
    const char *url;
    int procs;
    int threads;
    long stock;
    long work_us;        /* time a sale takes while the lock is held (the "payment call") */
    int local_handoffs;  /* rlock_config.local_handoffs; -1: the library's default */
    int fair;            /* 1: the lock is rlock_get_fair()'s (FIFO across processes) */
} options;

/*
 * Everything the processes share. Lock-free atomics work across processes in
 * a MAP_SHARED mapping; the arrays are separate mappings made before fork,
 * so their addresses are the same in every process.
 */
typedef struct shared {
    _Atomic uint64_t released_ns; /* holder's stamp right before its final unlock */
    _Atomic uint64_t start_ns;    /* when the parent said go */
    _Atomic uint64_t end_ns;      /* when the last buyer stopped */
    atomic_int ready;             /* processes that opened their client */
    atomic_int go;
    atomic_long acquisitions; /* outer rlock_lock() calls that succeeded */
    atomic_long sold;
    atomic_long min_seen; /* lowest stock read under the lock */
    atomic_long errors;
    atomic_long nhandoffs;
    atomic_int holder_proc;       /* process of the latest outer acquisition (+1; 0: none yet) */
    atomic_long proc_sold[256]; /* sales per process: who got the lock */
    long handoff_cap;
    _Atomic uint64_t *handoff_ns; /* handoff_cap latencies */
    atomic_char *handoff_local;   /* [i] = 1: hand-off i stayed in its process */
    atomic_int *item_sales;       /* [k] = sales of the item numbered k (1..N) */
} shared;

/* One buyer thread. */
typedef struct buyer {
    const options *opt;
    shared *sh;
    rlock *lock;
    int proc; /* index of this process */
} buyer;

/* seller.c: the shared mapping for opt (made before fork, zero-filled). */
shared *make_shared(const options *opt);
/* seller.c: forks the sellers; returns how many were started. */
int spawn(const options *opt, shared *sh, pid_t *pids);
/* verdict.c: prints the summary; returns the exit status. */
int summarize(const options *opt, shared *sh, int failed_children);

#endif /* RLOCK_DEMO_H */
