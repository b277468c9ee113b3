/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * floor.h - the floor of a cross-process hand-off, in raw hiredis: what no
 * lock client can beat on this machine. bench_baseline --handoff (one
 * server) and bench_cluster (the lock's master, sharded and classic pub/sub)
 * measure it beside rlock's hand-off.
 *
 * Two processes pass one lock back and forth with rlock's own scripts
 * (the caller loads them). Each has a command connection to the lock's
 * server and a connection subscribed to a channel of its own; the waiter
 * runs the acquire script, and while it is busy blocks reading its
 * subscription; the holder's release script publishes to the waiter's
 * channel (PUBLISH or SPUBLISH, as the caller says); the woken waiter runs
 * the acquire script again. Two round trips and one message, no threads in
 * between. Latency: from just before the holder's release call to the
 * return of the waiter's successful acquire (CLOCK_MONOTONIC, shared
 * memory); the holder waits 1 ms after the waiter's first attempt, so the
 * waiter is asleep on its channel, as in bench_rlock handoff. The
 * connections are hiredis's blocking ones, or whatever floor_cfg.transport
 * makes (bench_tls: OpenSSL and hiredis's reader, the TLS floor).
 *
 * Header-only (static inline), like bench.h: each program compiles it.
 */
#ifndef RLOCK_BENCH_FLOOR_H
#define RLOCK_BENCH_FLOOR_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "bench/bench.h"

/*
 * How a party talks to the server: blocking connections, a command and its
 * reply, the next message pushed on a subscribed connection.
 */
typedef struct floor_transport {
    void *(*open)(const void *arg, const char *url);
    redisReply *(*command)(void *conn, int argc, const char **argv, const size_t *len);
    redisReply *(*next_message)(void *conn);
    void (*close)(void *conn);
    const void *arg; /* open's */
} floor_transport;

static inline void *floor_hiredis_open(const void *arg, const char *url) {
    (void)arg;
    return raw_connect(url);
}

static inline redisReply *floor_hiredis_command(void *conn, int argc, const char **argv,
                                                const size_t *len) {
    return redisCommandArgv(conn, argc, argv, len);
}

static inline redisReply *floor_hiredis_next_message(void *conn) {
    void *msg = NULL;
    return redisGetReply(conn, &msg) == REDIS_OK ? msg : NULL;
}

static inline void floor_hiredis_close(void *conn) {
    redisFree(conn);
}

static const floor_transport floor_hiredis = {floor_hiredis_open, floor_hiredis_command,
                                              floor_hiredis_next_message, floor_hiredis_close,
                                              NULL};

/* Where and how: filled by the caller. */
typedef struct floor_cfg {
    const char *cmd_url;      /* the lock's server (its master) */
    const char *sub_url;      /* where the waiters subscribe */
    const char *subscribe;    /* "SUBSCRIBE" or "SSUBSCRIBE" */
    const char *publish;      /* the release script's verb: "publish" or "spublish" */
    const char *acquire_sha;  /* rlock's scripts, loaded at cmd_url */
    const char *release_sha;
    const char *key;          /* the lock; its channels are "redisson_lock__channel:{key}:0/1" */
    const char *uuid;         /* the owners are "<uuid>:1" and "<uuid>:2" */
    const floor_transport *transport; /* NULL: floor_hiredis */
} floor_cfg;

/* Shared by the two processes. */
typedef struct floor_shm {
    atomic_long ready, go, waiting, got, errors;
    _Atomic uint64_t released_ns;
    long n;
    uint64_t lat[];
} floor_shm;

/* One party: a command connection and a connection subscribed to its own channel. */
typedef struct floor_party {
    floor_shm *sh;
    const floor_transport *t;
    void *cmd, *sub;
    int me;
    const char *acq_argv[9], *rel_argv[8];
    size_t acq_len[9], rel_len[8];
    char owner[64], mine[128], peers[128];
} floor_party;

static inline void floor_set_args(const char **argv, size_t *len, int n, const char *const *src) {
    for (int i = 0; i < n; i++) {
        argv[i] = src[i];
        len[i] = strlen(src[i]);
    }
}

/*
 * An uncontended raw client's lock + unlock of a key of its own with the
 * library's ACQUIRE and RELEASE (bench_baseline's plaintext floor, bench_tls's
 * TLS one): the arguments, made once; the cycle, over whatever sends a
 * command on the client's connection.
 */
typedef struct floor_cycle {
    char key[64], channel[96], owner[64];
    const char *acq_argv[9], *rel_argv[8];
    size_t acq_len[9], rel_len[8];
} floor_cycle;

/* The key "<prefix>:<pid>:<index>", its channel, the owner "<uuid>:<index + 1>". */
static inline void floor_cycle_init(floor_cycle *c, const char *prefix, int index,
                                    const char *uuid, const char *acquire_sha,
                                    const char *release_sha) {
    snprintf(c->key, sizeof c->key, "%s:%d:%d", prefix, (int)getpid(), index);
    snprintf(c->channel, sizeof c->channel, "redisson_lock__channel:{%s}", c->key);
    snprintf(c->owner, sizeof c->owner, "%s:%d", uuid, index + 1);
    const char *acq[] = {"EVALSHA", acquire_sha, "1", c->key, "30000", c->owner, "0",
                         c->channel, "publish"};
    const char *rel[] = {"EVALSHA", release_sha, "1",       c->key,
                         c->owner,  "1",         c->channel, "publish"};
    floor_set_args(c->acq_argv, c->acq_len, 9, acq);
    floor_set_args(c->rel_argv, c->rel_len, 8, rel);
}

typedef redisReply *(*floor_send)(void *conn, int argc, const char **argv, const size_t *len);

/* One lock + unlock; 0 if the replies mean "acquired 1" and "released", else -1. */
static inline int floor_cycle_run(floor_cycle *c, floor_send send, void *conn) {
    redisReply *r = send(conn, 9, c->acq_argv, c->acq_len);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->integer == 1 && r->element[1]->integer == 1;
    if (r)
        freeReplyObject(r);
    if (!ok)
        return -1;
    r = send(conn, 8, c->rel_argv, c->rel_len);
    ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Runs the acquire script; returns 1 acquired, 0 held by the other, -1 error. */
static inline int floor_acquire(floor_party *p) {
    redisReply *r = p->t->command(p->cmd, 9, p->acq_argv, p->acq_len);
    int got = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? (int)r->element[0]->integer : -1;
    if (r)
        freeReplyObject(r);
    return got == 1 ? 1 : got == 0 ? 0 : -1;
}

static inline int floor_release(floor_party *p) {
    redisReply *r = p->t->command(p->cmd, 8, p->rel_argv, p->rel_len);
    int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static inline int floor_open(floor_party *p, const floor_cfg *cfg) {
    snprintf(p->owner, sizeof p->owner, "%s:%d", cfg->uuid, p->me + 1);
    snprintf(p->mine, sizeof p->mine, "redisson_lock__channel:{%s}:%d", cfg->key, p->me);
    snprintf(p->peers, sizeof p->peers, "redisson_lock__channel:{%s}:%d", cfg->key, 1 - p->me);
    const char *acq[] = {"EVALSHA", cfg->acquire_sha, "1", cfg->key, "30000", p->owner, "0",
                         p->peers, cfg->publish};
    const char *rel[] = {"EVALSHA", cfg->release_sha, "1",      cfg->key,
                         p->owner,  "1",              p->peers, cfg->publish};
    floor_set_args(p->acq_argv, p->acq_len, 9, acq);
    floor_set_args(p->rel_argv, p->rel_len, 8, rel);
    p->t = cfg->transport != NULL ? cfg->transport : &floor_hiredis;
    p->cmd = p->t->open(p->t->arg, cfg->cmd_url);
    p->sub = p->t->open(p->t->arg, cfg->sub_url);
    if (p->cmd == NULL || p->sub == NULL)
        return -1;
    const char *sub[] = {cfg->subscribe, p->mine};
    size_t sub_len[] = {strlen(sub[0]), strlen(sub[1])};
    redisReply *r = p->t->command(p->sub, 2, sub, sub_len);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static inline void floor_close(floor_party *p) {
    if (p->cmd)
        p->t->close(p->cmd);
    if (p->sub)
        p->t->close(p->sub);
}

static inline void floor_wait(floor_party *p, long i) {
    floor_shm *sh = p->sh;
    atomic_store(&sh->waiting, i + 1);
    int got = floor_acquire(p);
    while (got == 0) { /* held: sleep on the channel until the release message */
        redisReply *msg = p->t->next_message(p->sub);
        if (msg == NULL)
            break;
        freeReplyObject(msg);
        got = floor_acquire(p);
    }
    if (got != 1) {
        atomic_fetch_add(&sh->errors, 1);
        return;
    }
    sh->lat[i] = raw_now_ns() - atomic_load(&sh->released_ns);
    atomic_store(&sh->got, i + 1);
}

static inline void floor_hand_over(floor_party *p, long i) {
    floor_shm *sh = p->sh;
    while (atomic_load(&sh->waiting) != i + 1 && atomic_load(&sh->errors) == 0)
        raw_sleep_ms(0.02);
    raw_sleep_ms(1); /* the waiter is asleep on its channel by now */
    atomic_store(&sh->released_ns, raw_now_ns());
    if (floor_release(p) < 0)
        atomic_fetch_add(&sh->errors, 1);
    while (atomic_load(&sh->got) != i + 1 && atomic_load(&sh->errors) == 0)
        raw_sleep_ms(0.5);
}

static inline void floor_wait_for(atomic_long *v, long want, atomic_long *errors) {
    while (atomic_load(v) < want && atomic_load(errors) == 0)
        raw_sleep_ms(0.1);
}

/* Party 1 holds first (once both are subscribed); hand-off i goes to party i % 2. */
static inline void floor_party_run(floor_party *p) {
    floor_shm *sh = p->sh;
    atomic_fetch_add(&sh->ready, 1);
    floor_wait_for(&sh->ready, 2, &sh->errors);
    if (p->me == 1) {
        if (floor_acquire(p) != 1)
            atomic_fetch_add(&sh->errors, 1);
        atomic_store(&sh->go, 1);
    }
    floor_wait_for(&sh->go, 1, &sh->errors);
    for (long i = 0; i < sh->n && atomic_load(&sh->errors) == 0; i++) {
        if (i % 2 == p->me)
            floor_wait(p, i);
        else
            floor_hand_over(p, i);
    }
    if ((sh->n - 1) % 2 == p->me)
        floor_release(p);
}

/*
 * n hand-offs between this process and a child. Fills *lat (sorted, ns)
 * and returns the count of errors (0: all went as expected).
 */
static inline long floor_handoffs(const floor_cfg *cfg, long n, samples *lat) {
    floor_shm *sh = shared_alloc(sizeof *sh + (size_t)n * sizeof(uint64_t));
    sh->n = n;
    pid_t child = fork_child();
    if (child < 0) {
        munmap(sh, sizeof *sh + (size_t)n * sizeof(uint64_t));
        return 1;
    }
    floor_party p = {.sh = sh, .me = child == 0 ? 1 : 0};
    if (floor_open(&p, cfg) < 0)
        atomic_fetch_add(&sh->errors, 1);
    floor_party_run(&p);
    floor_close(&p);
    if (child == 0)
        _exit(atomic_load(&sh->errors) ? 1 : 0);
    int ws;
    if (waitpid(child, &ws, 0) != child || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        atomic_fetch_add(&sh->errors, 1);
    for (long i = 0; i < n; i++)
        if (sh->lat[i] > 0)
            samples_add(lat, sh->lat[i]);
    samples_sort(lat);
    long errors = atomic_load(&sh->errors);
    munmap(sh, sizeof *sh + (size_t)n * sizeof(uint64_t));
    return errors;
}

#endif /* RLOCK_BENCH_FLOOR_H */
