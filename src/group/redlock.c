/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock.c - the Redlock algorithm (antirez, "Distributed Locks with
 * Redis"): one lock name on n independent masters -- a client each --, held
 * when a majority (n/2 + 1) holds it, for a validity time that subtracts the
 * time the attempt took and an allowance for clock drift.
 *
 * An attempt is one fan-out (group.c): the ACQUIRE of Redisson's RLock hash
 * (so Redisson's RedissonRedLock over the same name and masters excludes
 * and is excluded) is written to every master before any reply is read, so
 * it costs about one round trip whatever n. Each reply is awaited until the
 * lease minus the drift allowance has gone (after that no validity could be
 * left) and never longer than the clients' smallest command_timeout_ms.
 *
 *   validity = lease - (end of the attempt - its start) - drift,
 *   drift    = lease / 100 + 2 ms   (antirez's reference implementation)
 *
 * With a quorum and validity > 0 the holds are booked (a master whose
 * reply was lost is booked "unsure": the next unlock settles it). Without,
 * every master that took a hold, or whose reply was lost, is sent a RELEASE
 * at once, and the attempt is tried again after a random, growing pause
 * while the wait lasts. Unlock sends RELEASE to every master at once.
 *
 * Threads: application threads, inside the API layer's call guards.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "group.h"

long long rlock__redlock_drift(long long lease_ms) {
    return lease_ms / 100 + 2;
}

/* A master and the server it reaches ("host:port": every database of a server is one master). */
typedef struct server_of {
    const rlock *lock;
    char at[RLOCK__WHERE_MAX];
} server_of;

static int by_server(const void *a, const void *b) {
    return strcmp(((const server_of *)a)->at, ((const server_of *)b)->at);
}

int rlock__redlock_check(rlock *const *masters, size_t n) {
    server_of *s = rlock__malloc(n * sizeof(*s));
    int status = RLOCK_OK;
    if (s == NULL)
        return RLOCK_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        s[i].lock = masters[i];
        rlock__net_server(masters[i]->engine->net, masters[i]->name, masters[i]->name_len,
                          s[i].at, sizeof(s[i].at));
    }
    qsort(s, n, sizeof(*s), by_server);
    for (size_t i = 1; i < n && status == RLOCK_OK; i++)
        if (strcmp(s[i - 1].at, s[i].at) == 0)
            status = rlock__fail(RLOCK_EINVAL, 0, "redlock '%.200s': the server at %s is given "
                                                  "twice (one client twice, two of its "
                                                  "databases, or two names of its address): "
                                                  "one server is one master", s[i].lock->name,
                                 s[i].at);
    rlock__free(s);
    return status;
}

/* What one attempt found. */
typedef struct tally {
    size_t held, busy, unreachable, refused;
    int refusal;                /* the first refusal's status */
    int closed;                 /* a client closed meanwhile */
    char failure[256];          /* the last failure's message, if a master failed */
    long long lease_bound_ms;   /* the reply bound when the lease set it (lease - drift,
                                   under the command timeout), else 0 */
    rlock__error_detail refused_first; /* the first refusing master's detail */
} tally;

/* Counts what the masters answered (t->refused_first is the fan-out's). */
static void count(const rlock__fanned *m, size_t n, tally *t) {
    t->held = t->busy = t->unreachable = t->refused = 0;
    t->refusal = RLOCK_OK;
    t->closed = 0;
    t->failure[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        switch (m[i].status) {
        case RLOCK_OK: t->held++; break;
        case RLOCK_BUSY:
        case RLOCK_ELOST: t->busy++; break; /* it answered; our old hold there was gone */
        case RLOCK_EIO: t->unreachable++; break;
        case RLOCK_ECLOSED: t->closed = 1; break;
        default:
            if (t->refused++ == 0)
                t->refusal = m[i].status;
        }
    }
    if (t->unreachable > 0 || t->refused > 0)
        snprintf(t->failure, sizeof(t->failure), "%s", rlock__last_message());
}

/* Random in [d/2, d], d = first doubling `times` times, capped at most. */
static long long jittered(long long first, int times, long long most, unsigned *seed) {
    long long d = first;
    for (int i = 0; i < times && d < most; i++)
        d *= 2;
    d = d > most ? most : d;
    return d / 2 + rand_r(seed) % (d / 2 + 1);
}

/* Sleeps until until_ms; a cancellation point when the caller's state allows one. */
static void pause_until(int64_t until_ms, const rlock__call *call) {
    int ignored;
    struct timespec ts = {.tv_sec = (time_t)(until_ms / 1000),
                          .tv_nsec = (long)(until_ms % 1000) * 1000000L};
    pthread_cleanup_push(call->on_cancel, call->arg);
    if (call->cancel_state == PTHREAD_CANCEL_ENABLE)
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &ignored);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    pthread_cleanup_pop(0);
}

/* The outcome of a wait that ends without the lock, with what the last attempt found. */
static int no_quorum(const rlock *lock, size_t n, const tally *t, long long validity_ms) {
    size_t quorum = n / 2 + 1;
    char why[160];
    snprintf(why, sizeof(why), "held on %zu, busy on %zu, unreachable on %zu, refused by %zu of "
                               "%zu masters (quorum %zu)",
             t->held, t->busy, t->unreachable, t->refused, n, quorum);
    if (t->held >= quorum)
        return rlock__fail(RLOCK_BUSY, 0, "redlock '%.200s': %s, but the attempt took too long: "
                                          "validity %lld ms", lock->name, why, validity_ms);
    if (t->refused > n - quorum) /* the first refusing master's words and Redis text */
        return rlock__fail_redis(t->refusal, t->refused_first.redis_error,
                                 "redlock '%.200s': %s; the first refusal: %s", lock->name, why,
                                 t->refused_first.message);
    if (t->held + t->busy >= quorum)
        return rlock__fail(RLOCK_BUSY, 0, "redlock '%.200s': %s", lock->name, why);
    if (t->lease_bound_ms > 0) /* the lease, not the master, may be the trouble */
        return rlock__fail(RLOCK_EIO, 0, "redlock '%.200s': %s; replies were awaited %lld ms "
                                         "(lease - drift: a lease this short leaves little time "
                                         "for a round trip); a failure: %s", lock->name, why,
                           t->lease_bound_ms, t->failure);
    return rlock__fail(RLOCK_EIO, 0, "redlock '%.200s': %s; a failure: %s", lock->name, why,
                       t->failure);
}

/* Whether a master's client is closing (the call ends: RLOCK_ECLOSED). */
static int closing(rlock *const *masters, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (rlock__net_closing(masters[i]->engine->net))
            return 1;
    return 0;
}

/*
 * The clients' retry settings, for rounds without a reachable majority: as
 * many in a row as the most retry_attempts, paused as a re-send would be
 * (50 ms doubling up to the longest retry_interval_ms).
 */
static void retry_settings(rlock *const *masters, size_t n, int *attempts, int *interval_ms) {
    *attempts = 0;
    *interval_ms = 0;
    for (size_t i = 0; i < n; i++) {
        const rlock__settings *s = masters[i]->engine->settings;
        *attempts = s->retry_attempts > *attempts ? s->retry_attempts : *attempts;
        *interval_ms = s->retry_interval_ms > *interval_ms ? s->retry_interval_ms : *interval_ms;
    }
}

/*
 * The pause before the next attempt: after a round that reached a majority
 * (others hold it), random in 2.5..100 ms, growing with the rounds, so
 * contenders fall out of step; without a majority, as a re-send's.
 */
static long long pause_ms(int round, int unreachable_rounds, int interval_ms, unsigned *seed) {
    if (unreachable_rounds == 0)
        return jittered(5, round, 100, seed);
    return interval_ms < 2 ? interval_ms : jittered(50, unreachable_rounds - 1, interval_ms, seed);
}

/*
 * One attempt: RLOCK_OK with *validity_ms (the holds booked), else every
 * hold it took given back, *t what it found, and RLOCK_BUSY.
 */
static int attempt(rlock__fanned *m, rlock *const *masters, size_t n, const rlock__owner *owner,
                   long long lease_ms, int64_t wait_start_us, tally *t, long long *validity_ms) {
    long long drift = rlock__redlock_drift(lease_ms);
    long long bound = rlock__fan_timeout(masters, n);
    if (lease_ms - drift < bound)
        bound = lease_ms - drift;
    for (size_t i = 0; i < n; i++)
        m[i].lock = masters[i];
    int64_t start_ms = rlock__now_ms();
    /* A quorum held is all the attempt needs: the slowest masters are not waited for (their
       holds, if they take them, are booked unsure: the unlock releases them). */
    int status = rlock__fan_acquire(m, n, owner, lease_ms, n / 2 + 1, start_ms + bound,
                                    &t->refused_first);
    *validity_ms = lease_ms - (rlock__now_ms() - start_ms) - drift;
    count(m, n, t);
    t->lease_bound_ms = bound < rlock__fan_timeout(masters, n) ? bound : 0;
    if (status == RLOCK_OK && t->held >= n / 2 + 1 && *validity_ms > 0 && !t->closed) {
        rlock__fan_keep(m, n, owner, lease_ms, wait_start_us);
        return RLOCK_OK;
    }
    rlock__fan_undo(m, n, owner, rlock__deadline_after(bound));
    return status == RLOCK_OK ? RLOCK_BUSY : status;
}

/* An acquisition's memory, and the API's cleanup, for a thread cancelled in a pause. */
typedef struct acquiring {
    rlock__fanned *m;           /* owned */
    const rlock__call *call;
} acquiring;

static void cancelled(void *arg) {
    acquiring *a = arg;
    rlock__free(a->m); /* a pause holds nothing: every try of the round was ended */
    a->call->on_cancel(a->call->arg);
}

int rlock__redlock_acquire(rlock *const *masters, size_t n, const rlock__owner *owner,
                           long long wait_ms, long long lease_ms, const rlock__call *call,
                           long long *validity_ms) {
    int64_t deadline_ms = rlock__deadline_after(wait_ms);
    rlock__fanned *m = rlock__calloc(n, sizeof(*m));
    acquiring a = {.m = m, .call = call};
    rlock__call pause_call = {.cancel_state = call->cancel_state, .on_cancel = cancelled,
                              .arg = &a};
    unsigned seed = (unsigned)rlock__now_ms() ^ (unsigned)owner->id;
    int64_t start_us = rlock__now_us(); /* an attempt after the first has waited since */
    int unreachable_rounds = 0, status = RLOCK_ENOMEM;
    for (int round = 0; m != NULL; round++) {
        tally t;
        int closed = closing(masters, n);
        if (!closed) {
            status = attempt(m, masters, n, owner, lease_ms, round == 0 ? 0 : start_us, &t,
                             validity_ms);
            closed = status == RLOCK_BUSY && t.closed;
        }
        if (closed) {
            status = rlock__fail(RLOCK_ECLOSED, 0, "redlock '%.200s': a client closed",
                                 masters[0]->name);
            break;
        }
        if (status != RLOCK_BUSY)
            break; /* held, or out of memory */
        int attempts, interval_ms;
        retry_settings(masters, n, &attempts, &interval_ms);
        unreachable_rounds = t.held + t.busy < n / 2 + 1 ? unreachable_rounds + 1 : 0;
        int64_t resume_ms =
            rlock__now_ms() + pause_ms(round, unreachable_rounds, interval_ms, &seed);
        if (rlock__now_ms() >= deadline_ms || t.refused > n - (n / 2 + 1) ||
            unreachable_rounds > attempts) {
            status = no_quorum(masters[0], n, &t, *validity_ms);
            break;
        }
        /* The last attempt is made at the end of the wait. */
        pause_until(resume_ms < deadline_ms ? resume_ms : deadline_ms, &pause_call);
    }
    rlock__free(m);
    return status;
}

/* ---- unlock -------------------------------------------------------------------------- */

/* What one master's RELEASE did. */
enum { WAS_NOT_HELD, RELEASED, UNKNOWN, REFUSED };

/*
 * Books a RELEASE's outcome (status, reply) for lock, whose hold was *held
 * (booked; acquired_us, unsure) before the unlock; returns what it did, and
 * for a refusal its status in *refusal. The statistics count an unlock for
 * a hold released, and for one booked unsure that Redis did not have (its
 * acquisition was counted).
 */
static int book_release(rlock *lock, const rlock__owner *owner, int status,
                        const redisReply *reply, const rlock__hold_info *held, int *refusal) {
    rlock__holds *holds = &lock->engine->holds;
    rlock__hold_key key = rlock__hold_of(lock, owner);
    rlock__release_answer answer = {.read = 0};
    char at[RLOCK__WHERE_MAX], what[RLOCK__WHERE_MAX + 240];
    if ((status == RLOCK_OK || status == RLOCK_ENOREPL) && reply->type == REDIS_REPLY_ERROR) {
        snprintf(what, sizeof(what), "redlock '%.200s': RELEASE at %s", lock->name,
                 rlock__net_server(lock->engine->net, lock->name, lock->name_len, at,
                                   sizeof(at)));
        status = rlock__fail_reply(reply, what);
    } else if (status == RLOCK_OK || status == RLOCK_ENOREPL) {
        status = rlock__read_release(reply, &answer);
    }
    if (status == RLOCK_EIO) {
        rlock__holds_released(holds, &key, RLOCK__RELEASE_UNKNOWN);
        return UNKNOWN; /* unlocking again completes it */
    }
    if (!answer.read) {
        rlock__holds_released(holds, &key, -2);
        *refusal = status;
        return REFUSED; /* Redis unchanged: still held there until its lease ends */
    }
    if (answer.gone || answer.stale) {
        /* Not there: expired, the master restarted, or an acquisition that never ran. */
        rlock__holds_forget(holds, &key);
        if (held->unsure)
            rlock__count_released(lock, -1, 0);
        return WAS_NOT_HELD;
    }
    rlock__holds_released(holds, &key, answer.count);
    rlock__count_released(lock, answer.count, held->acquired_us);
    return RELEASED;
}

/*
 * The unlock's status from what each master did (did[WAS_NOT_HELD..REFUSED]);
 * *first is the first refusing master's detail (if did[REFUSED] > 0), else
 * the last failure is the thread's.
 */
static int unlocked(const rlock *lock, size_t n, const size_t *did,
                    const rlock__error_detail *first) {
    size_t quorum = n / 2 + 1, maybe_held = did[UNKNOWN] + did[REFUSED];
    char failure[RLOCK__MESSAGE_MAX];
    if (maybe_held > n - quorum) {
        snprintf(failure, sizeof(failure), "%s",
                 did[REFUSED] > 0 ? first->message : rlock__last_message());
        return rlock__fail_redis(did[REFUSED] > 0 ? first->status : RLOCK_EIO,
                                 did[REFUSED] > 0 ? first->redis_error : "",
                                 "redlock '%.200s': released on %zu of %zu masters, unknown on "
                                 "%zu, refused by %zu: another owner cannot take it yet; unlock "
                                 "again (%s)", lock->name, did[RELEASED], n, did[UNKNOWN],
                                 did[REFUSED], failure);
    }
    if (did[RELEASED] + maybe_held < quorum)
        return rlock__fail(RLOCK_ENOTOWNER, 0, "redlock '%.200s': the calling thread held it on "
                                               "%zu of %zu masters at unlock, fewer than the "
                                               "quorum %zu (its validity had run out, or masters "
                                               "lost it); those holds are released",
                           lock->name, did[RELEASED] + maybe_held, n, quorum);
    return RLOCK_OK;
}

/*
 * One RELEASE on every master where owner has a hold (the fan-out): the
 * unlock's status by what the masters did; *believed is the most holds the
 * owner had on one master before it (0 if none was sent).
 */
static int release_round(rlock *const *masters, size_t n, const rlock__owner *owner,
                         long long *believed) {
    size_t did[4] = {0, 0, 0, 0};
    int refusal = RLOCK_OK;
    rlock__error_detail first = {.status = RLOCK_OK};
    rlock__lock_cmd *cmds = rlock__malloc(n * sizeof(*cmds));
    rlock__cmd *plain = rlock__malloc(n * sizeof(*plain));
    rlock__net **nets = rlock__malloc(n * sizeof(*nets));
    redisReply **replies = rlock__calloc(n, sizeof(*replies));
    int *statuses = rlock__malloc(n * sizeof(*statuses));
    size_t *master = rlock__malloc(n * sizeof(*master));
    rlock__hold_info *held = rlock__malloc(n * sizeof(*held)); /* before the unlock, as sent */
    int k = 0, status = RLOCK_ENOMEM;
    if (cmds != NULL && plain != NULL && nets != NULL && replies != NULL && statuses != NULL &&
        master != NULL && held != NULL) {
        for (size_t i = 0; i < n; i++) {
            rlock *lock = masters[i];
            rlock__hold_info info;
            rlock__hold_key key = rlock__hold_of(lock, owner);
            /* Nothing known (never taken there), or its lease ran out: nothing to send. */
            if (rlock__holds_get(&lock->engine->holds, &key, rlock__now_ms(), &info) !=
                RLOCK__HOLD_HELD) {
                rlock__holds_forget(&lock->engine->holds, &key);
                did[WAS_NOT_HELD]++;
                continue;
            }
            long long expected = info.count;
            if (expected > *believed)
                *believed = expected;
            rlock__holds_begin_release(&lock->engine->holds, &key);
            rlock__release_cmd(&cmds[k], lock, owner->id, expected);
            plain[k] = cmds[k].cmd;
            nets[k] = lock->engine->net;
            held[k] = info;
            master[k++] = i;
        }
        int64_t deadline_ms = rlock__deadline_after(rlock__fan_timeout(masters, n));
        status = k == 0 ? RLOCK_OK
                        : rlock__exec_fanout(nets, plain, k, deadline_ms, replies, statuses, NULL);
        for (int j = 0; j < k; j++) {
            int what = book_release(masters[master[j]], owner,
                                    status == RLOCK_OK ? statuses[j] : status, replies[j],
                                    &held[j], &refusal);
            if (what == REFUSED && did[REFUSED] == 0) {
                rlock__error_save(&first);
                first.status = refusal; /* the status the unlock reports for it */
            }
            did[what]++;
        }
        status = unlocked(masters[0], n, did, &first);
    }
    for (int j = 0; replies != NULL && j < k; j++)
        if (replies[j] != NULL)
            freeReplyObject(replies[j]);
    rlock__free(held);
    rlock__free(master);
    rlock__free(statuses);
    rlock__free(replies);
    rlock__free(nets);
    rlock__free(plain);
    rlock__free(cmds);
    return status;
}

/* A lost Redlock's holds left on a minority of masters go in at most this many rounds. */
#define MAX_LEFTOVER_ROUNDS 64

/* Whether the holds tables still show a hold of owner on one of the masters. */
static int held_somewhere(rlock *const *masters, size_t n, const rlock__owner *owner) {
    for (size_t i = 0; i < n; i++) {
        rlock__hold_key key = rlock__hold_of(masters[i], owner);
        if (rlock__holds_expected(&masters[i]->engine->holds, &key) > 0)
            return 1;
    }
    return 0;
}

/*
 * An unlock that finds the hold on fewer than a quorum: the Redlock is
 * lost. If the owner held it more than once (a reentrant hold), its holds
 * left on the other masters are given back too, and the unlock says
 * RLOCK_ELOST -- as a single lock's unlock that would have left its owner
 * holding does -- so that an owner that stops unlocking leaves nothing
 * behind for a lease.
 */
int rlock__redlock_release(rlock *const *masters, size_t n, const rlock__owner *owner) {
    long long believed = 0, ignored = 0;
    int status = release_round(masters, n, owner, &believed);
    if (status != RLOCK_ENOTOWNER || believed < 2 || !held_somewhere(masters, n, owner))
        return status;
    for (int i = 0; i < MAX_LEFTOVER_ROUNDS && held_somewhere(masters, n, owner); i++)
        release_round(masters, n, owner, &ignored);
    return rlock__fail(RLOCK_ELOST, 0, "redlock '%.200s': held on fewer than a quorum of its %zu "
                                       "masters at an unlock that would have left %lld holds (its "
                                       "validity had run out, or masters lost it); the holds left "
                                       "on the others are given back: it holds nothing now",
                       masters[0]->name, n, believed - 1);
}
