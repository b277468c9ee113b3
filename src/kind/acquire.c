/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * acquire.c - lock and try_lock for every lock kind: one attempt, and if
 * the lock is busy, waiting for it.
 *
 * An uncontended lock is one round trip (the kind's attempt) and nothing
 * else. A contended acquire joins the lock's channel, then alternates "try
 * once" with a sleep bounded by min(lock TTL, time left) that an unlock
 * message cuts short (engine/waiters.c). A waiter may also get the lock
 * without an attempt of its own: handed over by a releasing thread of this
 * client (release.c), or taken by its attempt sent ahead by the subscriber
 * thread. A thread that calls lock while threads of this client wait queues
 * behind them rather than racing them (docs/design.md section 4).
 *
 * Each attempt carries the hold count the owner believes it has, so a
 * re-send after a lost reply is idempotent; an answer "stale" means that
 * belief was wrong: re-based, or, when Redis shows fewer holds than
 * believed, the hold was lost and is told (RLOCK_ELOST).
 *
 * Threads: application threads only, inside the API layer's call guard.
 * Shared state lives in the engine (holds table, waiters), each with its
 * own mutex.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A stale expected count is re-based at most this often in one attempt. */
#define MAX_REBASES 3

/*
 * A thread that queued behind others without trying first sleeps at most
 * this long before its first attempt (normally a hand-off or an unlock
 * message wakes it much sooner; this covers the others all giving up).
 */
#define QUEUED_FIRST_SLEEP_MS 100

/*
 * What owner's hold tells before an acquire: RLOCK_OK with its count (0:
 * none), or RLOCK_ELOST when its hold was lost since its last call (the
 * tombstone is cleared: the next call starts afresh).
 */
static int hold_before_acquire(rlock *lock, const rlock__owner *owner, rlock__hold_info *info) {
    rlock__holds *holds = &lock->engine->holds;
    rlock__hold_key key = rlock__hold_of(lock, owner);
    int state = rlock__holds_get(holds, &key, rlock__now_ms(), info);
    if (state != RLOCK__HOLD_LOST) {
        if (state != RLOCK__HOLD_HELD)
            info->count = 0;
        return RLOCK_OK;
    }
    rlock__holds_forget(holds, &key);
    return rlock__lost(lock, owner, info->report, info->lease_left_ms,
                       info->report ? "its lease ran out with no renewal confirmed"
                                    : "its hold was lost earlier (reported then)");
}

/* A leftover count is given back at most this deep (one RELEASE per hold). */
#define MAX_LEFTOVER 64

/*
 * Redis still has count >= 2 holds of an owner that believes it holds none:
 * what is left of a hold the client already declared lost (its lease ran
 * out by the client's clock while a renewal it could not confirm -- Redis
 * paused, or not acknowledged by the replicas -- did extend it). Re-basing
 * onto it would leave the lock held after the owner's last unlock, renewed
 * for ever; so the leftover is given back first, and the owner starts
 * afresh at one hold, as the loss promised.
 */
static int drop_leftover(rlock *lock, const rlock__owner *owner, long long count,
                         int64_t deadline_ms) {
    rlock__released out = {.remaining = count};
    int status = RLOCK_OK;
    for (int i = 0; i < MAX_LEFTOVER && status == RLOCK_OK && out.remaining > 0 && !out.gone; i++)
        status = lock->kind->release(lock, owner, out.remaining, deadline_ms, &out);
    if (status == RLOCK_OK && out.remaining > 0 && !out.gone)
        return rlock__fail(RLOCK_EREDIS, 0, "lock '%.200s': %lld holds left over from a lost "
                                            "hold could not all be given back", lock->name, count);
    return status == RLOCK_ENOREPL ? RLOCK_OK : status;
}

/*
 * An attempt answered "stale": Redis has count holds, the owner expected
 * others. Fewer than expected means the hold is gone -- unless the owner's
 * last unlock had an unknown outcome and Redis shows exactly that unlock
 * applied. Returns RLOCK_OK with the count to send next in *next, or
 * RLOCK_ELOST.
 */
static int check_stale(rlock *lock, const rlock__owner *owner, const rlock__hold_info *info,
                       long long expected, long long count, int64_t deadline_ms,
                       long long *next) {
    long long lease_left = 0;
    *next = count;
    if (expected == 0 && count >= 2) {
        *next = 0;
        return drop_leftover(lock, owner, count, deadline_ms);
    }
    if (expected == 0 || count >= expected || (info->unsure && count == expected - 1))
        return RLOCK_OK;
    rlock__hold_key key = rlock__hold_of(lock, owner);
    int report = rlock__holds_found_gone(&lock->engine->holds, &key, &lease_left, rlock__now_ms());
    return rlock__lost(lock, owner, report, lease_left, "its hold is gone from Redis");
}

/* Records a confirmed acquisition of count holds, sent at sent_ms. */
static void record_hold(rlock *lock, const rlock__owner *owner, long long lease_ms,
                        long long count, int64_t sent_ms, int unsure, rlock__hold **spare) {
    rlock__grant grant = {.count = count, .sent_ms = sent_ms,
                          .lease_ms = rlock__lease_ttl(lock, lease_ms),
                          .renew = lease_ms == RLOCK_LEASE_WATCHDOG, .unsure = unsure};
    rlock__hold_key key = rlock__hold_of(lock, owner);
    rlock__holds_acquired(&lock->engine->holds, &key, &grant, spare);
}

/*
 * An attempt the replicas did not acknowledge (replica_acks): one that took
 * a hold is undone before the caller hears RLOCK_ENOREPL (a failover could
 * otherwise hand the lock to somebody else while the caller believed it
 * held it). One that wrote nothing (busy, stale) stands as it is.
 */
static int unacknowledged(rlock *lock, const rlock__owner *owner, const rlock__attempt *answer,
                          int64_t deadline_ms) {
    char why[300];
    rlock__released out;
    if (answer->outcome == RLOCK__ATTEMPT_NONE)
        return RLOCK_ENOREPL; /* refused before it wrote (NOREPLICAS) */
    if (answer->outcome != RLOCK__ATTEMPT_HELD)
        return RLOCK_OK;
    snprintf(why, sizeof(why), "%s", rlock__last_message());
    int status = lock->kind->release(lock, owner, answer->value, deadline_ms, &out);
    if (status != RLOCK_OK && status != RLOCK_ENOREPL)
        return rlock__fail(RLOCK_ENOREPL, 0, "lock '%.200s': acquired but not acknowledged (%s); "
                                             "giving it back failed too (%s): it expires by "
                                             "its lease", lock->name, why, rlock__last_message());
    return rlock__fail(RLOCK_ENOREPL, 0, "lock '%.200s': acquired but not acknowledged, "
                                         "released again (%s)", lock->name, why);
}

/* The thread-exit hook drops a thread's holds: armed before it can hold anything. */
static int watch_owner(const rlock__owner *owner) {
    return owner->is_thread ? rlock__thread_watch_exit() : RLOCK_OK;
}

int rlock__try_begin(rlock *lock, const rlock__owner *owner, rlock__try *t) {
    t->spare = rlock__holds_spare(lock->name, lock->name_len);
    t->expected = 0;
    t->sent_ms = rlock__now_ms();
    if (t->spare == NULL || watch_owner(owner) != RLOCK_OK)
        return rlock__fail(RLOCK_ENOMEM, 0, "lock '%.200s': out of memory", lock->name);
    int status = hold_before_acquire(lock, owner, &t->info);
    t->expected = t->info.count;
    return status;
}

/*
 * The attempt's sends may have spanned a failover: the lease is counted from
 * the one Redis answered (every acquire script re-arms the TTL, also when
 * it finds an earlier send applied), not from the first, which may have
 * gone to a dead master (failure-modes.md, lease guarantee 5).
 */
static void answered_send(rlock__try *t, const rlock__attempt *answer) {
    if (answer->sent_ms > t->sent_ms)
        t->sent_ms = answer->sent_ms;
}

int rlock__try_settle(rlock *lock, const rlock__owner *owner, long long lease_ms,
                      long long wait_ms, int64_t deadline_ms, rlock__try *t, int status,
                      rlock__attempt *answer) {
    for (int attempts = 1;; attempts++) {
        if (status == RLOCK_ENOREPL)
            status = unacknowledged(lock, owner, answer, deadline_ms);
        if (status == RLOCK_OK && answer->outcome == RLOCK__ATTEMPT_STALE)
            status = check_stale(lock, owner, &t->info, t->expected, answer->value, deadline_ms,
                                 &t->expected);
        if (status != RLOCK_OK || answer->outcome != RLOCK__ATTEMPT_STALE ||
            attempts >= MAX_REBASES)
            break;
        t->sent_ms = rlock__now_ms();
        status = lock->kind->attempt(lock, owner, rlock__lease_ttl(lock, lease_ms), t->expected,
                                     wait_ms, deadline_ms, answer);
        answered_send(t, answer);
    }
    if (status == RLOCK_OK && answer->outcome == RLOCK__ATTEMPT_BUSY)
        return RLOCK_BUSY;
    if (status == RLOCK_OK && answer->outcome != RLOCK__ATTEMPT_HELD)
        return rlock__fail(RLOCK_EREDIS, 0, "lock '%.200s': the attempt kept finding a stale "
                                            "count", lock->name);
    return status;
}

void rlock__try_record(rlock *lock, const rlock__owner *owner, long long lease_ms, rlock__try *t,
                       long long count, int unsure) {
    record_hold(lock, owner, lease_ms, count, t->sent_ms, unsure, &t->spare);
}

void rlock__try_end(rlock__try *t) {
    rlock__free(t->spare);
    t->spare = NULL;
}

/* A duration for a person: "350 ms", "8.2 s", "12 min 5 s". */
static const char *duration(long long ms, char *buf, size_t size) {
    if (ms < 1000)
        snprintf(buf, size, "%lld ms", ms);
    else if (ms < 60000)
        snprintf(buf, size, "%lld.%lld s", ms / 1000, ms % 1000 / 100);
    else
        snprintf(buf, size, "%lld min %lld s", ms / 60000, ms % 60000 / 1000);
    return buf;
}

/*
 * RLOCK_BUSY's detail: what the busy answer told. A plain or fenced lock's
 * answer is the holder's PTTL; a fair or read-write lock's is when to try
 * again (the holder's PTTL, or sooner when a queue is ahead), so it is named
 * as such. The answer does not name the holder: rlockctl does.
 */
static int busy(const rlock *lock, long long ttl_ms) {
    char left[32];
    int plain = lock->kind == &rlock__reentrant || lock->kind == &rlock__fenced;
    if (plain && ttl_ms < 0)
        return rlock__fail(RLOCK_BUSY, 0, "lock '%.200s' is held by another owner, with no "
                                          "expiry (rlockctl show names the holder)",
                           lock->name);
    if (plain)
        return rlock__fail(RLOCK_BUSY, 0, "lock '%.200s' is held by another owner for %s more "
                                          "(rlockctl show names the holder)",
                           lock->name, duration(ttl_ms, left, sizeof(left)));
    return rlock__fail(RLOCK_BUSY, 0, "%s lock '%.200s' is busy (held, or others queued "
                                      "first); the server said to try again in %s (rlockctl "
                                      "show names the holder)",
                       lock->kind->name, lock->name,
                       duration(ttl_ms < 0 ? 0 : ttl_ms, left, sizeof(left)));
}

/*
 * One acquisition attempt for owner. RLOCK_OK when it holds the lock (the
 * holds table updated, renewal registered for watchdog locks; *token set
 * for a fenced lock), RLOCK_BUSY with *ttl_ms (the holder's PTTL) when
 * another owner holds it, RLOCK_ELOST when the owner's own hold was lost
 * (nothing acquired), or an error.
 */
static int acquire_once(rlock *lock, const rlock__owner *owner, long long lease_ms,
                        long long wait_ms, int64_t deadline_ms, long long *ttl_ms,
                        long long *token) {
    rlock__attempt answer = {.outcome = RLOCK__ATTEMPT_NONE, .value = -1};
    rlock__try t;
    int status = rlock__try_begin(lock, owner, &t);
    if (status == RLOCK_OK) {
        t.sent_ms = rlock__now_ms();
        status = lock->kind->attempt(lock, owner, rlock__lease_ttl(lock, lease_ms), t.expected,
                                     wait_ms, deadline_ms, &answer);
        answered_send(&t, &answer);
        status = rlock__try_settle(lock, owner, lease_ms, wait_ms, deadline_ms, &t, status,
                                   &answer);
    }
    if (status == RLOCK_OK) {
        rlock__try_record(lock, owner, lease_ms, &t, answer.value, 0);
        *token = answer.token;
    }
    *ttl_ms = answer.value;
    rlock__try_end(&t);
    return status == RLOCK_BUSY ? busy(lock, answer.value) : status;
}

/* A thread waiting for the lock; the cleanup also runs if it is cancelled. */
typedef struct waiting {
    rlock *lock;
    rlock__waiter waiter;
    rlock__hold *spare;         /* owned: records a handed-over hold without allocating */
    long long wait_ms;          /* the acquire's wait (the kind's queue keeps it) */
    long long *token;           /* where the acquisition's token goes (the caller's) */
    int cancelled;              /* set until the retries return: the cleanup runs on cancel */
    int handed_over;            /* got it from a releasing thread of this client */
    int acquired;               /* the retries returned with the lock */
} waiting;

/*
 * Leaves the channel. A cancelled waiter may leave holding a lock it never
 * returned to its caller (handed over, or taken by its attempt sent ahead):
 * it gives that back at once rather than leave it held for a whole lease.
 */
static void stop_waiting(void *arg) {
    waiting *w = arg;
    rlock *lock = w->lock;
    rlock__conn *ahead = NULL;
    rlock__attempt answer;
    rlock__released ignored_release;
    int ignored;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored); /* already so, unless cancelled */
    int unclaimed = rlock__wait_leave(lock->engine, &w->waiter, w->acquired, &ahead);
    if (ahead != NULL) {
        /* Taken, or unknown (a release of a field that is not there changes nothing). */
        int status = lock->kind->read_ahead(lock, ahead, &answer);
        if (status == RLOCK_EIO || (status == RLOCK_OK && answer.outcome == RLOCK__ATTEMPT_HELD))
            unclaimed = 1;
    }
    if (unclaimed) /* best effort */
        lock->kind->release(lock, &w->waiter.owner, 1, RLOCK__NO_DEADLINE, &ignored_release);
    if (w->cancelled && lock->kind->give_up != NULL) {
        lock->kind->give_up(lock, &w->waiter.owner, w->wait_ms);
        rlock__wait_queue_end(lock->engine); /* rlock__acquire's end does not run */
    }
    rlock__free(w->spare);
    rlock__gauge_add(&lock->engine->events->stats.waiting_threads, -1);
}

/* How long to sleep before the next attempt: the holder's TTL, within the deadline. */
static int64_t sleep_until(long long ttl_ms, int64_t deadline_ms) {
    if (ttl_ms < 0)
        return deadline_ms; /* no TTL: only a message (or the deadline) helps */
    int64_t wake = rlock__deadline_after(ttl_ms);
    return wake < deadline_ms ? wake : deadline_ms;
}

/* Records a hold the waiter got without an attempt of its own (its token: a fenced lock's). */
static int took_over(waiting *w, long long count, int64_t sent_ms, long long token) {
    record_hold(w->lock, &w->waiter.owner, w->waiter.lease_ms, count, sent_ms, 0, &w->spare);
    *w->token = token;
    return RLOCK_OK;
}

/*
 * Alternates attempts with sleeps until acquired (by an attempt, by an
 * attempt the subscriber thread sent ahead, or handed over by a releasing
 * thread of this client), an error, or the deadline. With queued set the
 * first attempt is skipped: the thread sleeps first.
 */
static int retry_until_acquired(const rlock__call *call, waiting *w, int queued,
                                int64_t deadline_ms) {
    rlock *lock = w->lock;
    rlock__engine *e = lock->engine;
    long long ttl_ms = QUEUED_FIRST_SLEEP_MS;
    int attempt = !queued;
    unsigned epoch = rlock__wait_epoch(e, &w->waiter);
    for (;;) {
        rlock__attempt answer;
        int granted = 0, status = RLOCK_BUSY;
        int64_t sent_ms = 0;
        rlock__conn *ahead = NULL;
        if (attempt) {
            epoch = rlock__wait_epoch(e, &w->waiter);
            status = acquire_once(lock, &w->waiter.owner, w->waiter.lease_ms, w->wait_ms,
                                  deadline_ms, &ttl_ms, w->token);
        }
        if (status != RLOCK_BUSY || rlock__now_ms() >= deadline_ms)
            return status;
        status = rlock__wait_sleep(e, &w->waiter, epoch, sleep_until(ttl_ms, deadline_ms),
                                   call->cancel_state, &granted, &ahead, &sent_ms);
        if (granted) {
            w->handed_over = 1;
            return took_over(w, 1, sent_ms, w->waiter.token);
        }
        attempt = 1;
        if (ahead != NULL && lock->kind->read_ahead(lock, ahead, &answer) == RLOCK_OK) {
            if (answer.outcome == RLOCK__ATTEMPT_HELD)
                return took_over(w, answer.value, sent_ms, answer.token);
            ttl_ms = answer.value; /* busy: that answer was this round's attempt */
            attempt = 0;
        }
        if (status != RLOCK_OK)
            return status;
    }
}

/*
 * Joins first (so no unlock can slip between an attempt and the sleep),
 * then retries. The cleanup handlers also run if the thread is cancelled
 * while it sleeps: it leaves the channel (and the kind's queue), then the
 * call. A kind may give each waiter a channel of its own (the fair lock).
 */
static int wait_and_acquire(const rlock__call *call, rlock *lock, const rlock__owner *owner,
                            long long wait_ms, long long lease_ms, int queued,
                            int64_t deadline_ms, long long *token, int *handed_over) {
    waiting w = {.lock = lock,
                 .waiter = {.owner = *owner, .lease_ms = lease_ms, .name = lock->name,
                            .name_len = lock->name_len, .ops = lock->kind->wait, .lock = lock},
                 .wait_ms = wait_ms, .token = token, .cancelled = 1};
    char *own_channel = NULL;
    const char *channel = lock->channel;
    size_t channel_len = lock->channel_len;
    /* A hand-off can make us the owner without an attempt of ours. */
    if (watch_owner(owner) != RLOCK_OK)
        return RLOCK_ENOMEM;
    if (lock->kind->waiter_channel != NULL &&
        (channel = own_channel = lock->kind->waiter_channel(lock, owner, &channel_len)) == NULL)
        return RLOCK_ENOMEM;
    w.spare = rlock__holds_spare(lock->name, lock->name_len);
    int status = w.spare == NULL ? RLOCK_ENOMEM
                                 : rlock__wait_join(lock->engine, channel, channel_len,
                                                    deadline_ms, &w.waiter);
    rlock__free(own_channel); /* the engine keeps its own copy */
    if (status != RLOCK_OK) {
        rlock__free(w.spare);
        return status;
    }
    rlock__gauge_add(&lock->engine->events->stats.waiting_threads, 1); /* until stop_waiting */
    pthread_cleanup_push(call->on_cancel, call->arg);
    pthread_cleanup_push(stop_waiting, &w);
    status = retry_until_acquired(call, &w, queued, deadline_ms);
    w.cancelled = 0;
    w.acquired = status == RLOCK_OK;
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(0); /* the call is left by our caller on the normal path */
    *handed_over = w.handed_over;
    return status;
}

/* Whether owner holds anything of lock, of its kind or its sibling's. */
static int holds_any(rlock *lock, const rlock__owner *owner) {
    rlock__holds *holds = &lock->engine->holds;
    rlock__hold_key key = rlock__hold_of(lock, owner);
    if (rlock__holds_expected(holds, &key) > 0)
        return 1;
    if (lock->kind->sibling == NULL)
        return 0;
    key = rlock__hold_of_kind(lock, lock->kind->sibling, owner);
    return rlock__holds_expected(holds, &key) > 0;
}

/*
 * Whether owner should queue behind waiting threads of its own client
 * instead of trying first. Trying first would let a thread that just
 * unlocked take the lock straight back, ahead of the waiters it woke here
 * and in other processes; queued, it gets the lock by a hand-off (or an
 * unlock message) in turn. An owner that holds the lock (re-entering it, or
 * a read-write lock's writer taking the read lock) never queues: the
 * waiters may be waiting for it.
 */
static int should_queue(rlock *lock, long long wait_ms, const rlock__owner *owner) {
    rlock__engine *e = lock->engine;
    return wait_ms != 0 && lock->kind->local_queue &&
           rlock__wait_queued(e, lock->channel, lock->channel_len, lock->name, lock->name_len) &&
           !holds_any(lock, owner);
}

int rlock__acquire(rlock *lock, const rlock__owner *owner, long long wait_ms, long long lease_ms,
                   const rlock__call *call) {
    rlock__hold_info info;
    long long ttl_ms, token = 0;
    int64_t deadline_ms = rlock__deadline_after(wait_ms), wait_start_us = 0;
    int handed_over = 0;
    /* A lost hold is told before anything else: queueing could hand us the lock. */
    int status = hold_before_acquire(lock, owner, &info);
    if (status != RLOCK_OK)
        return status; /* told: RLOCK_ELOST */
    /* An owner that would wait for a hold of its own never starts waiting. */
    if (lock->kind->self_deadlock != NULL && (status = lock->kind->self_deadlock(lock, owner)) != RLOCK_OK)
        return status;
    /* It may stand in the kind's queue in Redis: close waits for it to leave. */
    int may_queue = wait_ms != 0 && lock->kind->give_up != NULL;
    if (may_queue && (status = rlock__wait_queue_begin(lock->engine)) != RLOCK_OK)
        return status;
    if (should_queue(lock, wait_ms, owner)) {
        wait_start_us = rlock__now_us();
        status = wait_and_acquire(call, lock, owner, wait_ms, lease_ms, 1, deadline_ms, &token,
                                  &handed_over);
    } else {
        status = acquire_once(lock, owner, lease_ms, wait_ms, deadline_ms, &ttl_ms, &token);
        if (status == RLOCK_BUSY && wait_ms != 0) {
            wait_start_us = rlock__now_us();
            status = wait_and_acquire(call, lock, owner, wait_ms, lease_ms, 0, deadline_ms,
                                      &token, &handed_over);
        }
    }
    /* Close began while the lock was taken (close waits for counted calls before it cuts
     * the network): the call gives it back and says RLOCK_ECLOSED, as every blocked call
     * of a closed client does; nothing would renew it. */
    if (status == RLOCK_OK && may_queue && rlock__wait_closing(lock->engine)) {
        (void)rlock__release(lock, owner);
        status = rlock__fail(RLOCK_ECLOSED, 0, "client closed while '%.200s' was acquired: "
                                               "given back", lock->name);
    }
    if (status == RLOCK_OK && call->token != NULL)
        *call->token = token;
    if (status == RLOCK_OK)
        rlock__count_acquired(lock, wait_start_us, handed_over);
    else if (!call->member) /* a multi-lock's call counts its own outcome */
        rlock__count_busy(&lock->engine->events->stats, status);
    /* An attempt that may have queued us in the kind's queue: a waiter that gives up leaves it. */
    if (status != RLOCK_OK && may_queue)
        lock->kind->give_up(lock, owner, wait_ms);
    if (may_queue)
        rlock__wait_queue_end(lock->engine);
    return status;
}
