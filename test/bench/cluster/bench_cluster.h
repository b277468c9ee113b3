/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_cluster.h - what the files of the bench_cluster program share.
 *
 *   bench_cluster.c  main(), the options, the cluster (hc) and its topology
 *                    (masters, ports, slot map), the helpers below, the JSON
 *                    line (test/bench/bench_cluster.c)
 *   uncontended.c    rlock vs raw hiredis lock+unlock, redirects per cycle
 *   handoff.c        cross-process hand-off latency, SHARDED and CLASSIC, and
 *                    its raw floor (floor.h), on a cluster given
 *   watchdog.c       renewal rounds of W watchdog locks; the --wrap counting
 *                    of rlock__io_flush
 *   migration.c      unlock latency through slot migrations
 *
 * Each section has one entry point that fills its result struct.
 */
#ifndef RLOCK_BENCH_CLUSTER_H
#define RLOCK_BENCH_CLUSTER_H

#include "bench/bench.h"
#include "harness.h"

#define NMASTERS 3

extern h_cluster *hc;
extern h_server *masters[NMASTERS];
extern int master_port[NMASTERS];

/* Prints "bench_cluster: " fmt (with arg) and exits 1. */
H_NORETURN void die(const char *fmt, const char *arg);
/* The index into masters of the master listening on port, or -1. */
int master_of_port(int port);
/* The index into masters of the master owning name's slot, or -1. */
int owner_index(const char *name);
/* A raw connection to master m, or exits. */
redisContext *master_conn(int m);

typedef struct redirects {
    long long moved, ask, tryagain;
} redirects;

/* MOVED, ASK and TRYAGAIN summed over the masters (INFO errorstats of mc[0..2]). */
void redirects_take(redisContext **mc, redirects *out);
/* Sum over the masters of a command's calls (commandstats). */
long long calls_all(redisContext **mc, const char *cmd);
/* A client of the cluster (retries 20 x 250 ms), or exits; wd_ms 0 keeps the default. */
rlock_client *open_cluster_client(int pubsub_mode, long long wd_ms,
                                  void (*on_event)(const rlock_event *, void *), void *arg);
/* The same for the cluster at url. */
rlock_client *open_cluster_client_at(const char *url, int pubsub_mode, long long wd_ms,
                                     void (*on_event)(const rlock_event *, void *), void *arg);

/* ---- the sections ---- */

typedef struct unc_result {
    double raw_ops, raw_p50, raw_p99, ops, p50, p99, raw_cpu_us, cpu_us; /* medians of pairs */
    double ratio, ratio_min, ratio_max; /* of the pairs' rlock / raw cycles/s */
    double redirects_per_cycle, scripts_per_cycle;
    long long moved, ask, cycles, spublish, publish;
} unc_result;

/* uncontended.c */
void bench_uncontended(double secs, int rounds, unc_result *out);
/* uncontended.c, for a profiler (bench_cluster -c N): N raw cycles, then N rlock
 * cycles, untimed, on the calling thread; nothing else is measured. */
void bench_uncontended_count(long cycles);

typedef struct ho_result {
    double p50, p99, max;
    long long n, errors;
} ho_result;

/* handoff.c, on cluster c: mode is RLOCK_PUBSUB_SHARDED or RLOCK_PUBSUB_CLASSIC. rlock's: */
void bench_handoff(const h_cluster *c, int mode, long n, ho_result *out);
/* Its floor: raw hiredis, rlock's scripts, (S)SUBSCRIBE and (S)PUBLISH (floor.h). */
void bench_handoff_floor(const h_cluster *c, int mode, long n, ho_result *out);

typedef struct wd_result {
    long locks, held;
    long long min_ttl, lost, failed;
    int rounds, max_conns[NMASTERS];
    double acquire_s, window_s, thread_cpu_pct, process_cpu_pct;
    double evalsha_per_round[NMASTERS], rtt_per_round[NMASTERS], locks_on[NMASTERS];
    double redis_cpu_ms_per_round[NMASTERS];
    long long other_flushes;
} wd_result;

/* watchdog.c: n locks acquired by nthreads threads, measured over rounds renewal rounds. */
void bench_watchdog(long n, int nthreads, int rounds, wd_result *out);

typedef struct mig_result {
    int migrations;
    long in_windows, outside;
    double p50, p99, max, out_p50, out_p99, window_ms;
    long long failed, moved, ask, tryagain, lost;
    int held_ok;
} mig_result;

/* migration.c */
void bench_migration(int migrations, mig_result *out);

#endif /* RLOCK_BENCH_CLUSTER_H */
