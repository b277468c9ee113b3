/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_rlock.c - librlock's benchmarks, one subcommand per row of the
 * `make bench` table (test/bench/run.sh runs them in order), each in its own
 * file of test/bench/rlock/:
 *
 *   uncontended  lock+unlock cycles/s and latency, threads on distinct locks
 *   fenced       a fenced lock's cycle beside a plain lock's, in one run
 *   handoff      unlock-call-to-waiter-return latency, waiter in another
 *                process or in the same process
 *   contention   P processes x T threads on one lock, GET+SET in the
 *                critical section: throughput, fairness, Redis cost
 *   herd         W waiting threads of one process: script calls per hand-off
 *   watchdog     N held watchdog locks: renewal cost and correctness
 *   memory       client heap and Redis memory per handle, held lock, waiter
 *   redlock      Redlock acquire over 3 masters of its own, beside one master
 *                and beside Redisson's one-after-another attempt
 *   fifo         P processes x T threads on one fair lock: acquisitions out
 *                of the queue's order (inversions), hand-off under contention
 *   fair-stall   a fair lock's waiter SIGKILLed at the head of the queue: the
 *                stall of the live waiter behind it, against its bound
 *   rw           the read-write lock: readers of one lock beside plain locks,
 *                a writer's wait among churning readers
 *
 * Each prints progress on stderr and one JSON line on stdout. Nothing here
 * asserts speed: a subcommand fails (exit 1) only when the library returned
 * an error or a correctness check (exact counter, locks still held) failed.
 *
 * Raw hiredis connections (rawredis.h) read INFO and do the critical-section
 * work, so that no measurement goes through the code it measures.
 *
 * This file: the helpers the subcommands share (rlock/bench_rlock.h), the
 * options and main().
 */
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include "rlock/bench_rlock.h"

/* ---- common ---------------------------------------------------------------- */

atomic_long lost_locks; /* on_lock_lost calls */

static void count_lost(const char *name, void *arg) {
    (void)name;
    (void)arg;
    atomic_fetch_add(&lost_locks, 1);
}

/* Opens a client or exits; watchdog_ms 0 keeps the default. */
rlock_client *open_client(const options *o, long long watchdog_ms, int pool) {
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock_config_init(&cfg);
    cfg.url = o->url;
    cfg.on_lock_lost = count_lost;
    if (watchdog_ms > 0)
        cfg.watchdog_timeout_ms = watchdog_ms;
    if (pool > cfg.pool_size)
        cfg.pool_size = pool > 1024 ? 1024 : pool;
    if (o->local_handoffs >= 0)
        cfg.local_handoffs = o->local_handoffs;
    if (o->register_client >= 0)
        cfg.register_client = o->register_client;
    int status = rlock_client_open(&cfg, &c);
    if (status != RLOCK_OK) {
        fprintf(stderr, "rlock_client_open(%s): %s\n", o->url, rlock_strerror(status));
        exit(1);
    }
    return c;
}

/* Prints a failed rlock call; returns -1 for it, 0 for RLOCK_OK. */
int check(int status, const char *what) {
    if (status == RLOCK_OK)
        return 0;
    fprintf(stderr, "[%d] %s: %s (%s)\n", (int)getpid(), what, rlock_status_name(status),
            rlock_strerror(status));
    return -1;
}

rlock *get_lock(rlock_client *c, const char *fmt, long a, long b) {
    char name[128];
    rlock *lock = NULL;
    snprintf(name, sizeof name, fmt, a, b);
    if (check(rlock_get(c, name, &lock), "rlock_get") < 0)
        exit(1);
    return lock;
}

int take(rlock *lock, long long lease) {
    return lease > 0 ? rlock_lock_lease(lock, lease) : rlock_lock(lock);
}

redisContext *raw_or_exit(const char *url) {
    redisContext *c = raw_connect(url);
    if (c == NULL)
        exit(1);
    return c;
}

/* Waits until *v >= want (polling every 0.2 ms) or *abort is set. */
void wait_at_least(atomic_long *v, long want, atomic_long *abort_flag) {
    while (atomic_load(v) < want && atomic_load(abort_flag) == 0)
        raw_sleep_ms(0.2);
}

void put_latency(jsonw *j, const samples *s) {
    j_num(j, "p50_ms", samples_pct_ms(s, 50));
    j_num(j, "p90_ms", samples_pct_ms(s, 90));
    j_num(j, "p99_ms", samples_pct_ms(s, 99));
    j_num(j, "p999_ms", samples_pct_ms(s, 99.9));
    j_num(j, "max_ms", samples_pct_ms(s, 100));
}

/* ---- main ------------------------------------------------------------------------------------------ */

static void usage(FILE *out) {
    fprintf(out,
            "usage: bench_rlock SUBCOMMAND [--url URL] [options]\n"
            "  uncontended [-t THREADS] [-d SECONDS] [-r ROUNDS] [--lease MS] [--stats-ms MS]\n"
            "  fenced      [-d SECONDS] [-r ROUNDS]   fenced vs plain cycle, alternating, for d x r s\n"
            "  handoff     [-n HANDOFFS] [--same-process | --two-clients] [--fair] [--settle-us US] [--samples FILE]\n"
            "  contention  [-p PROCS] [-t THREADS] [-d SECONDS] [--monitor SECONDS] [--samples FILE]\n"
            "  herd        [-w WAITERS] [-r ROUNDS]\n"
            "  watchdog    [-n LOCKS] [-t THREADS] [--timeout MS] [-r ROUNDS]\n"
            "  memory      [-n LOCKS] [-w WAITERS]\n"
            "  redlock     [-n CYCLES]   (3 redis-servers of its own; --url unused)\n"
            "  fifo        [-p PROCS] [-t THREADS] [-d SECONDS]   (a fair lock)\n"
            "  fair-stall  [-r ROUNDS] [--lease MS]\n"
            "  rw          [-t READERS] [-d SECONDS] [-r ROUNDS] [-n WRITES] [--settle-us READ_HOLD_US]\n"
            "Every subcommand takes --local-handoffs N (rlock_config.local_handoffs) and\n"
            "--register 0|1 (rlock_config.register_client).\n"
            "URL defaults to $RLOCK_TEST_URL. Prints one JSON line on stdout.\n");
}

static void parse_options(int argc, char **argv, options *o) {
    static const struct option longopts[] = {
        {"url", required_argument, NULL, 'u'},         {"lease", required_argument, NULL, 'L'},
        {"same-process", no_argument, NULL, 'S'},      {"settle-us", required_argument, NULL, 'U'},
        {"samples", required_argument, NULL, 'F'},     {"monitor", required_argument, NULL, 'M'},
        {"timeout", required_argument, NULL, 'T'},     {"help", no_argument, NULL, 'h'},
        {"local-handoffs", required_argument, NULL, 'H'}, {"fair", no_argument, NULL, 'f'},
        {"two-clients", no_argument, NULL, 'C'},     {"register", required_argument, NULL, 'R'},
        {"stats-ms", required_argument, NULL, 'P'},
        {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "t:p:d:r:n:w:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u': o->url = optarg; break;
        case 't': o->threads = (int)arg_num("-t", optarg, 1, 256); break;
        case 'p': o->procs = (int)arg_num("-p", optarg, 1, 256); break;
        case 'd': o->secs = arg_num("-d", optarg, 0.1, 3600); break;
        case 'r': o->rounds = (int)arg_num("-r", optarg, 1, 100); break;
        case 'n': o->count = (long)arg_num("-n", optarg, 2, 10000000); break;
        case 'w': o->waiters = (int)arg_num("-w", optarg, 1, 10000); break;
        case 'L': o->lease = (long long)arg_num("--lease", optarg, 1, 1e12); break;
        case 'S': o->same_process = 1; break;
        case 'f': o->fair = 1; break;
        case 'C': o->two_clients = 1; break;
        case 'U': o->settle_us = (int)arg_num("--settle-us", optarg, 0, 1e6); break;
        case 'F': o->samples = optarg; break;
        case 'M': o->monitor_secs = arg_num("--monitor", optarg, 0, 600); break;
        case 'T': o->timeout = (long long)arg_num("--timeout", optarg, 30, 1e9); break;
        case 'H': o->local_handoffs = (int)arg_num("--local-handoffs", optarg, 0, 1000); break;
        case 'R': o->register_client = (int)arg_num("--register", optarg, 0, 1); break;
        case 'P': o->stats_ms = (int)arg_num("--stats-ms", optarg, 1, 60000); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        usage(argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
        return argc >= 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    const char *sub = argv[1];
    int is_wd = strcmp(sub, "watchdog") == 0, is_mem = strcmp(sub, "memory") == 0;
    int is_cont = strcmp(sub, "contention") == 0, is_fifo = strcmp(sub, "fifo") == 0;
    int is_rw = strcmp(sub, "rw") == 0;
    options o = {.url = default_url(), .threads = is_wd || is_cont || is_fifo ? 4 : is_rw ? 8 : 1,
                 .procs = 4, .rounds = 3, .waiters = is_mem ? 100 : 10,
                 .count = is_wd ? 10000 : is_mem ? 10000 : is_rw ? 300 : 2000,
                 .secs = is_cont ? 10 : is_fifo ? 5 : 1.5, .monitor_secs = 2,
                 .timeout = 3000, .settle_us = 1000, .local_handoffs = -1,
                 .register_client = -1};
    if (is_wd)
        o.rounds = 9; /* three lease timeouts at one round per timeout/3 */
    parse_options(argc - 1, argv + 1, &o);
    if (is_mem)
        without_tcache(argv);
    signal(SIGPIPE, SIG_IGN);
    static const struct {
        const char *name;
        int (*run)(const options *);
    } subs[] = {{"uncontended", bench_uncontended}, {"handoff", bench_handoff},
                {"contention", bench_contention},   {"herd", bench_herd},
                {"fenced", bench_fenced},
                {"watchdog", bench_watchdog},       {"memory", bench_memory},
                {"redlock", bench_redlock},
                {"fifo", bench_fifo},               {"fair-stall", bench_fair_stall},
                {"rw", bench_rw}};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strcmp(sub, subs[i].name) == 0)
            return subs[i].run(&o);
    fprintf(stderr, "unknown subcommand '%s'\n", sub);
    usage(stderr);
    return 2;
}
