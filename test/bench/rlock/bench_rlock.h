/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_rlock.h - what the files of the bench_rlock program share: its
 * options, the helpers of test/bench/bench_rlock.c (client, lock, status
 * check, waiting, JSON latency fields), and one entry point per subcommand,
 * each in test/bench/rlock/<subcommand>.c. (Not named rlock.h: "rlock.h"
 * is the library's header.)
 */
#ifndef RLOCK_BENCH_RLOCK_H
#define RLOCK_BENCH_RLOCK_H

#include "bench/bench.h"
#include "rlock.h"

typedef struct options {
    const char *url;
    int threads, procs, rounds, waiters;
    long count;       /* hand-offs (handoff), locks (watchdog, memory) */
    double secs;      /* round or run length */
    double monitor_secs;
    long long lease;  /* 0 = watchdog lock */
    long long timeout; /* watchdog_timeout_ms */
    int settle_us;    /* handoff: pause before releasing to a waiter */
    int same_process;
    int two_clients;  /* handoff: the waiter is a thread with a client of its own */
    int fair;         /* handoff: rlock_get_fair instead of rlock_get */
    int local_handoffs;  /* rlock_config.local_handoffs; -1 = the library's default */
    int register_client; /* rlock_config.register_client; -1 = the library's default */
    int stats_ms;        /* uncontended: rlock_client_stats every stats_ms (0: never) */
    const char *samples; /* file for the latency distribution, or NULL */
} options;

/* on_lock_lost calls of the clients open_client() opened. */
extern atomic_long lost_locks;

/* Opens a client or exits; watchdog_ms 0 keeps the default. */
rlock_client *open_client(const options *o, long long watchdog_ms, int pool);
/* Prints a failed rlock call; returns -1 for it, 0 for RLOCK_OK. */
int check(int status, const char *what);
/* rlock_get of the name fmt makes of a and b, or exits. */
rlock *get_lock(rlock_client *c, const char *fmt, long a, long b);
/* rlock_lock_lease if lease > 0, else rlock_lock. */
int take(rlock *lock, long long lease);
/* A raw connection, or exits. */
redisContext *raw_or_exit(const char *url);
/* Waits until *v >= want (polling every 0.2 ms) or *abort is set. */
void wait_at_least(atomic_long *v, long want, atomic_long *abort_flag);
/* p50 .. max of sorted samples as JSON fields. */
void put_latency(jsonw *j, const samples *s);

/*
 * workers.c: P processes x T threads looping lock, critical section, unlock
 * on one lock (contention, fifo). A bench's shared memory starts with a
 * workers_shm; its own part follows.
 */
enum { WORKERS_WAIT, WORKERS_RUN, WORKERS_STOP };

typedef struct workers_shm {
    atomic_long ready, phase, errors;
} workers_shm;

typedef struct workers_spec {
    const options *o;   /* procs, threads, url */
    workers_shm *sh;    /* in shared memory */
    const char *name;   /* the lock */
    int fair;           /* rlock_get_fair instead of rlock_get */
    /* Worker index's (0 .. P*T-1) critical section on its raw connection: 0, or -1. */
    int (*critical)(const struct workers_spec *spec, long index, redisContext *redis);
    void *arg;          /* the bench's own part of the shared memory */
} workers_spec;

/* Forks the processes and their threads; returns once every worker is ready. */
void workers_start(const workers_spec *spec, pid_t *pids);
/* Stops the workers and reaps the processes; returns how many failed. */
int workers_stop(const workers_spec *spec, const pid_t *pids);

/* The subcommands: each prints one JSON line and returns the exit status. */
int bench_uncontended(const options *o);
int bench_fenced(const options *o);
int bench_handoff(const options *o);
int bench_contention(const options *o);
int bench_herd(const options *o);
int bench_watchdog(const options *o);
int bench_memory(const options *o);
int bench_redlock(const options *o);
int bench_fifo(const options *o);
int bench_fair_stall(const options *o);
int bench_rw(const options *o);
/* memory: re-runs the program with glibc's malloc cache off (memory.c). */
void without_tcache(char **argv);

#endif /* RLOCK_BENCH_RLOCK_H */
