/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_cluster.c - rlock on a Redis Cluster of its own (test/harness
 * cluster.c: 3 masters + 3 replicas on 127.0.0.1), measured in one run:
 *
 *   uncontended  lock+unlock, 1 thread, names spread over the 3 masters:
 *                rlock vs raw hiredis sending the same two EVALSHA straight
 *                to the owning master (the raw client knows the slot map);
 *                R pairs, each of blocks of 250 cycles in turn (raw, rlock,
 *                raw, rlock...) until each side ran S seconds, so both see
 *                the same noise; the ratio is the median of the pairs'.
 *                Redirects: INFO errorstats (MOVED, ASK) of every master
 *                before and after (target 0 per cycle).
 *   handoff      two processes, each with its own client, pass one lock back
 *                and forth: unlock call start in A -> rlock_lock return in B
 *                (CLOCK_MONOTONIC via shared memory), pubsub_mode SHARDED
 *                and CLASSIC; each beside its floor, the same hand-off in raw
 *                hiredis (floor.h). Measured again at the end on a cluster of
 *                3 masters without replicas (ho_bare_*): what replication and
 *                three more processes on the same cores cost.
 *   watchdog     W watchdog locks (default 100,000, names spread over every
 *                slot) held by one client, watchdog_timeout 3000 ms: per
 *                renewal round, EVALSHA calls and connections used per
 *                master (INFO commandstats, CLIENT LIST), round trips per
 *                master (pipelines the rlock-watchdog thread flushed to each
 *                master: see cluster/watchdog.c), the watchdog thread's CPU
 *                (/proc/self/task/TID/stat) and locks lost (LOCK_LOST).
 *   migration    a thread runs lock+unlock cycles on one name while its slot
 *                is migrated M times (IMPORTING/MIGRATING, MIGRATE, SETSLOT
 *                NODE): unlock latency inside the migration windows (from
 *                the first SETSLOT to 100 ms after every master names the
 *                new owner), and the calls that failed (target 0).
 *
 *   bench_cluster [-d SECONDS] [-r ROUNDS] [-n HANDOFFS] [-w LOCKS] [-k WD_ROUNDS]
 *                 [-m MIGRATIONS]
 *   bench_cluster -c CYCLES   only CYCLES raw then CYCLES rlock uncontended
 *                 cycles, untimed and unreported: for a profiler, e.g.
 *                 valgrind --tool=callgrind --toggle-collect='unc_*_cycle'
 *                 (instructions per cycle = each function's inclusive cost / CYCLES)
 *
 * Each section is a file of test/bench/cluster/ (cluster/bench_cluster.h);
 * this file has main(), the options, the cluster and its topology, the
 * helpers the sections share and the JSON line.
 *
 * Prints progress on stderr and one JSON line on stdout (test/bench/run.sh).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/bench_cluster.h"

h_cluster *hc;
h_server *masters[NMASTERS];
int master_port[NMASTERS];
static int slot_master[H_CLUSTER_SLOTS]; /* index into masters, -1 unknown */

void die(const char *fmt, const char *arg) {
    fprintf(stderr, "bench_cluster: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

int master_of_port(int port) {
    for (int i = 0; i < NMASTERS; i++)
        if (master_port[i] == port)
            return i;
    return -1;
}

/* The masters (in node order) and CLUSTER SLOTS of the first, as the raw side's map. */
static void read_topology(void) {
    if (h_cluster_masters(hc, masters) != NMASTERS)
        die("%s", "the cluster does not have 3 masters");
    for (int i = 0; i < NMASTERS; i++)
        master_port[i] = h_server_port(masters[i]);
    redisContext *c = raw_connect(h_server_url(masters[0]));
    redisReply *r = c ? redisCommand(c, "CLUSTER SLOTS") : NULL;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        die("%s", "CLUSTER SLOTS failed");
    for (int s = 0; s < H_CLUSTER_SLOTS; s++)
        slot_master[s] = -1;
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i];
        int m = master_of_port((int)e->element[2]->element[1]->integer);
        for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++)
            slot_master[s] = m;
    }
    freeReplyObject(r);
    redisFree(c);
}

int owner_index(const char *name) {
    return slot_master[h_slot(name, strlen(name))];
}

redisContext *master_conn(int m) {
    redisContext *c = raw_connect(h_server_url(masters[m]));
    if (c == NULL)
        die("%s", "cannot connect to a master");
    return c;
}

/* "errorstat_<what>:count=N" of INFO errorstats (0 when absent). */
static long long errorstat(redisContext *c, const char *what) {
    redisReply *r = redisCommand(c, "INFO errorstats");
    long long n = 0;
    char key[64];
    snprintf(key, sizeof key, "errorstat_%s:count=", what);
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, key);
        if (p != NULL)
            n = atoll(p + strlen(key));
    }
    if (r)
        freeReplyObject(r);
    return n;
}

void redirects_take(redisContext **mc, redirects *out) {
    *out = (redirects){0};
    for (int m = 0; m < NMASTERS; m++) {
        out->moved += errorstat(mc[m], "MOVED");
        out->ask += errorstat(mc[m], "ASK");
        out->tryagain += errorstat(mc[m], "TRYAGAIN");
    }
}

/* Sum over the masters of a command's calls (commandstats). */
long long calls_all(redisContext **mc, const char *cmd) {
    long long n = 0;
    for (int m = 0; m < NMASTERS; m++) {
        rstats s;
        if (rstats_take(mc[m], "commandstats", &s) == 0)
            n += rstats_calls(&s, cmd);
    }
    return n;
}

rlock_client *open_cluster_client(int pubsub_mode, long long wd_ms,
                                  void (*on_event)(const rlock_event *, void *), void *arg) {
    return open_cluster_client_at(hc->url, pubsub_mode, wd_ms, on_event, arg);
}

rlock_client *open_cluster_client_at(const char *url, int pubsub_mode, long long wd_ms,
                                     void (*on_event)(const rlock_event *, void *), void *arg) {
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.pubsub_mode = pubsub_mode;
    cfg.retry_attempts = 20;
    cfg.retry_interval_ms = 250;
    if (wd_ms > 0)
        cfg.watchdog_timeout_ms = wd_ms;
    cfg.on_event = on_event;
    cfg.callback_arg = arg;
    if (rlock_client_open(&cfg, &c) != RLOCK_OK)
        die("open: %s", rlock_last_error());
    return c;
}

/* ---- main --------------------------------------------------------------------------- */

static void put_per_master(jsonw *j, const char *key, const double *v, const char *fmt) {
    char buf[96];
    int n = 0;
    for (int m = 0; m < NMASTERS; m++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, fmt, m ? "/" : "", v[m]);
    j_str(j, key, buf);
}

/* A hand-off row: <prefix>_p50_ms, _p99_ms, _max_ms. */
static void put_handoff(jsonw *j, const char *prefix, const ho_result *r) {
    char key[64];
    snprintf(key, sizeof key, "%s_p50_ms", prefix);
    j_num(j, key, r->p50);
    snprintf(key, sizeof key, "%s_p99_ms", prefix);
    j_num(j, key, r->p99);
    snprintf(key, sizeof key, "%s_max_ms", prefix);
    j_num(j, key, r->max);
}

/* The hand-off rows, in the order measured (rlock, then its floor, per mode). */
enum { HO_SHARDED, HO_FLOOR_SHARDED, HO_CLASSIC, HO_FLOOR_CLASSIC, HO_ROWS };
static const char *const ho_keys[HO_ROWS] = {"sharded", "floor_sharded", "classic",
                                             "floor_classic"};

/* rlock's hand-off and its floor, sharded then classic, on cluster c. */
static void handoff_rows(const h_cluster *c, long n, ho_result *rows) {
    for (int k = 0; k < HO_ROWS; k += 2) {
        int mode = k == HO_SHARDED ? RLOCK_PUBSUB_SHARDED : RLOCK_PUBSUB_CLASSIC;
        bench_handoff(c, mode, n, &rows[k]);
        bench_handoff_floor(c, mode, n, &rows[k + 1]);
    }
}

static double max3(const double *v) {
    double x = v[0];
    for (int m = 1; m < NMASTERS; m++)
        x = v[m] > x ? v[m] : x;
    return x;
}

int main(int argc, char **argv) {
    double secs = 1;
    int rounds = 5, wd_rounds = 5, migrations = 4, opt;
    long handoffs = 2000, wd_locks = 100000, counted = 0;
    while ((opt = getopt(argc, argv, "d:r:n:w:k:m:c:")) != -1) {
        if (opt == 'd')
            secs = arg_num("-d", optarg, 0.1, 60);
        else if (opt == 'r')
            rounds = (int)arg_num("-r", optarg, 1, 32);
        else if (opt == 'n')
            handoffs = (long)arg_num("-n", optarg, 2, 1e6);
        else if (opt == 'w')
            wd_locks = (long)arg_num("-w", optarg, 1, 1e6);
        else if (opt == 'k')
            wd_rounds = (int)arg_num("-k", optarg, 1, 60);
        else if (opt == 'm')
            migrations = (int)arg_num("-m", optarg, 1, 64);
        else if (opt == 'c')
            counted = (long)arg_num("-c", optarg, 1, 1e7);
        else
            return fprintf(stderr, "usage: bench_cluster [-d S] [-r N] [-n HANDOFFS] [-w LOCKS] "
                                   "[-k WD_ROUNDS] [-m MIGRATIONS] | -c CYCLES\n"),
                   2;
    }
    uint64_t t0 = raw_now_ns();
    hc = h_cluster_start();
    read_topology();
    fprintf(stderr, "cluster %s up in %.1f s; masters :%d :%d :%d\n", hc->url,
            (double)(raw_now_ns() - t0) / 1e9, master_port[0], master_port[1], master_port[2]);
    if (counted > 0) {
        bench_uncontended_count(counted);
        h_cluster_stop(hc);
        return 0;
    }

    unc_result u;
    ho_result ho[HO_ROWS], bare[HO_ROWS];
    wd_result w;
    mig_result mg;
    bench_uncontended(secs, rounds, &u);
    handoff_rows(hc, handoffs, ho);
    bench_watchdog(wd_locks, 4, wd_rounds, &w);
    bench_migration(migrations, &mg);
    h_cluster_stop(hc);
    /* What replication and the replicas' processes cost a hand-off: 3 masters alone. */
    t0 = raw_now_ns();
    h_cluster *masters_only = h_cluster_start_masters();
    fprintf(stderr, "cluster of 3 masters, no replicas: %s up in %.1f s\n", masters_only->url,
            (double)(raw_now_ns() - t0) / 1e9);
    handoff_rows(masters_only, handoffs, bare);
    h_cluster_stop(masters_only);
    long long ho_errors = 0;
    for (int k = 0; k < HO_ROWS; k++)
        ho_errors += ho[k].errors + bare[k].errors;

    double lpe[NMASTERS];
    for (int m = 0; m < NMASTERS; m++)
        lpe[m] = w.locks_on[m] / w.evalsha_per_round[m];
    jsonw j;
    j_begin(&j, "cluster");
    j_num(&j, "unc_raw_ops", u.raw_ops);
    j_num(&j, "unc_raw_p50_ms", u.raw_p50);
    j_num(&j, "unc_raw_p99_ms", u.raw_p99);
    j_num(&j, "unc_ops", u.ops);
    j_num(&j, "unc_p50_ms", u.p50);
    j_num(&j, "unc_p99_ms", u.p99);
    j_num(&j, "unc_ratio", u.ratio);
    j_num(&j, "unc_ratio_min", u.ratio_min);
    j_num(&j, "unc_ratio_max", u.ratio_max);
    j_int(&j, "unc_pairs", rounds);
    j_num(&j, "unc_redirects_per_cycle", u.redirects_per_cycle);
    j_int(&j, "unc_moved", u.moved);
    j_int(&j, "unc_ask", u.ask);
    j_num(&j, "unc_scripts_per_cycle", u.scripts_per_cycle);
    j_num(&j, "unc_raw_cpu_us_per_cycle", u.raw_cpu_us);
    j_num(&j, "unc_cpu_us_per_cycle", u.cpu_us);
    j_str(&j, "unc_publish_verb", u.spublish > 0 && u.publish == 0   ? "spublish"
                                  : u.publish > 0 && u.spublish == 0 ? "publish"
                                                                     : "mixed");
    j_int(&j, "unc_cycles", u.cycles);
    j_int(&j, "ho_n", ho[HO_SHARDED].n);
    for (int k = 0; k < HO_ROWS; k++) {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "ho_%s", ho_keys[k]);
        put_handoff(&j, prefix, &ho[k]);
        snprintf(prefix, sizeof prefix, "ho_bare_%s", ho_keys[k]);
        put_handoff(&j, prefix, &bare[k]);
    }
    j_int(&j, "ho_errors", ho_errors);
    j_int(&j, "wd_locks", w.locks);
    j_num(&j, "wd_acquire_s", w.acquire_s);
    j_int(&j, "wd_rounds", w.rounds);
    j_num(&j, "wd_window_s", w.window_s);
    put_per_master(&j, "wd_locks_per_master", w.locks_on, "%s%.0f");
    put_per_master(&j, "wd_evalsha_per_round", w.evalsha_per_round, "%s%.0f");
    put_per_master(&j, "wd_locks_per_evalsha", lpe, "%s%.1f");
    put_per_master(&j, "wd_rtt_per_round", w.rtt_per_round, "%s%.2f");
    double conns[NMASTERS] = {w.max_conns[0], w.max_conns[1], w.max_conns[2]};
    put_per_master(&j, "wd_conns", conns, "%s%.0f");
    put_per_master(&j, "wd_redis_cpu_ms_per_round", w.redis_cpu_ms_per_round, "%s%.1f");
    j_num(&j, "wd_rtt_per_round_max", max3(w.rtt_per_round));
    j_num(&j, "wd_rtt_per_100_locks", max3(w.rtt_per_round) * 100 / w.locks_on[0]);
    j_num(&j, "wd_conns_max", max3(conns));
    j_num(&j, "wd_thread_cpu_pct", w.thread_cpu_pct);
    j_num(&j, "wd_process_cpu_pct", w.process_cpu_pct);
    j_int(&j, "wd_held", w.held);
    j_int(&j, "wd_all_held", w.held == w.locks);
    j_int(&j, "wd_min_ttl_ms", w.min_ttl);
    j_int(&j, "wd_lost", w.lost);
    j_int(&j, "wd_renewal_failed", w.failed);
    j_int(&j, "wd_other_flushes", w.other_flushes);
    j_int(&j, "mig_migrations", mg.migrations);
    j_num(&j, "mig_window_ms", mg.window_ms);
    j_int(&j, "mig_cycles", mg.in_windows);
    j_num(&j, "mig_unlock_p50_ms", mg.p50);
    j_num(&j, "mig_unlock_p99_ms", mg.p99);
    j_num(&j, "mig_unlock_max_ms", mg.max);
    j_num(&j, "mig_outside_p50_ms", mg.out_p50);
    j_num(&j, "mig_outside_p99_ms", mg.out_p99);
    j_int(&j, "mig_failed", mg.failed);
    j_int(&j, "mig_moved", mg.moved);
    j_int(&j, "mig_ask", mg.ask);
    j_int(&j, "mig_tryagain", mg.tryagain);
    j_int(&j, "mig_lost", mg.lost);
    j_int(&j, "mig_held_ok", mg.held_ok);
    j_num(&j, "run_s", (double)(raw_now_ns() - t0) / 1e9);
    j_end(&j);
    int bad = ho_errors || w.held != w.locks || w.lost || mg.failed || mg.lost ||
              !mg.held_ok;
    return bad ? 1 : 0;
}
