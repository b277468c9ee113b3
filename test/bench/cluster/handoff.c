/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handoff.c - bench_cluster's handoff section: two processes, each with its
 * own client, pass one lock back and forth; latency from the unlock call in
 * one to the rlock_lock return in the other, pubsub_mode SHARDED and CLASSIC.
 * Beside each, its floor (floor.h): the same hand-off in raw hiredis with
 * rlock's scripts on the lock's master, the waiter blocked reading its
 * SSUBSCRIBE (SUBSCRIBE) connection to that master, as rlock subscribes.
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "bench/floor.h"
#include "bench_cluster.h"
#include "kind/kind.h"

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

static const char *mode_name(int mode) {
    return mode == RLOCK_PUBSUB_SHARDED ? "sharded" : "classic";
}

/* Fills out from sorted latencies and prints the row. */
static void ho_report(const char *what, samples *s, long long errors, ho_result *out) {
    *out = (ho_result){samples_pct_ms(s, 50), samples_pct_ms(s, 99), samples_pct_ms(s, 100),
                       (long long)s->n, errors};
    fprintf(stderr, "  %s: %lld hand-offs: p50 %.3f ms, p99 %.3f ms, max %.3f ms, errors %lld\n",
            what, out->n, out->p50, out->p99, out->max, out->errors);
}

/* The master of c owning name's slot. */
static h_server *owner_in(const h_cluster *c, const char *name) {
    h_server *m = h_cluster_owner(c, h_slot(name, strlen(name)));
    if (m == NULL)
        die("no master owns the slot of %s", name);
    return m;
}

void bench_handoff(const h_cluster *c, int mode, long n, ho_result *out) {
    ho_shm *sh = shared_alloc(sizeof *sh + (size_t)n * sizeof(uint64_t));
    char name[64];
    sh->n = n;
    snprintf(name, sizeof name, "bench:cl:handoff:%d:%d", (int)getpid(), mode);
    fprintf(stderr, "handoff (rlock, %s): %ld hand-offs between two processes, lock on :%d\n",
            mode_name(mode), n, h_server_port(owner_in(c, name)));
    pid_t child = fork_child();
    if (child == 0) {
        rlock_client *cc = open_cluster_client_at(c->url, mode, 0, NULL, NULL);
        rlock *l;
        if (rlock_get(cc, name, &l) != RLOCK_OK)
            _exit(1);
        ho_party(sh, l, 1);
        rlock_free(l);
        rlock_client_close(cc);
        _exit(atomic_load(&sh->errors) ? 1 : 0);
    }
    rlock_client *cl = open_cluster_client_at(c->url, mode, 0, NULL, NULL);
    rlock *l;
    if (rlock_get(cl, name, &l) != RLOCK_OK)
        die("%s", "rlock_get");
    ho_party(sh, l, 0);
    int ws;
    waitpid(child, &ws, 0);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        atomic_fetch_add(&sh->errors, 1);
    rlock_free(l);
    rlock_client_close(cl);
    samples s = {0};
    for (long i = 0; i < n; i++)
        if (sh->lat[i] > 0)
            samples_add(&s, sh->lat[i]);
    samples_sort(&s);
    ho_report("rlock", &s, atomic_load(&sh->errors), out);
    samples_free(&s);
    munmap(sh, sizeof *sh + (size_t)n * sizeof(uint64_t));
}

void bench_handoff_floor(const h_cluster *c, int mode, long n, ho_result *out) {
    char name[64], acquire_sha[41], release_sha[41], uuid[37];
    uuid_t u;
    snprintf(name, sizeof name, "bench:cl:floor:%d:%d", (int)getpid(), mode);
    h_server *m = owner_in(c, name);
    redisContext *mc = raw_connect(h_server_url(m));
    if (mc == NULL ||
        raw_load_script(mc, rlock__script_body(RLOCK__SCRIPT_ACQUIRE), acquire_sha) < 0 ||
        raw_load_script(mc, rlock__script_body(RLOCK__SCRIPT_RELEASE), release_sha) < 0)
        die("%s", "SCRIPT LOAD failed");
    redisFree(mc);
    uuid_generate(u);
    uuid_unparse_lower(u, uuid);
    int sharded = mode == RLOCK_PUBSUB_SHARDED;
    floor_cfg f = {.cmd_url = h_server_url(m), .sub_url = h_server_url(m),
                   .subscribe = sharded ? "SSUBSCRIBE" : "SUBSCRIBE",
                   .publish = sharded ? "spublish" : "publish", .acquire_sha = acquire_sha,
                   .release_sha = release_sha, .key = name, .uuid = uuid};
    fprintf(stderr, "handoff (raw floor, %s): %ld hand-offs between two processes, lock on :%d\n",
            mode_name(mode), n, h_server_port(m));
    samples s = {0};
    long errors = floor_handoffs(&f, n, &s);
    ho_report("floor", &s, errors, out);
    samples_free(&s);
}
