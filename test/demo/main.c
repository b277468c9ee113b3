/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c - the demo's options and parent process. The demo: "don't oversell",
 * the classic job of a cross-process mutex.
 *
 * A shop has N items in stock, kept in the Redis string demo:stock:items.
 * P processes with T threads each sell them as fast as they can: take the
 * lock "demo:stock", read the stock with a plain GET, and if it is positive
 * SET it one lower and record the sale. GET-then-SET is a lost-update race on
 * purpose: only the lock keeps two buyers from selling the same item, so with
 * a broken lock the shop sells more than it has.
 *
 * Each buyer takes the lock twice (once in the loop, once more in the buy
 * path) to show reentrancy: a thread that already holds the lock does not
 * deadlock on itself, and must unlock as many times as it locked. A sale
 * takes WORK_US microseconds while the lock is held (the payment call a real
 * shop would make between reading and writing the stock), so the default run
 * lasts about ten seconds, long enough to watch the processes take turns.
 *
 * Every process opens its OWN rlock_client after fork(): a client inherited
 * across fork() is unusable by contract. The processes share one anonymous
 * MAP_SHARED mapping for the figures: counters, a record of which item was
 * sold how often, and hand-off latencies. A hand-off is timed from the
 * releaser's CLOCK_MONOTONIC stamp taken right before its final unlock to the
 * moment the next owner returns from rlock_lock(); CLOCK_MONOTONIC is
 * system-wide, so stamps from different processes compare.
 *
 *   demo [--url URL] [-p PROCS] [-t THREADS] [-n STOCK] [-w WORK_US]
 *        [--local-handoffs N] [--fair]
 *
 * Exits 0 only if nothing was oversold and every count is exact.
 *
 * This file: the options and the parent (fresh keys, the sellers started,
 * progress while they sell); seller.c: the selling processes and their
 * buyers; verdict.c: the final counts and the summary.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "demo.h"

#define PROGRESS_MS 1000

/* ---- options -------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out,
            "usage: demo [--url URL] [-p PROCS] [-t THREADS] [-n STOCK] [-w WORK_US]\n"
            "            [--local-handoffs N] [--fair]\n"
            "  Sells STOCK items from PROCS processes x THREADS threads, each sale under\n"
            "  the rlock \"" LOCK_NAME "\", and checks that none was oversold.\n"
            "  --url URL    Redis url (default $RLOCK_TEST_URL, else redis://127.0.0.1:6379)\n"
            "  -p PROCS     processes (default 4)\n"
            "  -t THREADS   threads per process (default 4)\n"
            "  -n STOCK     items in stock (default 10000)\n"
            "  -w WORK_US   microseconds a sale takes with the lock held (default 1000; 0: none)\n"
            "  --local-handoffs N\n"
            "               rlock_config.local_handoffs: unlocks in a row that may hand the\n"
            "               lock to a waiting thread of the same process (default: the\n"
            "               library's, 4; 0: every unlock releases to all, as Redisson)\n"
            "  --fair       use a fair lock (rlock_get_fair): buyers of every process are\n"
            "               served in the order they asked\n"
            "  --help       this text\n");
}

/* Parses a decimal in min..max, or exits with usage. */
static long number(const char *arg, long min, long max) {
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "demo: bad number '%s' (%ld..%ld)\n", arg, min, max);
        usage(stderr);
        exit(2);
    }
    return v;
}

static void parse_options(int argc, char **argv, options *opt) {
    static const struct option longopts[] = {{"url", required_argument, NULL, 'u'},
                                             {"local-handoffs", required_argument, NULL, 'l'},
                                             {"fair", no_argument, NULL, 'f'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *env = getenv("RLOCK_TEST_URL");
    *opt = (options){env && *env ? env : "redis://127.0.0.1:6379", 4, 4, 10000, 1000, -1, 0};
    int ch;
    while ((ch = getopt_long(argc, argv, "p:t:n:w:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u': opt->url = optarg; break;
        case 'p': opt->procs = (int)number(optarg, 1, 256); break;
        case 't': opt->threads = (int)number(optarg, 1, 256); break;
        case 'n': opt->stock = number(optarg, 1, 100000000); break;
        case 'w': opt->work_us = number(optarg, 0, 1000000); break;
        case 'l': opt->local_handoffs = (int)number(optarg, 0, 1000); break;
        case 'f': opt->fair = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(2);
    }
}

/* ---- the parent: setup, progress, verdict ----------------------------------------- */

/* Fresh keys: stock N, no sales, and no lock left over by an earlier crash. */
static int reset_keys(const options *opt) {
    redisContext *redis = raw_connect(opt->url);
    if (redis == NULL)
        return -1;
    int bad = raw_ok(redis, "DEL " LOCK_NAME " " SOLD_KEY) ||
              raw_ok(redis, "SET " STOCK_KEY " %ld", opt->stock);
    redisFree(redis);
    return bad ? -1 : 0;
}

/* Waits up to 30 s for every child to open its client. */
static int wait_ready(shared *sh, int procs) {
    for (int i = 0; i < 30000 && atomic_load(&sh->ready) < procs; i++)
        raw_sleep_ms(1);
    return atomic_load(&sh->ready) == procs ? 0 : -1;
}

/* One line a second: overall progress, then each process's sales so far. */
static void print_progress(const options *opt, shared *sh, redisContext *redis, double *last_ops,
                           uint64_t *last_ns) {
    uint64_t now = raw_now_ns();
    long long remaining = -1;
    if (redis != NULL)
        raw_int(redis, &remaining, "GET " STOCK_KEY);
    double ops = (double)atomic_load(&sh->acquisitions);
    double rate = (ops - *last_ops) / ((double)(now - *last_ns) / 1e9);
    fprintf(stderr, "[%5.1f s] sold %6ld  left %6lld  lock ops/s %6.0f  per process:",
            (double)(now - atomic_load(&sh->start_ns)) / 1e9, atomic_load(&sh->sold), remaining,
            rate);
    for (int p = 0; p < opt->procs; p++)
        fprintf(stderr, " %ld", atomic_load(&sh->proc_sold[p]));
    fprintf(stderr, "\n");
    *last_ops = ops;
    *last_ns = now;
}

/* Reaps the children, printing progress meanwhile; returns how many failed. */
static int watch_children(shared *sh, const options *opt, pid_t *pids, int n) {
    redisContext *redis = raw_connect(opt->url); /* only for the progress lines */
    double last_ops = 0;
    uint64_t last_ns = atomic_load(&sh->start_ns), next = last_ns + PROGRESS_MS * 1000000ull;
    int alive = n, failed = 0;
    while (alive > 0) {
        raw_sleep_ms(20);
        for (int i = 0; i < n; i++) {
            int wstatus;
            if (pids[i] > 0 && waitpid(pids[i], &wstatus, WNOHANG) == pids[i]) {
                failed += !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
                pids[i] = 0;
                alive--;
            }
        }
        if (raw_now_ns() >= next) {
            print_progress(opt, sh, redis, &last_ops, &last_ns);
            next += PROGRESS_MS * 1000000ull;
        }
    }
    redisFree(redis);
    return failed;
}

int main(int argc, char **argv) {
    options opt;
    parse_options(argc, argv, &opt);
    signal(SIGPIPE, SIG_IGN); /* a dropped connection must be an error, not a kill */
    if (reset_keys(&opt) < 0)
        return 1;
    shared *sh = make_shared(&opt);
    pid_t pids[256];
    int n = spawn(&opt, sh, pids);
    int failed = opt.procs - n;
    if (wait_ready(sh, n) < 0)
        fprintf(stderr, "demo: not every process opened its client\n");
    atomic_store(&sh->start_ns, raw_now_ns());
    atomic_store(&sh->end_ns, atomic_load(&sh->start_ns));
    atomic_store(&sh->go, 1);
    failed += watch_children(sh, &opt, pids, n);
    return summarize(&opt, sh, failed);
}
