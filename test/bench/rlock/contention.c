/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * contention.c - bench_rlock contention: P processes x T threads on one lock,
 * GET+SET in the critical section: throughput, fairness, Redis cost, and a
 * MONITOR window that counts the commands behind each acquisition (run.sh
 * section 4).
 */
#include <ctype.h>
#include <unistd.h>

#include "bench_rlock.h"

#define CONT_COUNTER "bench:contention:counter"
#define CONT_LOCK "bench:contention:lock"

typedef struct cont_shm {
    workers_shm w;             /* ready, phase, errors (workers.c) */
    atomic_long last_owner;    /* worker index of the last holder, -1 at first */
    atomic_long owner_changes;
    atomic_long acq[];         /* per worker */
} cont_shm;

/* The critical section: a read-modify-write that only the lock makes safe. */
static int cont_critical(const workers_spec *spec, long index, redisContext *redis) {
    cont_shm *sh = spec->arg;
    long long v;
    if (raw_int(redis, &v, "GET " CONT_COUNTER) < 0 || raw_ok(redis, "SET " CONT_COUNTER " %lld", v + 1) < 0)
        return -1;
    if (atomic_exchange(&sh->last_owner, index) != index)
        atomic_fetch_add(&sh->owner_changes, 1);
    atomic_fetch_add(&sh->acq[index], 1);
    return 0;
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

/* The timed run, with progress every second and the Redis stats before and
 * after it; returns its length in seconds. */
static double cont_run(const options *o, cont_shm *sh, int n, redisContext *redis, rstats *s0,
                       rstats *s1) {
    rstats_take(redis, "cpu commandstats", s0);
    uint64_t t0 = raw_now_ns();
    atomic_store(&sh->w.phase, WORKERS_RUN);
    for (int sec = 1; sec <= (int)o->secs; sec++) {
        raw_sleep_ms(1000);
        fprintf(stderr, "  %2d s: %ld acquisitions\n", sec, sum_acq(sh, n));
    }
    raw_sleep_ms((o->secs - (int)o->secs) * 1000);
    rstats_take(redis, "cpu commandstats", s1);
    return (double)(raw_now_ns() - t0) / 1e9;
}

/* Acquisitions per worker (written to --samples): returns their sum, and
 * stores the lowest and the highest. */
static long cont_per_worker(const options *o, cont_shm *sh, int n, long *amin, long *amax) {
    long acq = 0;
    *amin = -1;
    *amax = 0;
    FILE *per_thread = o->samples ? fopen(o->samples, "w") : NULL;
    for (int i = 0; i < n; i++) {
        long a = atomic_load(&sh->acq[i]);
        acq += a;
        *amin = *amin < 0 || a < *amin ? a : *amin;
        *amax = a > *amax ? a : *amax;
        if (per_thread)
            fprintf(per_thread, "%d %d %ld\n", i / o->threads, i, a);
    }
    if (per_thread)
        fclose(per_thread);
    return acq;
}

int bench_contention(const options *o) {
    int n = o->procs * o->threads;
    cont_shm *sh = shared_alloc(sizeof *sh + (size_t)n * sizeof(atomic_long));
    atomic_store(&sh->last_owner, -1);
    redisContext *redis = raw_or_exit(o->url);
    raw_ok(redis, "DEL " CONT_COUNTER " " CONT_LOCK);
    fprintf(stderr, "contention: %d processes x %d threads on one lock, %.0f s (+%.0f s monitored)\n",
            o->procs, o->threads, o->secs, o->monitor_secs);
    workers_spec spec = {.o = o, .sh = &sh->w, .name = CONT_LOCK, .critical = cont_critical,
                         .arg = sh};
    pid_t pids[256];
    workers_start(&spec, pids);

    rstats s0, s1;
    double secs = cont_run(o, sh, n, redis, &s0, &s1);
    long amin, amax, changes = atomic_load(&sh->owner_changes);
    long acq = cont_per_worker(o, sh, n, &amin, &amax);

    monitor_tally m;
    long macq = 0;
    if (o->monitor_secs > 0)
        cont_monitor(o, sh, n, &m, &macq);
    int failed = workers_stop(&spec, pids);
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
    j_int(&j, "errors", atomic_load(&sh->w.errors) + failed);
    j_end(&j);
    redisFree(redis);
    return counter == total && failed == 0 && atomic_load(&sh->w.errors) == 0 ? 0 : 1;
}
