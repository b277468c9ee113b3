/*
 * bench_cluster.c - rlock on a Redis Cluster of its own (test/harness
 * cluster.c: 3 masters + 3 replicas on 127.0.0.1), measured in one run:
 *
 *   uncontended  lock+unlock, 1 thread, names spread over the 3 masters:
 *                rlock vs raw hiredis sending the same two EVALSHA straight
 *                to the owning master (the raw client knows the slot map);
 *                rounds interleaved (raw, rlock, raw, rlock...) so both see
 *                the same noise. Redirects: INFO errorstats (MOVED, ASK) of
 *                every master before and after (target 0 per cycle).
 *   handoff      two processes, each with its own client, pass one lock back
 *                and forth: unlock call start in A -> rlock_lock return in B
 *                (CLOCK_MONOTONIC via shared memory), pubsub_mode SHARDED
 *                and CLASSIC.
 *   watchdog     W watchdog locks (default 100,000, names spread over every
 *                slot) held by one client, watchdog_timeout 3000 ms: per
 *                renewal round, EVALSHA calls and connections used per
 *                master (INFO commandstats, CLIENT LIST), round trips per
 *                master (pipelines the rlock-watchdog thread flushed to each
 *                master: see "round trips" below), the watchdog thread's CPU
 *                (/proc/self/task/TID/stat) and locks lost (LOCK_LOST).
 *   migration    a thread runs lock+unlock cycles on one name while its slot
 *                is migrated M times (IMPORTING/MIGRATING, MIGRATE, SETSLOT
 *                NODE): unlock latency inside the migration windows (from
 *                the first SETSLOT to 100 ms after every master names the
 *                new owner), and the calls that failed (target 0).
 *
 *   bench_cluster [-d SECONDS] [-r ROUNDS] [-n HANDOFFS] [-w LOCKS] [-k WD_ROUNDS]
 *                 [-m MIGRATIONS]
 *
 * Round trips: the program is linked with -Wl,--wrap=rlock__io_flush (see
 * the Makefile): every flush of a connection's output buffer that the
 * rlock-watchdog thread makes is counted per destination port. One flush is
 * one pipeline written, whose replies are then read: one round trip. This
 * reads an internal symbol of the library, on purpose: the server cannot
 * tell a pipeline from single commands.
 *
 * Prints progress on stderr and one JSON line on stdout (test/bench/run.sh).
 */
#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "bench.h"
#include "harness.h"
#include "kind/kind.h"

#define NMASTERS 3

static h_cluster *hc;
static h_server *masters[NMASTERS];
static int master_port[NMASTERS];
static int slot_master[H_CLUSTER_SLOTS]; /* index into masters, -1 unknown */

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "bench_cluster: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

static int master_of_port(int port) {
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

static int owner_index(const char *name) {
    return slot_master[h_slot(name, strlen(name))];
}

static redisContext *master_conn(int m) {
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

typedef struct redirects {
    long long moved, ask, tryagain;
} redirects;

static void redirects_take(redisContext **mc, redirects *out) {
    *out = (redirects){0};
    for (int m = 0; m < NMASTERS; m++) {
        out->moved += errorstat(mc[m], "MOVED");
        out->ask += errorstat(mc[m], "ASK");
        out->tryagain += errorstat(mc[m], "TRYAGAIN");
    }
}

/* Sum over the masters of a command's calls (commandstats). */
static long long calls_all(redisContext **mc, const char *cmd) {
    long long n = 0;
    for (int m = 0; m < NMASTERS; m++) {
        rstats s;
        if (rstats_take(mc[m], "commandstats", &s) == 0)
            n += rstats_calls(&s, cmd);
    }
    return n;
}

static rlock_client *open_cluster_client(int pubsub_mode, long long wd_ms,
                                         void (*on_event)(const rlock_event *, void *), void *arg) {
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock_config_init(&cfg);
    cfg.url = hc->url;
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

/* ---- 1. uncontended ----------------------------------------------------------- */

#define UNC_PER_MASTER 16
#define UNC_NAMES (UNC_PER_MASTER * NMASTERS)

static char unc_names[UNC_NAMES][48]; /* m0, m1, m2, m0, ... */
static int unc_owner[UNC_NAMES];

static void unc_pick_names(void) {
    int have[NMASTERS] = {0}, total = 0;
    char buf[48];
    for (int i = 0; total < UNC_NAMES; i++) {
        snprintf(buf, sizeof buf, "bench:cl:unc:%d:%d", (int)getpid(), i);
        int m = owner_index(buf);
        if (m < 0 || have[m] == UNC_PER_MASTER)
            continue;
        int k = have[m]++ * NMASTERS + m;
        memcpy(unc_names[k], buf, sizeof buf);
        unc_owner[k] = m;
        total++;
    }
}

typedef struct unc_rlock {
    rlock *lock[UNC_NAMES];
    int next;
} unc_rlock;

static void *unc_rlock_init(void *arg, int index) {
    unc_rlock *t = calloc(1, sizeof *t);
    (void)index;
    for (int i = 0; t != NULL && i < UNC_NAMES; i++)
        if (rlock_get(arg, unc_names[i], &t->lock[i]) != RLOCK_OK)
            return NULL;
    return t;
}

static int unc_rlock_cycle(void *state) {
    unc_rlock *t = state;
    rlock *l = t->lock[t->next];
    t->next = (t->next + 1) % UNC_NAMES;
    int rc = rlock_lock(l);
    if (rc != RLOCK_OK) {
        fprintf(stderr, "  rlock_lock: %s\n", rlock_last_error());
        return -1;
    }
    rc = rlock_unlock(l);
    if (rc != RLOCK_OK)
        fprintf(stderr, "  rlock_unlock: %s\n", rlock_last_error());
    return rc == RLOCK_OK ? 0 : -1;
}

static void unc_rlock_fini(void *state) {
    unc_rlock *t = state;
    for (int i = 0; i < UNC_NAMES; i++)
        rlock_free(t->lock[i]);
    free(t);
}

/* The raw client: a connection per master, the argv of every name's two scripts. */
static char acquire_sha[41], release_sha[41];

typedef struct unc_raw {
    redisContext *c[NMASTERS];
    char owner[64];
    char channel[UNC_NAMES][80];
    const char *acq[UNC_NAMES][7], *rel[UNC_NAMES][8];
    int next;
} unc_raw;

static int load_sha(redisContext *c, int script, char *sha) {
    return raw_load_script(c, rlock__script_body(script), sha);
}

static void *unc_raw_init(void *arg, int index) {
    unc_raw *t = calloc(1, sizeof *t);
    uuid_t u;
    char uuid[37];
    (void)arg;
    uuid_generate(u);
    uuid_unparse_lower(u, uuid);
    snprintf(t->owner, sizeof t->owner, "%s:%d", uuid, index + 1);
    for (int m = 0; m < NMASTERS; m++)
        t->c[m] = master_conn(m);
    for (int i = 0; i < UNC_NAMES; i++) {
        snprintf(t->channel[i], sizeof t->channel[i], "redisson_lock__channel:{%.47s}",
                 unc_names[i]);
        /* SPUBLISH: the channel's hash tag is the name, so it is in the name's slot. */
        const char *acq[] = {"EVALSHA", acquire_sha, "1", unc_names[i], "30000", t->owner, "0"};
        const char *rel[] = {"EVALSHA", release_sha, "1",           unc_names[i],
                             t->owner,  "1",         t->channel[i], "spublish"};
        memcpy(t->acq[i], acq, sizeof acq);
        memcpy(t->rel[i], rel, sizeof rel);
    }
    return t;
}

static int unc_raw_cycle(void *state) {
    unc_raw *t = state;
    int i = t->next;
    redisContext *c = t->c[unc_owner[i]];
    t->next = (i + 1) % UNC_NAMES;
    redisReply *r = redisCommandArgv(c, 7, t->acq[i], NULL);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->integer == 1 && r->element[1]->integer == 1;
    if (!ok)
        fprintf(stderr, "  raw acquire: %s\n", r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    if (r)
        freeReplyObject(r);
    if (!ok)
        return -1;
    r = redisCommandArgv(c, 8, t->rel[i], NULL);
    ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    if (!ok)
        fprintf(stderr, "  raw release: %s\n", r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static void unc_raw_fini(void *state) {
    unc_raw *t = state;
    for (int m = 0; m < NMASTERS; m++)
        redisFree(t->c[m]);
    free(t);
}

typedef struct unc_result {
    double raw_ops, raw_p50, raw_p99, ops, p50, p99, ratio, raw_cpu_us, cpu_us;
    double redirects_per_cycle, scripts_per_cycle, raw_redirects_per_cycle;
    long long moved, ask, cycles, spublish, publish;
} unc_result;

static void bench_uncontended(double secs, int rounds, unc_result *out) {
    redisContext *mc[NMASTERS];
    for (int m = 0; m < NMASTERS; m++) {
        mc[m] = master_conn(m);
        if (load_sha(mc[m], RLOCK__SCRIPT_ACQUIRE, acquire_sha) < 0 ||
            load_sha(mc[m], RLOCK__SCRIPT_RELEASE, release_sha) < 0)
            die("%s", "SCRIPT LOAD failed");
    }
    unc_pick_names();
    rlock_client *client = open_cluster_client(RLOCK_PUBSUB_AUTO, 0, NULL, NULL);
    cycle_ops raw = {unc_raw_init, unc_raw_cycle, unc_raw_fini, NULL};
    cycle_ops rl = {unc_rlock_init, unc_rlock_cycle, unc_rlock_fini, client};
    double ro[32], r50[32], r99[32], o[32], p50[32], p99[32], rcpu[32], cpu[32];
    long long all = 0, raw_all = 0, raw_redirects = 0, scripts = 0;
    redirects sum = {0};
    fprintf(stderr, "uncontended: 1 thread, %d names (%d per master), %d x (raw %.1f s, rlock "
                    "%.1f s) interleaved\n",
            UNC_NAMES, UNC_PER_MASTER, rounds, secs, secs);
    /* A first pass of each, not recorded: fills rlock's slot table and pools. */
    cycle_result res;
    if (run_cycles(&raw, 1, 0.3, 1, &res) != 0 || run_cycles(&rl, 1, 0.3, 1, &res) != 0)
        die("%s", "warm-up failed");
    long long sp0 = calls_all(mc, "spublish"), pb0 = calls_all(mc, "publish");
    for (int r = 0; r < rounds; r++) {
        redirects a, b;
        redirects_take(mc, &a);
        double cpu0 = cpu_seconds(RUSAGE_SELF);
        if (run_cycles(&raw, 1, secs, 1, &res) != 0)
            die("%s", "raw cycles failed");
        rcpu[r] = (cpu_seconds(RUSAGE_SELF) - cpu0) * 1e6 / (double)res.all_cycles;
        redirects_take(mc, &b);
        raw_redirects += b.moved - a.moved + b.ask - a.ask;
        raw_all += res.all_cycles;
        ro[r] = res.ops_per_s, r50[r] = res.p50_ms, r99[r] = res.p99_ms;
        long long s0 = calls_all(mc, "evalsha") + calls_all(mc, "eval");
        redirects_take(mc, &a);
        cpu0 = cpu_seconds(RUSAGE_SELF);
        if (run_cycles(&rl, 1, secs, 1, &res) != 0)
            die("%s", "rlock cycles failed");
        cpu[r] = (cpu_seconds(RUSAGE_SELF) - cpu0) * 1e6 / (double)res.all_cycles;
        redirects_take(mc, &b);
        scripts += calls_all(mc, "evalsha") + calls_all(mc, "eval") - s0;
        sum.moved += b.moved - a.moved;
        sum.ask += b.ask - a.ask;
        all += res.all_cycles;
        o[r] = res.ops_per_s, p50[r] = res.p50_ms, p99[r] = res.p99_ms;
        fprintf(stderr, "  pair %d: raw %.0f/s, rlock %.0f/s (%.3f); client CPU us/cycle raw %.1f, "
                        "rlock %.1f; rlock MOVED %lld ASK %lld\n",
                r + 1, ro[r], o[r], o[r] / ro[r], rcpu[r], cpu[r], b.moved - a.moved,
                b.ask - a.ask);
    }
    out->spublish = calls_all(mc, "spublish") - sp0;
    out->publish = calls_all(mc, "publish") - pb0;
    rlock_client_close(client);
    *out = (unc_result){
        .raw_ops = median(ro, rounds), .raw_p50 = median(r50, rounds),
        .raw_p99 = median(r99, rounds), .ops = median(o, rounds), .p50 = median(p50, rounds),
        .p99 = median(p99, rounds), .moved = sum.moved, .ask = sum.ask, .cycles = all,
        .spublish = out->spublish, .publish = out->publish, .raw_cpu_us = median(rcpu, rounds),
        .cpu_us = median(cpu, rounds)};
    out->ratio = out->ops / out->raw_ops;
    out->redirects_per_cycle = all ? (double)(sum.moved + sum.ask) / (double)all : NAN;
    out->raw_redirects_per_cycle = raw_all ? (double)raw_redirects / (double)raw_all : NAN;
    /* The scripts count includes the raw rounds' none: only rlock's rounds are between. */
    out->scripts_per_cycle = all ? (double)scripts / (double)all : NAN;
    for (int m = 0; m < NMASTERS; m++)
        redisFree(mc[m]);
}

/* ---- 2. cross-process hand-off -------------------------------------------------- */

typedef struct ho_shm {
    atomic_long ready, errors, waiting, got;
    _Atomic uint64_t released_ns;
    long n;
    uint64_t lat[];
} ho_shm;

static void ho_wait_at_least(atomic_long *v, long want, atomic_long *errors) {
    while (atomic_load(v) < want && atomic_load(errors) == 0)
        raw_sleep_ms(0.2);
}

/* As bench_rlock handoff: party i % 2 waits in rlock_lock, the other unlocks. */
static void ho_party(ho_shm *sh, rlock *lock, int me) {
    if (me == 1 && rlock_lock(lock) != RLOCK_OK)
        atomic_fetch_add(&sh->errors, 1);
    atomic_fetch_add(&sh->ready, 1); /* party 1 holds the lock by then */
    ho_wait_at_least(&sh->ready, 2, &sh->errors);
    for (long i = 0; i < sh->n && atomic_load(&sh->errors) == 0; i++) {
        if (i % 2 == me) {
            atomic_store(&sh->waiting, i + 1);
            if (rlock_lock(lock) != RLOCK_OK) {
                fprintf(stderr, "  waiter: %s\n", rlock_last_error());
                atomic_fetch_add(&sh->errors, 1);
                break;
            }
            sh->lat[i] = raw_now_ns() - atomic_load(&sh->released_ns);
            atomic_store(&sh->got, i + 1);
        } else {
            while (atomic_load(&sh->waiting) != i + 1 && atomic_load(&sh->errors) == 0)
                raw_sleep_ms(0.02);
            raw_sleep_ms(1); /* the waiter asleep in the library, not on its first attempt */
            atomic_store(&sh->released_ns, raw_now_ns());
            if (rlock_unlock(lock) != RLOCK_OK) {
                fprintf(stderr, "  holder: %s\n", rlock_last_error());
                atomic_fetch_add(&sh->errors, 1);
                break;
            }
            while (atomic_load(&sh->got) != i + 1 && atomic_load(&sh->errors) == 0)
                raw_sleep_ms(0.5);
        }
    }
    if ((sh->n - 1) % 2 == me && atomic_load(&sh->errors) == 0)
        rlock_unlock(lock);
}

typedef struct ho_result {
    double p50, p99, max;
    long long n, errors;
} ho_result;

static void bench_handoff(int mode, long n, ho_result *out) {
    ho_shm *sh = shared_alloc(sizeof *sh + (size_t)n * sizeof(uint64_t));
    char name[64];
    sh->n = n;
    snprintf(name, sizeof name, "bench:cl:handoff:%d:%d", (int)getpid(), mode);
    fprintf(stderr, "handoff (%s): %ld hand-offs between two processes, lock on master :%d\n",
            mode == RLOCK_PUBSUB_SHARDED ? "sharded" : "classic", n,
            master_port[owner_index(name)]);
    pid_t child = fork_child();
    if (child == 0) {
        rlock_client *cc = open_cluster_client(mode, 0, NULL, NULL);
        rlock *l;
        if (rlock_get(cc, name, &l) != RLOCK_OK)
            _exit(1);
        ho_party(sh, l, 1);
        rlock_free(l);
        rlock_client_close(cc);
        _exit(atomic_load(&sh->errors) ? 1 : 0);
    }
    rlock_client *c = open_cluster_client(mode, 0, NULL, NULL);
    rlock *l;
    if (rlock_get(c, name, &l) != RLOCK_OK)
        die("%s", "rlock_get");
    ho_party(sh, l, 0);
    int ws;
    waitpid(child, &ws, 0);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        atomic_fetch_add(&sh->errors, 1);
    rlock_free(l);
    rlock_client_close(c);
    samples s = {0};
    for (long i = 0; i < n; i++)
        if (sh->lat[i] > 0)
            samples_add(&s, sh->lat[i]);
    samples_sort(&s);
    *out = (ho_result){samples_pct_ms(&s, 50), samples_pct_ms(&s, 99), samples_pct_ms(&s, 100),
                       (long long)s.n, atomic_load(&sh->errors)};
    fprintf(stderr, "  %lld hand-offs: p50 %.3f ms, p99 %.3f ms, max %.3f ms, errors %lld\n",
            out->n, out->p50, out->p99, out->max, out->errors);
    samples_free(&s);
    munmap(sh, sizeof *sh + (size_t)n * sizeof(uint64_t));
}

/* ---- 3. watchdog at scale --------------------------------------------------------- */

/* Pipelines flushed by the rlock-watchdog thread, per master (see the header). */
static atomic_int wd_counting;
static atomic_llong wd_flushes[NMASTERS + 1]; /* [NMASTERS]: another port */
static _Thread_local int is_watchdog = -1;

int __real_rlock__io_flush(redisContext *ctx, int64_t deadline_ms);
int __wrap_rlock__io_flush(redisContext *ctx, int64_t deadline_ms);

int __wrap_rlock__io_flush(redisContext *ctx, int64_t deadline_ms) {
    if (atomic_load(&wd_counting)) {
        if (is_watchdog < 0) {
            char name[16] = "";
            pthread_getname_np(pthread_self(), name, sizeof name);
            is_watchdog = strcmp(name, "rlock-watchdog") == 0;
        }
        if (is_watchdog) {
            int m = master_of_port(ctx->tcp.port);
            atomic_fetch_add(&wd_flushes[m < 0 ? NMASTERS : m], 1);
        }
    }
    return __real_rlock__io_flush(ctx, deadline_ms);
}

static atomic_long wd_lost, wd_failed, wd_events;

static void wd_on_event(const rlock_event *ev, void *arg) {
    (void)arg;
    atomic_fetch_add(&wd_events, 1);
    if (ev->kind == RLOCK_EVENT_LOCK_LOST)
        atomic_fetch_add(&wd_lost, 1);
    else if (ev->kind == RLOCK_EVENT_RENEWAL_FAILED)
        atomic_fetch_add(&wd_failed, 1);
    if (atomic_load(&wd_events) <= 5)
        fprintf(stderr, "  event %d %s: %s\n", (int)ev->kind, ev->name ? ev->name : "-",
                ev->detail);
}

typedef struct wd_holder {
    rlock_client *client;
    rlock **locks;
    long from, to;
    atomic_long *acquired, *errors;
    atomic_int *done;
} wd_holder;

static void wd_name(char *buf, size_t size, long k) {
    snprintf(buf, size, "bench:cl:wd:%d:%ld", (int)getpid(), k);
}

static void *wd_holder_main(void *arg) {
    wd_holder *h = arg;
    char name[64];
    for (long k = h->from; k < h->to; k++) {
        wd_name(name, sizeof name, k);
        if (rlock_get(h->client, name, &h->locks[k]) != RLOCK_OK ||
            rlock_lock(h->locks[k]) != RLOCK_OK) {
            fprintf(stderr, "  acquire %s: %s\n", name, rlock_last_error());
            atomic_fetch_add(h->errors, 1);
            break;
        }
        atomic_fetch_add(h->acquired, 1);
    }
    while (!atomic_load(h->done)) /* holds belong to this thread: it stays */
        raw_sleep_ms(20);
    return NULL;
}

/* The thread of this process named name (its /proc/self/task entry), or 0. */
static int thread_named(const char *name) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int tid = 0;
    while (d != NULL && tid == 0 && (e = readdir(d)) != NULL) {
        char path[300], comm[32] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f != NULL && fgets(comm, sizeof comm, f) != NULL) {
            comm[strcspn(comm, "\n")] = '\0';
            if (strcmp(comm, name) == 0)
                tid = atoi(e->d_name);
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return tid;
}

/* utime + stime of a thread, in seconds. */
static double thread_cpu(int tid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(buf, sizeof buf, f) == NULL) {
        if (f)
            fclose(f);
        return NAN;
    }
    fclose(f);
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                            &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long long evalsha_of(redisContext *c) {
    rstats s;
    return rstats_take(c, "commandstats", &s) == 0 ? rstats_calls(&s, "evalsha") : -1;
}

/* Connections whose last command was EVALSHA, used within the last second. */
static int evalsha_conns(redisContext *c) {
    redisReply *r = redisCommand(c, "CLIENT LIST");
    int n = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        char *save = NULL;
        for (char *line = strtok_r(r->str, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            if (strstr(line, " cmd=evalsha ") != NULL && strstr(line, " idle=0 ") != NULL)
                n++;
    }
    if (r)
        freeReplyObject(r);
    return n;
}

/*
 * Samples the masters' EVALSHA counts every 25 ms until a burst (a renewal
 * round) has ended: calls seen, then 50 ms without any. Returns 0, or -1
 * after max_ms.
 */
static int wd_burst_end(redisContext **mc, int max_ms) {
    long long last = -1;
    int burst = 0, quiet = 0;
    for (int t = 0; t < max_ms; t += 25) {
        long long now = 0;
        for (int m = 0; m < NMASTERS; m++)
            now += evalsha_of(mc[m]);
        if (last >= 0 && now > last)
            burst = 1, quiet = 0;
        else if (burst && now == last && ++quiet == 2)
            return 0;
        last = now;
        raw_sleep_ms(25);
    }
    return -1;
}

typedef struct wd_result {
    long locks, held;
    long long min_ttl, lost, failed;
    int rounds, max_conns[NMASTERS];
    double acquire_s, window_s, thread_cpu_pct, process_cpu_pct;
    double evalsha_per_round[NMASTERS], rtt_per_round[NMASTERS], locks_on[NMASTERS];
    double redis_cpu_ms_per_round[NMASTERS];
    long long other_flushes;
} wd_result;

/* Pipelined PTTL of every lock on its master: how many are held, the lowest TTL. */
static long wd_sweep(redisContext **mc, long n, long long *min_ttl) {
    long held = 0;
    char name[64];
    *min_ttl = -1;
    for (long first = 0; first < n; first += 3000) {
        long k = n - first < 3000 ? n - first : 3000;
        int *owner = calloc((size_t)k, sizeof *owner);
        for (long i = 0; i < k; i++) {
            wd_name(name, sizeof name, first + i);
            owner[i] = owner_index(name);
            redisAppendCommand(mc[owner[i]], "PTTL %s", name);
        }
        for (long i = 0; i < k; i++) {
            void *raw;
            if (redisGetReply(mc[owner[i]], &raw) != REDIS_OK)
                die("%s", "PTTL sweep: connection broke");
            redisReply *r = raw;
            if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
                held++;
                *min_ttl = *min_ttl < 0 || r->integer < *min_ttl ? r->integer : *min_ttl;
            }
            freeReplyObject(r);
        }
        free(owner);
    }
    return held;
}

static void bench_watchdog(long n, int nthreads, int rounds, wd_result *out) {
    redisContext *mc[NMASTERS];
    rstats c0[NMASTERS], c1[NMASTERS];
    memset(out, 0, sizeof *out);
    out->locks = n;
    for (int m = 0; m < NMASTERS; m++)
        mc[m] = master_conn(m);
    char name[64];
    for (long k = 0; k < n; k++) {
        wd_name(name, sizeof name, k);
        out->locks_on[owner_index(name)] += 1;
    }
    rlock_client *c = open_cluster_client(RLOCK_PUBSUB_AUTO, 3000, wd_on_event, NULL);
    rlock **locks = calloc((size_t)n, sizeof *locks);
    atomic_long acquired = 0, errors = 0;
    atomic_int done = 0;
    wd_holder *hs = calloc((size_t)nthreads, sizeof *hs);
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    fprintf(stderr, "watchdog: %ld locks (%.0f/%.0f/%.0f per master), watchdog_timeout 3000 ms, "
                    "acquired by %d threads\n",
            n, out->locks_on[0], out->locks_on[1], out->locks_on[2], nthreads);
    uint64_t t0 = raw_now_ns();
    for (int i = 0; i < nthreads; i++) {
        hs[i] = (wd_holder){c, locks, n * i / nthreads, n * (i + 1) / nthreads, &acquired, &errors,
                            &done};
        pthread_create(&tids[i], NULL, wd_holder_main, &hs[i]);
    }
    while (atomic_load(&acquired) + atomic_load(&errors) < n && atomic_load(&errors) == 0)
        raw_sleep_ms(5);
    out->acquire_s = (double)(raw_now_ns() - t0) / 1e9;
    fprintf(stderr, "  acquired %ld in %.2f s (%.0f/s); measuring %d renewal rounds\n",
            atomic_load(&acquired), out->acquire_s, (double)atomic_load(&acquired) / out->acquire_s,
            rounds);
    int wd_tid = thread_named("rlock-watchdog");
    if (atomic_load(&errors) == 0 && wd_tid > 0 && wd_burst_end(mc, 5000) == 0) {
        for (int m = 0; m < NMASTERS; m++)
            rstats_take(mc[m], "commandstats cpu", &c0[m]);
        for (int m = 0; m <= NMASTERS; m++)
            atomic_store(&wd_flushes[m], 0);
        atomic_store(&wd_counting, 1);
        double tcpu0 = thread_cpu(wd_tid);
        double pcpu0 = cpu_seconds(RUSAGE_SELF), me0 = cpu_seconds(RUSAGE_THREAD);
        uint64_t w0 = raw_now_ns();
        for (int r = 0; r < rounds; r++) {
            if (wd_burst_end(mc, 5000) < 0)
                break;
            out->rounds++;
            for (int m = 0; m < NMASTERS; m++) {
                int k = evalsha_conns(mc[m]);
                out->max_conns[m] = k > out->max_conns[m] ? k : out->max_conns[m];
            }
        }
        out->window_s = (double)(raw_now_ns() - w0) / 1e9;
        double tcpu = thread_cpu(wd_tid) - tcpu0;
        double pcpu = (cpu_seconds(RUSAGE_SELF) - pcpu0) - (cpu_seconds(RUSAGE_THREAD) - me0);
        atomic_store(&wd_counting, 0);
        for (int m = 0; m < NMASTERS; m++)
            rstats_take(mc[m], "commandstats cpu", &c1[m]);
        double rr = out->rounds ? out->rounds : NAN;
        for (int m = 0; m < NMASTERS; m++) {
            out->evalsha_per_round[m] = (double)rstats_delta(&c0[m], &c1[m], "evalsha") / rr;
            out->rtt_per_round[m] = (double)atomic_load(&wd_flushes[m]) / rr;
            out->redis_cpu_ms_per_round[m] = (c1[m].cpu - c0[m].cpu) * 1e3 / rr;
        }
        out->other_flushes = atomic_load(&wd_flushes[NMASTERS]);
        out->thread_cpu_pct = 100 * tcpu / out->window_s;
        out->process_cpu_pct = 100 * pcpu / out->window_s;
        out->held = wd_sweep(mc, n, &out->min_ttl);
    } else {
        fprintf(stderr, "  no measurement: errors %ld, watchdog thread %d\n",
                atomic_load(&errors), wd_tid);
        out->held = -1;
    }
    out->lost = atomic_load(&wd_lost);
    out->failed = atomic_load(&wd_failed);
    for (int m = 0; m < NMASTERS; m++)
        fprintf(stderr, "  master :%d: %.0f locks, %.0f EVALSHA/round (%.1f locks each), "
                        "%.2f round trips/round, %d connection(s), Redis CPU %.1f ms/round\n",
                master_port[m], out->locks_on[m], out->evalsha_per_round[m],
                out->locks_on[m] / out->evalsha_per_round[m], out->rtt_per_round[m],
                out->max_conns[m], out->redis_cpu_ms_per_round[m]);
    fprintf(stderr, "  %d rounds in %.2f s; rlock-watchdog thread CPU %.2f %% of a core (process "
                    "%.2f %%); held %ld/%ld (min PTTL %lld ms); LOCK_LOST %lld, RENEWAL_FAILED "
                    "%lld\n",
            out->rounds, out->window_s, out->thread_cpu_pct, out->process_cpu_pct, out->held, n,
            out->min_ttl, out->lost, out->failed);
    atomic_store(&done, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    rlock_client_close(c);
    for (long k = 0; k < n; k++)
        rlock_free(locks[k]);
    for (int m = 0; m < NMASTERS; m++) {
        raw_ok(mc[m], "FLUSHALL");
        redisFree(mc[m]);
    }
    free(locks);
    free(hs);
    free(tids);
    if (atomic_load(&errors) != 0)
        out->held = -1;
}

/* ---- 4. slot migration ------------------------------------------------------------ */

typedef struct mig_sample {
    uint64_t at_ns, unlock_ns;
} mig_sample;

typedef struct mig_run {
    rlock *lock;
    atomic_int stop;
    atomic_long failed, cycles;
    mig_sample *s;
    long cap, n;
} mig_run;

static void *mig_cycler(void *arg) {
    mig_run *r = arg;
    while (!atomic_load(&r->stop)) {
        int rc = rlock_lock(r->lock);
        if (rc != RLOCK_OK) {
            fprintf(stderr, "  migration: rlock_lock: %s\n", rlock_last_error());
            atomic_fetch_add(&r->failed, 1);
            raw_sleep_ms(1);
            continue;
        }
        uint64_t t1 = raw_now_ns();
        rc = rlock_unlock(r->lock);
        uint64_t t2 = raw_now_ns();
        if (rc != RLOCK_OK) {
            fprintf(stderr, "  migration: rlock_unlock: %s\n", rlock_last_error());
            atomic_fetch_add(&r->failed, 1);
        }
        if (r->n < r->cap)
            r->s[r->n++] = (mig_sample){t1, t2 - t1};
        atomic_fetch_add(&r->cycles, 1);
    }
    return NULL;
}

static atomic_long mig_lost;

static void mig_on_event(const rlock_event *ev, void *arg) {
    (void)arg;
    if (ev->kind == RLOCK_EVENT_LOCK_LOST)
        atomic_fetch_add(&mig_lost, 1);
    if (ev->kind == RLOCK_EVENT_LOCK_LOST || ev->kind == RLOCK_EVENT_RENEWAL_FAILED)
        fprintf(stderr, "  migration: event %d %s: %s\n", (int)ev->kind, ev->name ? ev->name : "-",
                ev->detail);
}

typedef struct mig_result {
    int migrations;
    long in_windows, outside;
    double p50, p99, max, out_p50, out_p99, window_ms;
    long long failed, moved, ask, tryagain, lost;
    int held_ok;
} mig_result;

static void bench_migration(int migrations, mig_result *out) {
    char name[64];
    snprintf(name, sizeof name, "bench:cl:mig:%d", (int)getpid());
    int slot = h_slot(name, strlen(name));
    /* A watchdog lock held all along in the same slot (no braces: its channel is
     * in that slot too), so MIGRATE moves a real lock and renewals cross it. */
    char held_name[64];
    for (int i = 0;; i++) {
        snprintf(held_name, sizeof held_name, "bench:cl:mig:held:%d:%d", (int)getpid(), i);
        if (h_slot(held_name, strlen(held_name)) == slot)
            break;
    }
    redisContext *mc[NMASTERS];
    for (int m = 0; m < NMASTERS; m++)
        mc[m] = master_conn(m);
    rlock_client *c = open_cluster_client(RLOCK_PUBSUB_AUTO, 3000, mig_on_event, NULL);
    mig_run run = {.cap = 2000000};
    run.s = calloc((size_t)run.cap, sizeof *run.s);
    rlock *held;
    if (rlock_get(c, name, &run.lock) != RLOCK_OK || rlock_get(c, held_name, &held) != RLOCK_OK ||
        rlock_lock(held) != RLOCK_OK)
        die("migration set-up: %s", rlock_last_error());
    uint64_t (*win)[2] = calloc((size_t)migrations, sizeof *win);
    redirects a, b;
    fprintf(stderr, "migration: lock+unlock cycles on %s (slot %d) through %d migrations\n", name,
            slot, migrations);
    pthread_t th;
    pthread_create(&th, NULL, mig_cycler, &run);
    raw_sleep_ms(300);
    redirects_take(mc, &a);
    double total_ms = 0;
    for (int k = 0; k < migrations; k++) {
        h_server *from = h_cluster_owner(hc, slot), *to = NULL;
        for (int m = 0; m < NMASTERS && to == NULL; m++) /* the next master after the owner */
            if (masters[m] == from)
                to = masters[(m + 1) % NMASTERS];
        if (to == NULL)
            die("%s", "the slot has no owner among the masters");
        long c0 = atomic_load(&run.cycles);
        h_migration mg;
        win[k][0] = raw_now_ns();
        h_cluster_migrate_begin(hc, slot, to, &mg);
        raw_sleep_ms(150); /* cycles in IMPORTING/MIGRATING, the key on the source */
        long c1 = atomic_load(&run.cycles);
        int keys = h_cluster_migrate_keys(hc, &mg);
        raw_sleep_ms(150); /* the key (if it was there) on the target: ASK */
        long c2 = atomic_load(&run.cycles);
        h_cluster_migrate_finish(hc, &mg);
        raw_sleep_ms(100); /* the first MOVED and after */
        win[k][1] = raw_now_ns();
        long c3 = atomic_load(&run.cycles);
        total_ms += (double)(win[k][1] - win[k][0]) / 1e6;
        fprintf(stderr, "  migration %d: :%d -> :%d, %d key(s) moved; cycles: %ld while "
                        "migrating, %ld after MIGRATE, %ld after SETSLOT NODE; %.0f ms\n",
                k + 1, h_server_port(from), h_server_port(to), keys, c1 - c0, c2 - c1, c3 - c2,
                (double)(win[k][1] - win[k][0]) / 1e6);
        raw_sleep_ms(200); /* steady state between migrations */
    }
    redirects_take(mc, &b);
    atomic_store(&run.stop, 1);
    pthread_join(th, NULL);
    int held_ok = rlock_unlock(held) == RLOCK_OK;
    if (!held_ok)
        fprintf(stderr, "  migration: unlock of the held lock: %s\n", rlock_last_error());
    samples in = {0}, outside = {0};
    for (long i = 0; i < run.n; i++) {
        int inside = 0;
        for (int k = 0; k < migrations && !inside; k++)
            inside = run.s[i].at_ns >= win[k][0] && run.s[i].at_ns <= win[k][1];
        samples_add(inside ? &in : &outside, run.s[i].unlock_ns);
    }
    samples_sort(&in);
    samples_sort(&outside);
    *out = (mig_result){.migrations = migrations,
                        .in_windows = (long)in.n,
                        .outside = (long)outside.n,
                        .p50 = samples_pct_ms(&in, 50),
                        .p99 = samples_pct_ms(&in, 99),
                        .max = samples_pct_ms(&in, 100),
                        .out_p50 = samples_pct_ms(&outside, 50),
                        .out_p99 = samples_pct_ms(&outside, 99),
                        .window_ms = total_ms / migrations,
                        .failed = atomic_load(&run.failed),
                        .moved = b.moved - a.moved,
                        .ask = b.ask - a.ask,
                        .tryagain = b.tryagain - a.tryagain,
                        .lost = atomic_load(&mig_lost),
                        .held_ok = held_ok};
    fprintf(stderr, "  unlock in windows: %ld cycles, p50 %.3f ms, p99 %.3f ms, max %.3f ms; "
                    "outside: %ld cycles, p50 %.3f ms, p99 %.3f ms; failed calls %lld; MOVED %lld "
                    "ASK %lld TRYAGAIN %lld\n",
            out->in_windows, out->p50, out->p99, out->max, out->outside, out->out_p50, out->out_p99,
            out->failed, out->moved, out->ask, out->tryagain);
    fprintf(stderr, "  held watchdog lock %s: unlocked %s, LOCK_LOST %lld\n", held_name,
            held_ok ? "OK" : "FAILED", out->lost);
    samples_free(&in);
    rlock_free(held);
    samples_free(&outside);
    rlock_free(run.lock);
    rlock_client_close(c);
    for (int m = 0; m < NMASTERS; m++)
        redisFree(mc[m]);
    free(run.s);
    free(win);
}

/* ---- main --------------------------------------------------------------------------- */

static void put_per_master(jsonw *j, const char *key, const double *v, const char *fmt) {
    char buf[96];
    int n = 0;
    for (int m = 0; m < NMASTERS; m++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, fmt, m ? "/" : "", v[m]);
    j_str(j, key, buf);
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
    long handoffs = 2000, wd_locks = 100000;
    while ((opt = getopt(argc, argv, "d:r:n:w:k:m:")) != -1) {
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
        else
            return fprintf(stderr, "usage: bench_cluster [-d S] [-r N] [-n HANDOFFS] [-w LOCKS] "
                                   "[-k WD_ROUNDS] [-m MIGRATIONS]\n"),
                   2;
    }
    uint64_t t0 = raw_now_ns();
    hc = h_cluster_start();
    read_topology();
    fprintf(stderr, "cluster %s up in %.1f s; masters :%d :%d :%d\n", hc->url,
            (double)(raw_now_ns() - t0) / 1e9, master_port[0], master_port[1], master_port[2]);

    unc_result u;
    ho_result hs, hcl;
    wd_result w;
    mig_result mg;
    bench_uncontended(secs, rounds, &u);
    bench_handoff(RLOCK_PUBSUB_SHARDED, handoffs, &hs);
    bench_handoff(RLOCK_PUBSUB_CLASSIC, handoffs, &hcl);
    bench_watchdog(wd_locks, 4, wd_rounds, &w);
    bench_migration(migrations, &mg);
    h_cluster_stop(hc);

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
    j_num(&j, "unc_redirects_per_cycle", u.redirects_per_cycle);
    j_int(&j, "unc_moved", u.moved);
    j_int(&j, "unc_ask", u.ask);
    j_num(&j, "unc_raw_redirects_per_cycle", u.raw_redirects_per_cycle);
    j_num(&j, "unc_scripts_per_cycle", u.scripts_per_cycle);
    j_num(&j, "unc_raw_cpu_us_per_cycle", u.raw_cpu_us);
    j_num(&j, "unc_cpu_us_per_cycle", u.cpu_us);
    j_str(&j, "unc_publish_verb", u.spublish > 0 && u.publish == 0   ? "spublish"
                                  : u.publish > 0 && u.spublish == 0 ? "publish"
                                                                     : "mixed");
    j_int(&j, "unc_cycles", u.cycles);
    j_int(&j, "ho_n", hs.n);
    j_num(&j, "ho_sharded_p50_ms", hs.p50);
    j_num(&j, "ho_sharded_p99_ms", hs.p99);
    j_num(&j, "ho_sharded_max_ms", hs.max);
    j_num(&j, "ho_classic_p50_ms", hcl.p50);
    j_num(&j, "ho_classic_p99_ms", hcl.p99);
    j_num(&j, "ho_classic_max_ms", hcl.max);
    j_int(&j, "ho_errors", hs.errors + hcl.errors);
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
    int bad = hs.errors || hcl.errors || w.held != w.locks || w.lost || mg.failed || mg.lost ||
              !mg.held_ok;
    return bad ? 1 : 0;
}
