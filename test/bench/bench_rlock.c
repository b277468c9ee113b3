/*
 * bench_rlock.c - librlock's benchmarks, one subcommand per row of the
 * `make bench` table (test/bench/run.sh runs them in order):
 *
 *   uncontended  lock+unlock cycles/s and latency, threads on distinct locks
 *   handoff      unlock-call-to-waiter-return latency, waiter in another
 *                process or in the same process
 *   contention   P processes x T threads on one lock, GET+SET in the
 *                critical section: throughput, fairness, Redis cost
 *   herd         W waiting threads of one process: script calls per hand-off
 *   watchdog     N held watchdog locks: renewal cost and correctness
 *   memory       client heap and Redis memory per handle, held lock, waiter
 *
 * Each prints progress on stderr and one JSON line on stdout. Nothing here
 * asserts speed: a subcommand fails (exit 1) only when the library returned
 * an error or a correctness check (exact counter, locks still held) failed.
 *
 * Raw hiredis connections (rawredis.h) read INFO and do the critical-section
 * work, so that no measurement goes through the code it measures.
 */
#include <ctype.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
    int local_handoffs;  /* rlock_config.local_handoffs; -1 = the library's default */
    const char *samples; /* file for the latency distribution, or NULL */
} options;

/* ---- common ---------------------------------------------------------------- */

static atomic_long lost_locks; /* on_lock_lost calls */

static void count_lost(const char *name, void *arg) {
    (void)name;
    (void)arg;
    atomic_fetch_add(&lost_locks, 1);
}

/* Opens a client or exits; watchdog_ms 0 keeps the default. */
static rlock_client *open_client(const options *o, long long watchdog_ms, int pool) {
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
    int status = rlock_client_open(&cfg, &c);
    if (status != RLOCK_OK) {
        fprintf(stderr, "rlock_client_open(%s): %s\n", o->url, rlock_strerror(status));
        exit(1);
    }
    return c;
}

/* Prints a failed rlock call; returns -1 for it, 0 for RLOCK_OK. */
static int check(int status, const char *what) {
    if (status == RLOCK_OK)
        return 0;
    fprintf(stderr, "[%d] %s: %s (%s)\n", (int)getpid(), what, rlock_status_name(status),
            rlock_strerror(status));
    return -1;
}

static rlock *get_lock(rlock_client *c, const char *fmt, long a, long b) {
    char name[128];
    rlock *lock = NULL;
    snprintf(name, sizeof name, fmt, a, b);
    if (check(rlock_get(c, name, &lock), "rlock_get") < 0)
        exit(1);
    return lock;
}

static int take(rlock *lock, long long lease) {
    return lease > 0 ? rlock_lock_lease(lock, lease) : rlock_lock(lock);
}

static redisContext *raw_or_exit(const char *url) {
    redisContext *c = raw_connect(url);
    if (c == NULL)
        exit(1);
    return c;
}

/* Waits until *v >= want (polling every 0.2 ms) or *abort is set. */
static void wait_at_least(atomic_long *v, long want, atomic_long *abort_flag) {
    while (atomic_load(v) < want && atomic_load(abort_flag) == 0)
        raw_sleep_ms(0.2);
}

static void put_latency(jsonw *j, const samples *s) {
    j_num(j, "p50_ms", samples_pct_ms(s, 50));
    j_num(j, "p90_ms", samples_pct_ms(s, 90));
    j_num(j, "p99_ms", samples_pct_ms(s, 99));
    j_num(j, "p999_ms", samples_pct_ms(s, 99.9));
    j_num(j, "max_ms", samples_pct_ms(s, 100));
}

/* ---- uncontended -------------------------------------------------------------- */

typedef struct unc_ctx {
    rlock_client *client;
    long long lease;
} unc_ctx;

typedef struct unc_thread {
    rlock *lock;
    long long lease;
} unc_thread;

static void *unc_init(void *arg, int index) {
    unc_ctx *ctx = arg;
    unc_thread *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->lock = get_lock(ctx->client, "bench:unc:%ld:%ld", (long)getpid(), index);
    t->lease = ctx->lease;
    return t;
}

static int unc_cycle(void *state) {
    unc_thread *t = state;
    if (check(take(t->lock, t->lease), "rlock_lock") < 0)
        return -1;
    return check(rlock_unlock(t->lock), "rlock_unlock");
}

static void unc_fini(void *state) {
    unc_thread *t = state;
    rlock_free(t->lock);
    free(t);
}

static int bench_uncontended(const options *o) {
    unc_ctx ctx = {open_client(o, 0, o->threads), o->lease};
    fprintf(stderr, "uncontended: %d thread(s) on distinct locks, %d rounds of %.1f s\n",
            o->threads, o->rounds, o->secs);
    cycle_ops ops = {unc_init, unc_cycle, unc_fini, &ctx};
    cycle_result res;
    redisContext *redis = raw_or_exit(o->url);
    rstats s0, s1;
    rstats_take(redis, "commandstats", &s0);
    double cpu0 = cpu_seconds(RUSAGE_SELF);
    int rc = run_cycles(&ops, o->threads, o->secs, o->rounds, &res);
    double cpu = cpu_seconds(RUSAGE_SELF) - cpu0; /* all our threads, the library's too */
    rstats_take(redis, "commandstats", &s1);
    redisFree(redis);
    rlock_client_close(ctx.client);
    jsonw j;
    j_begin(&j, "uncontended");
    j_int(&j, "threads", o->threads);
    j_int(&j, "lease_ms", o->lease);
    j_num(&j, "ops_per_s", res.ops_per_s);
    j_num(&j, "p50_ms", res.p50_ms);
    j_num(&j, "p99_ms", res.p99_ms);
    j_num(&j, "p999_ms", res.p999_ms);
    j_int(&j, "cycles", res.cycles);
    j_num(&j, "client_cpu_us_per_cycle", cpu * 1e6 / (double)res.all_cycles);
    j_num(&j, "scripts_per_cycle", (double)(rstats_scripts(&s1) - rstats_scripts(&s0)) / (double)res.all_cycles);
    j_int(&j, "rounds", o->rounds);
    j_num(&j, "round_s", o->secs);
    j_int(&j, "errors", res.errors);
    j_end(&j);
    return rc < 0 ? 1 : 0;
}

/* ---- handoff -------------------------------------------------------------------- */

/*
 * Two parties pass the lock back and forth. For hand-off i, party i % 2 is
 * the waiter: it announces itself and calls rlock_lock(); the other party,
 * which holds the lock, waits for the announcement plus settle_us (so that
 * the waiter is asleep in the library, not still on its first attempt),
 * stamps CLOCK_MONOTONIC and unlocks. The waiter's latency is its return
 * time minus the stamp. The releaser then waits for the waiter to report
 * the lock before it turns waiter itself. Shared memory works for both the
 * thread and the process variant.
 */
typedef struct handoff_shm {
    atomic_long ready, go, errors;
    atomic_long waiting;           /* i + 1 once the waiter of hand-off i is about to lock */
    atomic_long got;               /* i + 1 once it has the lock */
    _Atomic uint64_t released_ns;
    long n;
    int settle_us;
    uint64_t lat[];                /* n latencies; each written by one waiter */
} handoff_shm;

typedef struct handoff_party {
    handoff_shm *sh;
    rlock *lock;
    int me;
} handoff_party;

static void handoff_wait(handoff_party *p, long i) {
    handoff_shm *sh = p->sh;
    atomic_store(&sh->waiting, i + 1);
    if (check(rlock_lock(p->lock), "rlock_lock (waiter)") < 0) {
        atomic_fetch_add(&sh->errors, 1);
        return;
    }
    sh->lat[i] = raw_now_ns() - atomic_load(&sh->released_ns);
    atomic_store(&sh->got, i + 1);
}

static void handoff_release(handoff_party *p, long i) {
    handoff_shm *sh = p->sh;
    while (atomic_load(&sh->waiting) != i + 1 && atomic_load(&sh->errors) == 0)
        raw_sleep_ms(0.02);
    raw_sleep_ms(sh->settle_us / 1000.0);
    atomic_store(&sh->released_ns, raw_now_ns());
    if (check(rlock_unlock(p->lock), "rlock_unlock (holder)") < 0)
        atomic_fetch_add(&sh->errors, 1);
    /* The lock is not fair: locking again at once would often beat the
     * woken waiter to it. Let it arrive first, polling slowly: on a small
     * machine a busy poller would steal the CPU the hand-off needs. */
    while (atomic_load(&sh->got) != i + 1 && atomic_load(&sh->errors) == 0)
        raw_sleep_ms(0.5);
}

static void *handoff_main(void *arg) {
    handoff_party *p = arg;
    handoff_shm *sh = p->sh;
    if (p->me == 1 && check(rlock_lock(p->lock), "rlock_lock (first holder)") < 0)
        atomic_fetch_add(&sh->errors, 1);
    atomic_fetch_add(&sh->ready, 1);
    wait_at_least(&sh->go, 1, &sh->errors);
    for (long i = 0; i < sh->n && atomic_load(&sh->errors) == 0; i++) {
        if (i % 2 == p->me)
            handoff_wait(p, i);
        else
            handoff_release(p, i);
    }
    if ((sh->n - 1) % 2 == p->me && atomic_load(&sh->errors) == 0)
        check(rlock_unlock(p->lock), "rlock_unlock (last holder)");
    return NULL;
}

static void handoff_run(const options *o, handoff_shm *sh) {
    char name[64];
    snprintf(name, sizeof name, "bench:handoff:%d", (int)getpid());
    pid_t child = -1;
    pthread_t tid;
    handoff_party peer = {sh, NULL, 1};
    rlock_client *c;
    if (!o->same_process) {
        child = fork_child();
        if (child == 0) { /* party 1, with a client of its own */
            rlock_client *cc = open_client(o, 0, 0);
            handoff_party p = {sh, NULL, 1};
            if (check(rlock_get(cc, name, &p.lock), "rlock_get") < 0)
                _exit(1);
            handoff_main(&p);
            rlock_free(p.lock);
            rlock_client_close(cc);
            _exit(atomic_load(&sh->errors) ? 1 : 0);
        }
    }
    c = open_client(o, 0, 0);
    handoff_party self = {sh, NULL, 0};
    if (check(rlock_get(c, name, &self.lock), "rlock_get") < 0)
        exit(1);
    if (o->same_process) {
        peer.lock = self.lock; /* one handle, shared by both threads */
        pthread_create(&tid, NULL, handoff_main, &peer);
    }
    pthread_t me;
    pthread_create(&me, NULL, handoff_main, &self);
    wait_at_least(&sh->ready, 2, &sh->errors);
    atomic_store(&sh->go, 1);
    pthread_join(me, NULL);
    if (o->same_process)
        pthread_join(tid, NULL);
    else if (child > 0) {
        int ws;
        waitpid(child, &ws, 0);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            atomic_fetch_add(&sh->errors, 1);
    }
    rlock_free(self.lock);
    rlock_client_close(c);
}

static int bench_handoff(const options *o) {
    handoff_shm *sh = shared_alloc(sizeof *sh + (size_t)o->count * sizeof(uint64_t));
    sh->n = o->count;
    sh->settle_us = o->settle_us;
    const char *where = o->same_process ? "thread" : "process";
    fprintf(stderr, "handoff: %ld hand-offs to a waiter in another %s (settle %d us)\n", o->count,
            where, o->settle_us);
    uint64_t t0 = raw_now_ns();
    handoff_run(o, sh);
    double secs = (double)(raw_now_ns() - t0) / 1e9;
    samples s = {0};
    for (long i = 0; i < sh->n; i++)
        samples_add(&s, sh->lat[i]);
    samples_sort(&s);
    samples_write_cdf(&s, o->samples);
    jsonw j;
    j_begin(&j, "handoff");
    j_str(&j, "waiter", where);
    j_int(&j, "handoffs", (long long)s.n);
    j_int(&j, "settle_us", o->settle_us);
    put_latency(&j, &s);
    j_num(&j, "run_s", secs);
    j_int(&j, "errors", atomic_load(&sh->errors));
    j_end(&j);
    samples_free(&s);
    return atomic_load(&sh->errors) ? 1 : 0;
}

/* ---- contention ------------------------------------------------------------------ */

enum { PHASE_WAIT, PHASE_RUN, PHASE_STOP };

#define CONT_COUNTER "bench:contention:counter"
#define CONT_LOCK "bench:contention:lock"

typedef struct cont_shm {
    atomic_long ready, phase, errors;
    atomic_long last_owner;    /* worker index of the last holder, -1 at first */
    atomic_long owner_changes;
    atomic_long acq[];         /* per worker */
} cont_shm;

typedef struct cont_worker {
    const options *o;
    cont_shm *sh;
    rlock *lock;
    long index;
} cont_worker;

/* The critical section: a read-modify-write that only the lock makes safe. */
static int cont_critical(cont_worker *w, redisContext *redis) {
    long long v;
    if (raw_int(redis, &v, "GET " CONT_COUNTER) < 0 || raw_ok(redis, "SET " CONT_COUNTER " %lld", v + 1) < 0)
        return -1;
    if (atomic_exchange(&w->sh->last_owner, w->index) != w->index)
        atomic_fetch_add(&w->sh->owner_changes, 1);
    atomic_fetch_add(&w->sh->acq[w->index], 1);
    return 0;
}

static void *cont_worker_main(void *arg) {
    cont_worker *w = arg;
    cont_shm *sh = w->sh;
    redisContext *redis = raw_connect(w->o->url);
    atomic_fetch_add(&sh->ready, 1);
    if (redis == NULL) {
        atomic_fetch_add(&sh->errors, 1);
        return NULL;
    }
    while (atomic_load(&sh->phase) == PHASE_WAIT)
        raw_sleep_ms(1);
    while (atomic_load(&sh->phase) == PHASE_RUN) {
        if (check(rlock_lock(w->lock), "rlock_lock") < 0) {
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        int bad = cont_critical(w, redis);
        if (check(rlock_unlock(w->lock), "rlock_unlock") < 0 || bad) {
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
    }
    redisFree(redis);
    return NULL;
}

static void cont_child(const options *o, cont_shm *sh, int proc) {
    rlock_client *c = open_client(o, 0, o->threads);
    rlock *lock = NULL; /* one handle shared by the process's threads */
    if (check(rlock_get(c, CONT_LOCK, &lock), "rlock_get") < 0)
        _exit(1);
    cont_worker w[256];
    pthread_t tid[256];
    for (int t = 0; t < o->threads; t++) {
        w[t] = (cont_worker){o, sh, lock, (long)proc * o->threads + t};
        pthread_create(&tid[t], NULL, cont_worker_main, &w[t]);
    }
    for (int t = 0; t < o->threads; t++)
        pthread_join(tid[t], NULL);
    rlock_free(lock);
    rlock_client_close(c);
    _exit(atomic_load(&sh->errors) ? 1 : 0);
}

/*
 * Counts the commands Redis runs during a MONITOR window, split into the
 * ones clients sent (round trips, at most) and the ones scripts ran. The
 * critical section's GET/SET and our own INFO/ECHO are left out.
 */
typedef struct monitor_tally {
    redisContext *c;
    long long client_cmds, script_cmds;
    int nnames;
    char names[32][32];
    long long counts[32];
} monitor_tally;

static void tally_client_cmd(monitor_tally *m, const char *name) {
    m->client_cmds++;
    for (int i = 0; i < m->nnames; i++)
        if (strcmp(m->names[i], name) == 0) {
            m->counts[i]++;
            return;
        }
    if (m->nnames < 32) {
        snprintf(m->names[m->nnames], sizeof m->names[0], "%s", name);
        m->counts[m->nnames++] = 1;
    }
}

/* One MONITOR line: 'TIME [DB ADDR] "cmd" "arg"...'. Returns 1 at our stop marker. */
static int tally_line(monitor_tally *m, const char *line) {
    const char *addr = strchr(line, '[');
    const char *cmd = strstr(line, "] \"");
    char name[32];
    if (addr == NULL || cmd == NULL || sscanf(cmd + 3, "%31[^\"]", name) != 1)
        return 0;
    for (char *p = name; *p; p++) /* MONITOR shows the command as the client spelled it */
        *p = (char)tolower((unsigned char)*p);
    if (strcmp(name, "echo") == 0 && strstr(cmd, "bench-monitor-stop"))
        return 1;
    if (strstr(addr, " lua]") != NULL && strstr(addr, " lua]") < cmd) {
        m->script_cmds++;
        return 0;
    }
    int ours = strcmp(name, "info") == 0 || strcmp(name, "echo") == 0 ||
               ((strcmp(name, "get") == 0 || strcmp(name, "set") == 0) && strstr(cmd, CONT_COUNTER));
    if (!ours)
        tally_client_cmd(m, name);
    return 0;
}

static void *monitor_main(void *arg) {
    monitor_tally *m = arg;
    void *raw;
    while (redisGetReply(m->c, &raw) == REDIS_OK) {
        redisReply *r = raw;
        int stop = r->type == REDIS_REPLY_STATUS && tally_line(m, r->str);
        freeReplyObject(r);
        if (stop)
            break;
    }
    return NULL;
}

static long sum_acq(cont_shm *sh, int n) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += atomic_load(&sh->acq[i]);
    return s;
}

/* Runs the MONITOR window on running workers; stores acquisitions seen in it. */
static void cont_monitor(const options *o, cont_shm *sh, int n, monitor_tally *m, long *acq) {
    memset(m, 0, sizeof *m);
    m->c = raw_or_exit(o->url);
    redisReply *r = redisCommand(m->c, "MONITOR");
    if (r)
        freeReplyObject(r);
    struct timeval tv = {10, 0}; /* never hang on a lost stop marker */
    redisSetTimeout(m->c, tv);
    long a0 = sum_acq(sh, n);
    pthread_t tid;
    pthread_create(&tid, NULL, monitor_main, m);
    raw_sleep_ms(o->monitor_secs * 1000);
    *acq = sum_acq(sh, n) - a0;
    redisContext *ctl = raw_or_exit(o->url);
    raw_ok(ctl, "ECHO bench-monitor-stop");
    redisFree(ctl);
    pthread_join(tid, NULL);
    redisFree(m->c);
}

static void put_monitor(jsonw *j, const monitor_tally *m, long acq) {
    char breakdown[1024];
    size_t len = 0;
    breakdown[0] = '\0';
    for (int i = 0; i < m->nnames && len < sizeof breakdown - 64; i++)
        len += (size_t)snprintf(breakdown + len, sizeof breakdown - len, "%s%s=%.3f", i ? " " : "",
                                m->names[i], acq ? (double)m->counts[i] / (double)acq : 0);
    j_int(j, "monitor_acquisitions", acq);
    j_num(j, "client_cmds_per_acq", acq ? (double)m->client_cmds / (double)acq : NAN);
    j_num(j, "script_inner_cmds_per_acq", acq ? (double)m->script_cmds / (double)acq : NAN);
    j_str(j, "client_cmds_breakdown", breakdown);
}

static int bench_contention(const options *o) {
    int n = o->procs * o->threads;
    cont_shm *sh = shared_alloc(sizeof *sh + (size_t)n * sizeof(atomic_long));
    atomic_store(&sh->last_owner, -1);
    redisContext *redis = raw_or_exit(o->url);
    raw_ok(redis, "DEL " CONT_COUNTER " " CONT_LOCK);
    fprintf(stderr, "contention: %d processes x %d threads on one lock, %.0f s (+%.0f s monitored)\n",
            o->procs, o->threads, o->secs, o->monitor_secs);
    pid_t pids[256];
    for (int p = 0; p < o->procs; p++)
        if ((pids[p] = fork_child()) == 0)
            cont_child(o, sh, p);
    wait_at_least(&sh->ready, n, &sh->errors);

    rstats s0, s1;
    rstats_take(redis, "cpu commandstats", &s0);
    uint64_t t0 = raw_now_ns();
    atomic_store(&sh->phase, PHASE_RUN);
    for (int sec = 1; sec <= (int)o->secs; sec++) {
        raw_sleep_ms(1000);
        fprintf(stderr, "  %2d s: %ld acquisitions\n", sec, sum_acq(sh, n));
    }
    raw_sleep_ms((o->secs - (int)o->secs) * 1000);
    rstats_take(redis, "cpu commandstats", &s1);
    double secs = (double)(raw_now_ns() - t0) / 1e9;
    long acq = 0, amin = -1, amax = 0, changes = atomic_load(&sh->owner_changes);
    FILE *per_thread = o->samples ? fopen(o->samples, "w") : NULL;
    for (int i = 0; i < n; i++) {
        long a = atomic_load(&sh->acq[i]);
        acq += a;
        amin = amin < 0 || a < amin ? a : amin;
        amax = a > amax ? a : amax;
        if (per_thread)
            fprintf(per_thread, "%d %d %ld\n", i / o->threads, i, a);
    }
    if (per_thread)
        fclose(per_thread);

    monitor_tally m;
    long macq = 0;
    if (o->monitor_secs > 0)
        cont_monitor(o, sh, n, &m, &macq);
    atomic_store(&sh->phase, PHASE_STOP);
    int failed = 0;
    for (int p = 0; p < o->procs; p++) {
        int ws;
        waitpid(pids[p], &ws, 0);
        failed += !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
    }
    long long counter = -1;
    raw_int(redis, &counter, "GET " CONT_COUNTER);
    long total = sum_acq(sh, n);
    /* The window's commands less the critical sections' GET+SET and our INFO. */
    long long lock_cmds = s1.cmds_total - s0.cmds_total - 2LL * acq - rstats_delta(&s0, &s1, "info");

    jsonw j;
    j_begin(&j, "contention");
    j_int(&j, "procs", o->procs);
    j_int(&j, "threads", o->threads);
    j_num(&j, "run_s", secs);
    j_int(&j, "acquisitions", acq);
    j_num(&j, "acq_per_s", (double)acq / secs);
    j_num(&j, "owner_changes_per_s", (double)changes / secs);
    j_int(&j, "min_per_thread", amin);
    j_int(&j, "max_per_thread", amax);
    j_num(&j, "redis_cmds_per_acq", acq ? (double)lock_cmds / (double)acq : NAN);
    j_num(&j, "script_calls_per_acq", acq ? (double)(rstats_scripts(&s1) - rstats_scripts(&s0)) / (double)acq : NAN);
    j_num(&j, "redis_cpu_ms_per_1000_acq", acq ? (s1.cpu - s0.cpu) * 1e6 / (double)acq : NAN);
    if (o->monitor_secs > 0)
        put_monitor(&j, &m, macq);
    j_int(&j, "counter", counter);
    j_int(&j, "total_acquisitions", total);
    j_int(&j, "counter_exact", counter == total);
    j_int(&j, "errors", atomic_load(&sh->errors) + failed);
    j_end(&j);
    redisFree(redis);
    return counter == total && failed == 0 && atomic_load(&sh->errors) == 0 ? 0 : 1;
}

/* ---- herd ---------------------------------------------------------------------------- */

/*
 * W threads block on a lock the main thread holds. Once they are all asleep
 * (no script call for 200 ms), the main thread unlocks and the lock travels
 * through all W of them, each unlocking right after it gets it. The script
 * calls Redis saw from the main thread's unlock to the W-th acquisition,
 * divided by W, is the cost of one hand-off: 2 (one release, one successful
 * acquire) when only one waiter wakes per release, growing with W when
 * every waiter wakes and retries (the thundering herd).
 */
typedef struct herd {
    rlock *lock;
    int w;
    pthread_barrier_t start, end;
    atomic_long arrived, acquired, quit, errors;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int last_may_release; /* the W-th owner waits for this: the window closes first */
} herd;

static void *herd_main(void *arg) {
    herd *h = arg;
    for (;;) {
        pthread_barrier_wait(&h->start);
        if (atomic_load(&h->quit))
            return NULL;
        atomic_fetch_add(&h->arrived, 1);
        if (check(rlock_lock(h->lock), "rlock_lock") < 0) {
            atomic_fetch_add(&h->errors, 1);
            atomic_fetch_add(&h->acquired, 1);
        } else {
            if (atomic_fetch_add(&h->acquired, 1) + 1 == h->w) {
                pthread_mutex_lock(&h->mutex);
                while (!h->last_may_release)
                    pthread_cond_wait(&h->cond, &h->mutex);
                pthread_mutex_unlock(&h->mutex);
            }
            if (check(rlock_unlock(h->lock), "rlock_unlock") < 0)
                atomic_fetch_add(&h->errors, 1);
        }
        pthread_barrier_wait(&h->end);
    }
}

/* One round; returns script calls per hand-off and stores the mean hand-off time. */
static double herd_round(herd *h, redisContext *redis, double *handoff_ms) {
    atomic_store(&h->arrived, 0);
    atomic_store(&h->acquired, 0);
    h->last_may_release = 0;
    if (check(rlock_lock(h->lock), "rlock_lock (main)") < 0)
        exit(1);
    pthread_barrier_wait(&h->start);
    wait_at_least(&h->arrived, h->w, &h->errors);
    if (wait_scripts_quiet(redis, 200, 20000) < 0)
        fprintf(stderr, "  waiters did not settle in 20 s\n");
    rstats s0, s1;
    rstats_take(redis, "commandstats", &s0);
    uint64_t t0 = raw_now_ns();
    if (check(rlock_unlock(h->lock), "rlock_unlock (main)") < 0)
        exit(1);
    wait_at_least(&h->acquired, h->w, &h->errors);
    *handoff_ms = (double)(raw_now_ns() - t0) / 1e6 / h->w;
    rstats_take(redis, "commandstats", &s1);
    pthread_mutex_lock(&h->mutex);
    h->last_may_release = 1;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mutex);
    pthread_barrier_wait(&h->end);
    return (double)(rstats_scripts(&s1) - rstats_scripts(&s0)) / h->w;
}

static int bench_herd(const options *o) {
    rlock_client *c = open_client(o, 0, 0);
    redisContext *redis = raw_or_exit(o->url);
    herd h = {.w = o->waiters};
    h.lock = get_lock(c, "bench:herd:%ld:%ld", (long)getpid(), o->waiters);
    pthread_barrier_init(&h.start, NULL, (unsigned)h.w + 1);
    pthread_barrier_init(&h.end, NULL, (unsigned)h.w + 1);
    pthread_mutex_init(&h.mutex, NULL);
    pthread_cond_init(&h.cond, NULL);
    pthread_t *tids = calloc((size_t)h.w, sizeof *tids);
    for (int i = 0; i < h.w; i++)
        pthread_create(&tids[i], NULL, herd_main, &h);
    double per[100] = {0}, ms[100] = {0}, worst = 0;
    int rounds = o->rounds < 100 ? o->rounds : 100, done = 0;
    fprintf(stderr, "herd: %d waiting threads in one process, %d rounds\n", h.w, rounds);
    for (; done < rounds && atomic_load(&h.errors) == 0; done++) {
        per[done] = herd_round(&h, redis, &ms[done]);
        worst = per[done] > worst ? per[done] : worst;
        fprintf(stderr, "  round %d: %.2f script calls per hand-off, %.3f ms per hand-off\n",
                done + 1, per[done], ms[done]);
    }
    atomic_store(&h.quit, 1);
    pthread_barrier_wait(&h.start);
    for (int i = 0; i < h.w; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    rlock_free(h.lock);
    rlock_client_close(c);
    redisFree(redis);
    jsonw j;
    j_begin(&j, "herd");
    j_int(&j, "waiters", h.w);
    j_int(&j, "rounds", done);
    j_num(&j, "scripts_per_handoff", median(per, done));
    j_num(&j, "scripts_per_handoff_max", worst);
    j_num(&j, "handoff_ms", median(ms, done));
    j_int(&j, "errors", atomic_load(&h.errors));
    j_end(&j);
    return atomic_load(&h.errors) ? 1 : 0;
}

/* ---- watchdog ----------------------------------------------------------------------------- */

/*
 * N watchdog locks held by a few threads (holds belong to threads, and a
 * thread that exits gives its holds up, so the holders stay alive until the
 * end). While they hold, INFO commandstats is sampled every 25 ms: each
 * renewal round shows as a burst of EVALSHA calls. The window spans whole
 * rounds: it opens after a burst ends and closes after the last burst of
 * three lease timeouts ends.
 */
typedef struct wd_holder {
    rlock_client *client;
    rlock **locks;
    long from, to;
    atomic_long *acquired, *errors;
    pthread_mutex_t *mutex;
    pthread_cond_t *cond;
    int *done;
} wd_holder;

static void *wd_holder_main(void *arg) {
    wd_holder *h = arg;
    for (long k = h->from; k < h->to; k++) {
        h->locks[k] = get_lock(h->client, "bench:wd:%ld:%ld", (long)getpid(), k);
        if (check(rlock_lock(h->locks[k]), "rlock_lock") < 0) {
            atomic_fetch_add(h->errors, 1);
            break;
        }
        atomic_fetch_add(h->acquired, 1);
    }
    pthread_mutex_lock(h->mutex);
    while (!*h->done)
        pthread_cond_wait(h->cond, h->mutex);
    pthread_mutex_unlock(h->mutex);
    return NULL;
}

typedef struct wd_window {
    int rounds;
    long long scripts;
    double wall, cpu, redis_cpu;
} wd_window;

/* Samples until `rounds` bursts of script calls have ended (or max_ms). */
static int wd_count_bursts(redisContext *redis, int rounds, int max_ms, long long *scripts) {
    rstats s;
    long long last = -1, first = -1;
    int bursts = 0, in_burst = 0;
    for (int t = 0; t < max_ms && bursts < rounds; t += 25) {
        rstats_take(redis, "commandstats", &s);
        long long now = rstats_scripts(&s);
        if (first < 0)
            first = now;
        if (last >= 0 && now > last)
            in_burst = 1;
        else if (in_burst && now == last) {
            in_burst = 0;
            bursts++;
        }
        last = now;
        raw_sleep_ms(25);
    }
    *scripts = last - first;
    return bursts;
}

static void wd_measure(redisContext *redis, const options *o, wd_window *w) {
    long long ignored;
    int max_ms = (int)(o->timeout * 4);
    wd_count_bursts(redis, 1, max_ms, &ignored); /* align with the end of a round */
    rstats r0, r1;
    rstats_take(redis, "cpu", &r0);
    double cpu0 = cpu_seconds(RUSAGE_SELF), me0 = cpu_seconds(RUSAGE_THREAD);
    uint64_t t0 = raw_now_ns();
    w->rounds = wd_count_bursts(redis, o->rounds, max_ms * o->rounds, &w->scripts);
    w->wall = (double)(raw_now_ns() - t0) / 1e9;
    rstats_take(redis, "cpu", &r1);
    w->redis_cpu = r1.cpu - r0.cpu; /* includes answering our INFO calls */
    /* The process's CPU less this sampling thread's own. */
    w->cpu = (cpu_seconds(RUSAGE_SELF) - cpu0) - (cpu_seconds(RUSAGE_THREAD) - me0);
}

/* Pipelined PTTL of every lock: how many exist, and the lowest TTL. */
static long wd_sweep(redisContext *redis, long n, long long *min_ttl) {
    long held = 0;
    *min_ttl = -1;
    for (long first = 0; first < n; first += 1000) {
        long k = n - first < 1000 ? n - first : 1000;
        for (long i = 0; i < k; i++)
            redisAppendCommand(redis, "PTTL bench:wd:%ld:%ld", (long)getpid(), first + i);
        for (long i = 0; i < k; i++) {
            void *raw;
            if (redisGetReply(redis, &raw) != REDIS_OK)
                return -1;
            redisReply *r = raw;
            if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
                held++;
                *min_ttl = *min_ttl < 0 || r->integer < *min_ttl ? r->integer : *min_ttl;
            }
            freeReplyObject(r);
        }
    }
    return held;
}

static void wd_delete(redisContext *redis, long n) {
    for (long i = 0; i < n; i++)
        redisAppendCommand(redis, "UNLINK bench:wd:%ld:%ld", (long)getpid(), i);
    for (long i = 0; i < n; i++) {
        void *raw;
        if (redisGetReply(redis, &raw) != REDIS_OK)
            return;
        freeReplyObject(raw);
    }
}

static int bench_watchdog(const options *o) {
    long n = o->count;
    rlock_client *c = open_client(o, o->timeout, o->threads);
    redisContext *redis = raw_or_exit(o->url);
    rlock **locks = calloc((size_t)n, sizeof *locks);
    atomic_long acquired = 0, errors = 0;
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    int done = 0;
    wd_holder *hs = calloc((size_t)o->threads, sizeof *hs);
    pthread_t *tids = calloc((size_t)o->threads, sizeof *tids);
    fprintf(stderr, "watchdog: %ld locks (watchdog_timeout %lld ms) from %d threads\n", n, o->timeout,
            o->threads);
    uint64_t t0 = raw_now_ns();
    for (int i = 0; i < o->threads; i++) {
        hs[i] = (wd_holder){c, locks, n * i / o->threads, n * (i + 1) / o->threads, &acquired, &errors,
                            &mutex, &cond, &done};
        pthread_create(&tids[i], NULL, wd_holder_main, &hs[i]);
    }
    while (atomic_load(&acquired) + atomic_load(&errors) < n && atomic_load(&errors) == 0)
        raw_sleep_ms(5);
    double acquire_s = (double)(raw_now_ns() - t0) / 1e9;
    fprintf(stderr, "  acquired %ld in %.2f s; measuring %d renewal rounds\n", atomic_load(&acquired),
            acquire_s, o->rounds);

    wd_window w = {0};
    long long min_ttl = -1;
    long held = -1;
    if (atomic_load(&errors) == 0) {
        wd_measure(redis, o, &w);
        held = wd_sweep(redis, n, &min_ttl);
    }
    double since = (double)(raw_now_ns() - t0) / 1e9 - acquire_s;
    pthread_mutex_lock(&mutex);
    done = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mutex);
    for (int i = 0; i < o->threads; i++)
        pthread_join(tids[i], NULL);
    rlock_client_close(c);
    for (long k = 0; k < n; k++)
        rlock_free(locks[k]);
    wd_delete(redis, n);
    redisFree(redis);

    double rounds = w.rounds > 0 ? w.rounds : NAN;
    jsonw j;
    j_begin(&j, "watchdog");
    j_int(&j, "locks", n);
    j_int(&j, "watchdog_timeout_ms", o->timeout);
    j_num(&j, "acquire_s", acquire_s);
    j_int(&j, "rounds", w.rounds);
    j_num(&j, "window_s", w.wall);
    j_num(&j, "scripts_per_round", (double)w.scripts / rounds);
    j_num(&j, "locks_per_script", w.scripts ? (double)n * w.rounds / (double)w.scripts : NAN);
    j_num(&j, "client_cpu_ms_per_round", w.cpu * 1e3 / rounds);
    j_num(&j, "client_cpu_pct_core", w.wall > 0 ? 100 * w.cpu / w.wall : NAN);
    j_num(&j, "redis_cpu_ms_per_round", w.redis_cpu * 1e3 / rounds);
    j_num(&j, "held_after_s", since);
    j_int(&j, "held", held);
    j_int(&j, "min_ttl_ms", min_ttl);
    j_int(&j, "lost_callbacks", atomic_load(&lost_locks));
    j_int(&j, "all_held", held == n);
    j_int(&j, "errors", atomic_load(&errors));
    j_end(&j);
    free(locks);
    free(hs);
    free(tids);
    return held == n && atomic_load(&errors) == 0 ? 0 : 1;
}

/* ---- memory ------------------------------------------------------------------------------------ */

/* Bytes the process has malloc'ed and not freed (all arenas, plus mmap'ed blocks). */
static long long heap_bytes(void) {
    struct mallinfo2 mi = mallinfo2();
    return (long long)mi.uordblks + (long long)mi.hblkhd;
}

typedef struct mem_waiter {
    rlock *lock;
    pthread_barrier_t *go;
    atomic_long *errors;
} mem_waiter;

static void *mem_waiter_main(void *arg) {
    mem_waiter *w = arg;
    /* This thread's malloc bookkeeping (glibc's per-thread cache header) is
     * made now, not in the library; volatile, or the compiler drops the pair. */
    void *volatile first = malloc(64);
    free(first);
    pthread_barrier_wait(w->go);
    if (check(rlock_lock(w->lock), "rlock_lock (waiter)") < 0 ||
        check(rlock_unlock(w->lock), "rlock_unlock (waiter)") < 0)
        atomic_fetch_add(w->errors, 1);
    return NULL;
}

/*
 * Heap per waiting thread: W threads already created and parked, then sent
 * into rlock_lock() on locks the main thread holds (one shared lock, or one
 * lock each); measured once they are all asleep.
 */
static double mem_waiters(rlock_client *c, redisContext *redis, int nw, int shared_lock,
                          atomic_long *errors) {
    rlock **locks = calloc((size_t)nw, sizeof *locks);
    mem_waiter *ws = calloc((size_t)nw, sizeof *ws);
    pthread_t *tids = calloc((size_t)nw, sizeof *tids);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)nw + 1);
    int nlocks = shared_lock ? 1 : nw;
    for (int i = 0; i < nlocks; i++) {
        locks[i] = get_lock(c, "bench:mem:wait:%ld:%ld", shared_lock, i);
        check(rlock_lock(locks[i]), "rlock_lock (main)");
    }
    for (int i = 0; i < nw; i++) {
        ws[i] = (mem_waiter){locks[shared_lock ? 0 : i], &go, errors};
        pthread_create(&tids[i], NULL, mem_waiter_main, &ws[i]);
    }
    raw_sleep_ms(100); /* let every thread make its malloc cache */
    long long before = heap_bytes();
    pthread_barrier_wait(&go);
    wait_scripts_quiet(redis, 200, 20000);
    raw_sleep_ms(100);
    long long after = heap_bytes();
    for (int i = 0; i < nlocks; i++)
        check(rlock_unlock(locks[i]), "rlock_unlock (main)");
    for (int i = 0; i < nw; i++)
        pthread_join(tids[i], NULL);
    for (int i = 0; i < nlocks; i++)
        rlock_free(locks[i]);
    pthread_barrier_destroy(&go);
    free(locks);
    free(ws);
    free(tids);
    return (double)(after - before) / nw;
}

/*
 * used_memory once it has settled: Redis resizes its key tables in the
 * background (serverCron) after many keys come or go, which would otherwise
 * land in whichever measurement runs next.
 */
static long long redis_memory(redisContext *redis) {
    rstats s;
    long long last = -1;
    for (int i = 0; i < 50; i++) {
        rstats_take(redis, "memory", &s);
        if (last >= 0 && llabs(s.used_memory - last) < 512)
            break;
        last = s.used_memory;
        raw_sleep_ms(200);
    }
    return s.used_memory;
}

/*
 * glibc counts chunks parked in a thread's malloc cache (tcache) as in use:
 * every thread that ever freed a few small blocks would look like it holds
 * them. The memory figures are taken with the cache off, by re-running
 * ourselves with the tunable set.
 */
static void without_tcache(char **argv) {
    const char *t = getenv("GLIBC_TUNABLES");
    if (t != NULL && strstr(t, "glibc.malloc.tcache_count=0") != NULL)
        return;
    setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", 1);
    execv("/proc/self/exe", argv);
    perror("execv"); /* carry on with the cache: figures a little high */
}

static int bench_memory(const options *o) {
    long n = o->count;
    /* One arena: a thread that finds its arena busy may get a new one, whose
     * bookkeeping mallinfo2() would count as in use. */
    mallopt(M_ARENA_MAX, 1);
    rlock_client *c = open_client(o, 0, 0);
    redisContext *redis = raw_or_exit(o->url);
    atomic_long errors = 0;
    rlock **locks = calloc((size_t)n, sizeof *locks);
    rlock *warm = get_lock(c, "bench:mem:warm:%ld:%ld", (long)getpid(), 0);
    check(rlock_lock(warm), "rlock_lock");
    check(rlock_unlock(warm), "rlock_unlock");
    rlock_free(warm);
    fprintf(stderr, "memory: %ld handles and held locks, %d waiting threads\n", n, o->waiters);

    long long h0 = heap_bytes();
    for (long k = 0; k < n; k++)
        locks[k] = get_lock(c, "bench:mem:%ld:%06ld", (long)getpid(), k);
    long long h1 = heap_bytes(), r0 = redis_memory(redis);
    for (long k = 0; k < n; k++)
        if (check(rlock_lock(locks[k]), "rlock_lock") < 0)
            atomic_fetch_add(&errors, 1);
    long long h2 = heap_bytes(), r1 = redis_memory(redis);
    for (long k = 0; k < n; k++)
        if (check(rlock_unlock(locks[k]), "rlock_unlock") < 0)
            atomic_fetch_add(&errors, 1);
    long long h3 = heap_bytes();
    for (long k = 0; k < n; k++)
        rlock_free(locks[k]);
    long long h4 = heap_bytes();

    /* A first, unmeasured pass grows the connection pool to its full size
     * (W threads asking at once): the pool is a per-client cost. */
    mem_waiters(c, redis, o->waiters, 0, &errors);
    double same = mem_waiters(c, redis, o->waiters, 1, &errors);
    double own = mem_waiters(c, redis, o->waiters, 0, &errors);
    rlock_client_close(c);
    redisFree(redis);
    free(locks);
    jsonw j;
    j_begin(&j, "memory");
    j_int(&j, "locks", n);
    j_int(&j, "waiters", o->waiters);
    j_num(&j, "heap_per_handle", (double)(h1 - h0) / (double)n);
    j_num(&j, "heap_per_held_lock", (double)(h2 - h1) / (double)n);
    j_num(&j, "heap_left_after_unlock", (double)(h3 - h1) / (double)n);
    j_num(&j, "heap_left_after_free", (double)(h4 - h0) / (double)n);
    j_num(&j, "heap_per_waiter_same_lock", same);
    j_num(&j, "heap_per_waiter_own_lock", own);
    j_num(&j, "redis_bytes_per_held_lock", (double)(r1 - r0) / (double)n);
    j_int(&j, "errors", atomic_load(&errors));
    j_end(&j);
    return atomic_load(&errors) ? 1 : 0;
}

/* ---- main ------------------------------------------------------------------------------------------ */

static void usage(FILE *out) {
    fprintf(out,
            "usage: bench_rlock SUBCOMMAND [--url URL] [options]\n"
            "  uncontended [-t THREADS] [-d SECONDS] [-r ROUNDS] [--lease MS]\n"
            "  handoff     [-n HANDOFFS] [--same-process] [--settle-us US] [--samples FILE]\n"
            "  contention  [-p PROCS] [-t THREADS] [-d SECONDS] [--monitor SECONDS] [--samples FILE]\n"
            "  herd        [-w WAITERS] [-r ROUNDS]\n"
            "  watchdog    [-n LOCKS] [-t THREADS] [--timeout MS] [-r ROUNDS]\n"
            "  memory      [-n LOCKS] [-w WAITERS]\n"
            "Every subcommand takes --local-handoffs N (rlock_config.local_handoffs).\n"
            "URL defaults to $RLOCK_TEST_URL. Prints one JSON line on stdout.\n");
}

static void parse_options(int argc, char **argv, options *o) {
    static const struct option longopts[] = {
        {"url", required_argument, NULL, 'u'},         {"lease", required_argument, NULL, 'L'},
        {"same-process", no_argument, NULL, 'S'},      {"settle-us", required_argument, NULL, 'U'},
        {"samples", required_argument, NULL, 'F'},     {"monitor", required_argument, NULL, 'M'},
        {"timeout", required_argument, NULL, 'T'},     {"help", no_argument, NULL, 'h'},
        {"local-handoffs", required_argument, NULL, 'H'}, {NULL, 0, NULL, 0}};
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
        case 'U': o->settle_us = (int)arg_num("--settle-us", optarg, 0, 1e6); break;
        case 'F': o->samples = optarg; break;
        case 'M': o->monitor_secs = arg_num("--monitor", optarg, 0, 600); break;
        case 'T': o->timeout = (long long)arg_num("--timeout", optarg, 30, 1e9); break;
        case 'H': o->local_handoffs = (int)arg_num("--local-handoffs", optarg, 0, 1000); break;
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
    int is_cont = strcmp(sub, "contention") == 0;
    options o = {.url = default_url(), .threads = is_wd || is_cont ? 4 : 1, .procs = 4, .rounds = 3,
                 .waiters = is_mem ? 100 : 10, .count = is_wd ? 10000 : is_mem ? 10000 : 2000,
                 .secs = is_cont ? 10 : 1.5, .monitor_secs = 2,
                 .timeout = 3000, .settle_us = 1000, .local_handoffs = -1};
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
                {"watchdog", bench_watchdog},       {"memory", bench_memory}};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strcmp(sub, subs[i].name) == 0)
            return subs[i].run(&o);
    fprintf(stderr, "unknown subcommand '%s'\n", sub);
    usage(stderr);
    return 2;
}
