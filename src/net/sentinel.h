/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel.h - the Sentinel route's own parts, shared by route_sentinel.c
 * (the route's operations and its monitor thread) and sentinel_resolve.c
 * (asking the sentinels, confirming and adopting a master). Only the net
 * layer sees it.
 */
#ifndef RLOCK_SENTINEL_H
#define RLOCK_SENTINEL_H

#include "route.h"

#define PROVISIONAL_MS 10000    /* a promotion no sentinel confirms by then was a wrong guess */
#define RLOCK__EVENT_SENTINELS 4 /* sentinels whose failover events the monitor hears */
#define SENTINEL_TIMEOUT_MS 1000 /* each step with one sentinel: a dead one costs little */
#define QUIET_MS 10000           /* a sentinel that timed out is asked again after this */
#define POLL_INTERVAL_MS 1000    /* ask the sentinels this often, +switch-master or not */
#define MONITOR_TICK_MS 100      /* the monitor looks at suspect() requests this often */
#define REPORT_MAX 600

typedef struct rlock__sentinel {
    rlock__route base;
    const rlock__route_env *env;
    char *master_name;                 /* owned */
    rlock__endpoint master_auth;       /* user, password, db for the master; owned */
    char *sentinel_user;               /* owned, or NULL */
    char *sentinel_password;           /* owned, or NULL */
    _Atomic(rlock__node *) master;     /* owned; NULL only before the first resolve */
    atomic_llong epoch;                /* the sentinels' config-epoch of that master */
    pthread_mutex_t mutex;             /* guards the fields below */
    rlock__endpoint sentinels[RLOCK__MAX_SENTINELS];
    /* A sentinel that did not answer in time (paused, cut off) is left out of
       the resolves and polls (unless every one is) and subscriptions until
       then: a resolve asks every sentinel, and one that hangs would cost the
       monitor a second each time it is asked. */
    int64_t quiet_until[RLOCK__MAX_SENTINELS];
    int nsentinels;
    int first;                         /* the sentinel that answered last */
    int poll_next;                     /* the sentinel the next poll asks first */
    rlock__node **retired;             /* owned: former masters' nodes */
    size_t nretired;
    pthread_mutex_t resolve_mutex;     /* one resolve at a time (the monitor, and open
                                          before the monitor starts) */
    atomic_int resolve_wanted;         /* suspect() asks the monitor to resolve */
    atomic_int closing;                /* abort began: no more resolving */
    rlock__worker monitor;             /* its mutex guards only stop */
    int64_t provisional_until;         /* guarded by resolve_mutex: a master adopted on
                                          promotion, before any sentinel named it, whose
                                          epoch guard holds until then unless confirmed */
    redisContext *events[RLOCK__EVENT_SENTINELS]; /* subscriptions: monitor thread only */
    int64_t next_watch_ms;             /* monitor only: when to (re)subscribe next */
    char promoting_host[256];          /* monitor only: the replica a sentinel is promoting */
    int promoting_port;
    int64_t promoting_until;           /* monitor only: 0 = none */
    redisContext *promoting;           /* monitor only: kept to ask that replica's ROLE */
} rlock__sentinel;

/* What a sentinel says of the master (or what a promotion event suggests). */
typedef struct rlock__sentinel_answer {
    char host[256];
    int port;
    long long epoch;    /* config-epoch: grows with each failover */
} rlock__sentinel_answer;

/*
 * Takes the master named in a if it is new, of an epoch not older than the
 * one in use, and confirms itself (ROLE, scripts). provisional: adopted on
 * a promotion event, before the sentinels name it (its epoch is a guess:
 * one above the old). Call with resolve_mutex held.
 */
int rlock__sentinel_adopt(rlock__sentinel *r, const rlock__sentinel_answer *a, int provisional);
/*
 * Asks every sentinel, takes the master named under the highest config
 * epoch, and adopts it if it confirms itself (ROLE, scripts) and the
 * sentinels still name it after that (else their new choice, a few times);
 * a switch tells the net's listener and posts MASTER_SWITCHED. A master in
 * use that they no longer name, their new one not adoptable, is left (its
 * pool fenced) all the same. On failure,
 * with what each said in report: RLOCK_EREDIS only if every sentinel that
 * answered knows no such master; RLOCK_EIO if one could not be reached, is
 * in the middle of a failover, or names a master that cannot be used yet;
 * a refusal that stays (RLOCK_EAUTH, RLOCK_ENOPERM, ...) before both. Call
 * with resolve_mutex held.
 */
int rlock__sentinel_resolve(rlock__sentinel *r, char *report, size_t size);
/*
 * The monitor's steady-state poll: asks one sentinel (the next in turn after
 * the one that answered the last poll; if it fails, the one after it, ...)
 * and, if it names another master than the one in use or another config
 * epoch, resolves (asks every sentinel). Resolves at once if the master in
 * use was left or is a provisional promotion no sentinel confirmed yet.
 * Status and report as rlock__sentinel_resolve's. Call with resolve_mutex
 * held.
 */
int rlock__sentinel_poll(rlock__sentinel *r, char *report, size_t size);
/*
 * Whether sentinel k timed out lately (quiet_until): polls and subscriptions
 * leave it alone until then. rlock__sentinel_heard notes how asking it,
 * begun at asked_ms, ended (status).
 */
int rlock__sentinel_quiet(rlock__sentinel *r, int k);
void rlock__sentinel_heard(rlock__sentinel *r, int k, int status, int64_t asked_ms);
/*
 * A copy of sentinel i (counted from the last responsive one if from_first,
 * else from the start of the list) with the sentinel credentials.
 */
int rlock__sentinel_at(rlock__sentinel *r, int i, int from_first, rlock__endpoint *ep);

#endif /* RLOCK_SENTINEL_H */
