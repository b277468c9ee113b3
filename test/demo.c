/*
 * demo.c - "don't oversell", the classic job of a cross-process mutex.
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
 * deadlock on itself, and must unlock as many times as it locked.
 *
 * Every process opens its OWN rlock_client after fork(): a client inherited
 * across fork() is unusable by contract. The processes share one anonymous
 * MAP_SHARED mapping for the figures: counters, a record of which item was
 * sold how often, and hand-off latencies. A hand-off is timed from the
 * releaser's CLOCK_MONOTONIC stamp taken right before its final unlock to the
 * moment the next owner returns from rlock_lock(); CLOCK_MONOTONIC is
 * system-wide, so stamps from different processes compare.
 *
 *   demo [--url URL] [-p PROCS] [-t THREADS] [-n STOCK]
 *
 * Exits 0 only if nothing was oversold and every count is exact.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rawredis.h"
#include "rlock.h"

#define LOCK_NAME "demo:stock"
#define STOCK_KEY "demo:stock:items"
#define SOLD_KEY "demo:stock:sold"
#define PROGRESS_MS 500

typedef struct options {
    const char *url;
    int procs;
    int threads;
    long stock;
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
    atomic_long proc_sold[256]; /* sales per process: who got the lock */
    long handoff_cap;
    _Atomic uint64_t *handoff_ns; /* handoff_cap latencies */
    atomic_int *item_sales;       /* [k] = sales of the item numbered k (1..N) */
} shared;

/* One buyer thread. */
typedef struct buyer {
    const options *opt;
    shared *sh;
    rlock *lock;
    int proc; /* index of this process */
} buyer;

/* ---- options -------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out,
            "usage: demo [--url URL] [-p PROCS] [-t THREADS] [-n STOCK]\n"
            "  Sells STOCK items from PROCS processes x THREADS threads, each sale under\n"
            "  the rlock \"" LOCK_NAME "\", and checks that none was oversold.\n"
            "  --url URL    Redis url (default $RLOCK_TEST_URL, else redis://127.0.0.1:6379)\n"
            "  -p PROCS     processes (default 4)\n"
            "  -t THREADS   threads per process (default 4)\n"
            "  -n STOCK     items in stock (default 2000)\n"
            "  --help       this text\n");
}

/* Parses a positive decimal no larger than max, or exits with usage. */
static long positive(const char *arg, long max) {
    char *end;
    long v = strtol(arg, &end, 10);
    if (*end != '\0' || v < 1 || v > max) {
        fprintf(stderr, "demo: bad number '%s' (1..%ld)\n", arg, max);
        usage(stderr);
        exit(2);
    }
    return v;
}

static void parse_options(int argc, char **argv, options *opt) {
    static const struct option longopts[] = {
        {"url", required_argument, NULL, 'u'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *env = getenv("RLOCK_TEST_URL");
    *opt = (options){env && *env ? env : "redis://127.0.0.1:6379", 4, 4, 2000};
    int ch;
    while ((ch = getopt_long(argc, argv, "p:t:n:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u': opt->url = optarg; break;
        case 'p': opt->procs = (int)positive(optarg, 256); break;
        case 't': opt->threads = (int)positive(optarg, 256); break;
        case 'n': opt->stock = positive(optarg, 100000000); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(2);
    }
}

/* ---- shared memory ---------------------------------------------------------- */

static void *map_shared(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("demo: mmap");
        exit(1);
    }
    return p; /* zero-filled */
}

static shared *make_shared(const options *opt) {
    shared *sh = map_shared(sizeof *sh);
    /* Each outer acquisition sells at most one item, and each buyer makes one
     * last acquisition to see the stock at 0: that bounds the hand-offs. */
    sh->handoff_cap = opt->stock + (long)opt->procs * opt->threads + 16;
    sh->handoff_ns = map_shared((size_t)sh->handoff_cap * sizeof *sh->handoff_ns);
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
 * go. Only acquisitions that really waited count: if the previous release
 * was stamped before we even called rlock_lock(), the lock was free (or was
 * being released) when we asked, and no hand-off to a waiter took place.
 */
static void record_handoff(shared *sh, uint64_t called_ns, uint64_t got_ns) {
    uint64_t released = atomic_load(&sh->released_ns);
    if (released <= called_ns || released > got_ns) /* the latter only if the lock is broken */
        return;
    long i = atomic_fetch_add(&sh->nhandoffs, 1);
    if (i < sh->handoff_cap)
        atomic_store(&sh->handoff_ns[i], got_ns - released);
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
    } else if (raw_ok(redis, "SET " STOCK_KEY " %lld", stock - 1) < 0 ||
               raw_ok(redis, "INCR " SOLD_KEY) < 0) {
        fail(sh, "SET stock", 0);
    } else {
        record_sale(b, stock);
        result = 0;
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
        record_handoff(sh, called, raw_now_ns());
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
    int status = rlock_client_open(&cfg, &client);
    if (status == RLOCK_OK)
        status = rlock_get(client, LOCK_NAME, &lock);
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
static int spawn(const options *opt, shared *sh, pid_t *pids) {
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

static void print_progress(shared *sh, redisContext *redis, double *last_ops, uint64_t *last_ns) {
    uint64_t now = raw_now_ns();
    long long remaining = -1;
    if (redis != NULL)
        raw_int(redis, &remaining, "GET " STOCK_KEY);
    double ops = (double)atomic_load(&sh->acquisitions);
    double rate = (ops - *last_ops) / ((double)(now - *last_ns) / 1e9);
    fprintf(stderr, "[%5.1f s] sold %6ld  remaining %6lld  lock ops/s %8.0f\n",
            (double)(now - atomic_load(&sh->start_ns)) / 1e9, atomic_load(&sh->sold), remaining,
            rate);
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
            print_progress(sh, redis, &last_ops, &last_ns);
            next += PROGRESS_MS * 1000000ull;
        }
    }
    redisFree(redis);
    return failed;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Percentile p (0..100) of sorted v[n], in ms; 0 when there are no samples. */
static double pct_ms(const uint64_t *v, long n, double p) {
    if (n == 0)
        return 0;
    long i = (long)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)v[i] / 1e6;
}

typedef struct verdict {
    long long stock_left, redis_sold;
    long twice, unsold; /* items sold more than once, items never sold */
} verdict;

static int read_verdict(const options *opt, shared *sh, verdict *v) {
    redisContext *redis = raw_connect(opt->url);
    if (redis == NULL || raw_int(redis, &v->stock_left, "GET " STOCK_KEY) < 0 ||
        raw_int(redis, &v->redis_sold, "GET " SOLD_KEY) < 0) {
        redisFree(redis);
        return -1;
    }
    redisFree(redis);
    v->twice = v->unsold = 0;
    for (long k = 1; k <= opt->stock; k++) {
        int sales = atomic_load(&sh->item_sales[k]);
        v->twice += sales > 1;
        v->unsold += sales == 0;
    }
    return 0;
}

/* Hand-off p50 and p99 in ms; returns how many hand-offs were timed. */
static long handoff_percentiles(shared *sh, double *p50, double *p99) {
    long n = atomic_load(&sh->nhandoffs);
    n = n < sh->handoff_cap ? n : sh->handoff_cap;
    uint64_t *lat = malloc((size_t)(n ? n : 1) * sizeof *lat);
    *p50 = *p99 = 0;
    if (lat == NULL)
        return 0;
    for (long i = 0; i < n; i++)
        lat[i] = atomic_load(&sh->handoff_ns[i]);
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
    *p50 = pct_ms(lat, n, 50);
    *p99 = pct_ms(lat, n, 99);
    free(lat);
    return n;
}

static void print_summary(const options *opt, shared *sh, const verdict *v) {
    long sold = atomic_load(&sh->sold), acq = atomic_load(&sh->acquisitions);
    double secs = (double)(atomic_load(&sh->end_ns) - atomic_load(&sh->start_ns)) / 1e9;
    double p50, p99;
    long n = handoff_percentiles(sh, &p50, &p99);
    printf("demo: %d processes x %d threads sold a stock of %ld under rlock \"%s\"\n", opt->procs,
           opt->threads, opt->stock, LOCK_NAME);
    printf("  sold            %ld (Redis sold counter %lld)\n", sold, v->redis_sold);
    printf("  oversold        %ld\n", sold - opt->stock);
    printf("  stock left      %lld (lowest seen under the lock: %ld)\n", v->stock_left,
           atomic_load(&sh->min_seen));
    printf("  items sold twice %ld, never sold %ld\n", v->twice, v->unsold);
    printf("  sold per process");
    for (int p = 0; p < opt->procs; p++)
        printf(" %ld", atomic_load(&sh->proc_sold[p]));
    printf("\n");
    printf("  lock ops        %ld acquisitions in %.2f s = %.0f/s (each with one reentrant hold)\n",
           acq, secs, secs > 0 ? (double)acq / secs : 0);
    printf("  hand-off        p50 %.3f ms  p99 %.3f ms  (%ld hand-offs to a waiting thread)\n", p50,
           p99, n);
}

/* Prints the summary; returns the exit status. */
static int summarize(const options *opt, shared *sh, int failed_children) {
    verdict v;
    if (read_verdict(opt, sh, &v) < 0) {
        fprintf(stderr, "demo: cannot read the final stock\n");
        return 1;
    }
    print_summary(opt, sh, &v);
    long sold = atomic_load(&sh->sold), acq = atomic_load(&sh->acquisitions);
    long expected_acq = opt->stock + (long)opt->procs * opt->threads; /* + one last look each */
    int exact = sold == opt->stock && v.redis_sold == opt->stock && v.stock_left == 0 &&
                atomic_load(&sh->min_seen) >= 0 && v.twice == 0 && v.unsold == 0 &&
                acq == expected_acq;
    int ok = exact && atomic_load(&sh->errors) == 0 && failed_children == 0;
    if (!exact)
        printf("  counts are NOT exact (expected %ld acquisitions = stock + one last look per thread)\n",
               expected_acq);
    printf("%s\n", ok ? "OK: nothing oversold, every count exact" : "FAILED");
    return ok ? 0 : 1;
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
