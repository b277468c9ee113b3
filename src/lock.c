/*
 * lock.c - the lock operations: acquire (with waiting), release, and the
 * read-only queries.
 *
 * An uncontended lock + unlock is two round trips (ACQUIRE, RELEASE scripts)
 * and nothing else. A contended acquire subscribes to the lock's channel,
 * then alternates "try once" with a sleep bounded by min(lock TTL, time left)
 * that an unlock message cuts short (pubsub.c). A last unlock that finds a
 * thread of this client asleep on the lock hands it over with one TRANSFER
 * script instead (bounded by local_handoffs), and a thread that calls lock
 * while threads of this client wait queues behind them rather than racing
 * them (docs/design.md section 4).
 *
 * Threads: application threads only. Every function enters through the call
 * guard (client.c), which validates the handle and disables cancellation
 * except during the sleep. State shared with other threads lives in the
 * client's holds table and pub/sub channels, each with its own mutex.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int valid_lease(long long lease_ms) {
    return lease_ms == RLOCK_LEASE_WATCHDOG || (lease_ms > 0 && lease_ms <= RLOCK_MAX_LEASE_MS);
}

/* ACQUIRE's answers (scripts.c): {1, count}, {0, pttl} or {2, true count}. */
enum { ACQUIRE_BUSY = 0, ACQUIRE_HELD = 1, ACQUIRE_STALE = 2 };

/* A stale expected count is re-based at most this often in one attempt. */
#define MAX_REBASES 3

static int parse_acquire(const redisReply *reply, long long *kind, long long *value) {
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER)
        return RLOCK_EREDIS;
    *kind = reply->element[0]->integer;
    *value = reply->element[1]->integer;
    return RLOCK_OK;
}

/* An ACQUIRE command with its argument strings. */
typedef struct acquire_cmd {
    long long lease_ms;         /* the TTL it sets */
    char lease[24], owner[RLOCK__OWNER_MAX], expected[24];
    const char *argv[4];
    size_t argvlen[4];
    rlock__cmd cmd;
} acquire_cmd;

static void acquire_cmd_init(acquire_cmd *a, rlock_client *c, const char *name, size_t name_len,
                             uint64_t tid, long long lease_ms, long long expected) {
    long long lease = lease_ms == RLOCK_LEASE_WATCHDOG ? c->settings.watchdog_timeout_ms : lease_ms;
    a->lease_ms = lease;
    a->argv[0] = name;
    a->argvlen[0] = name_len;
    a->argv[1] = a->lease;
    a->argvlen[1] = rlock__fmt_i64(a->lease, lease);
    a->argv[2] = a->owner;
    a->argvlen[2] = rlock__owner(c, tid, a->owner);
    a->argv[3] = a->expected;
    a->argvlen[3] = rlock__fmt_i64(a->expected, expected);
    a->cmd = (rlock__cmd){.script = RLOCK__SCRIPT_ACQUIRE, .argc = 4, .nkeys = 1,
                          .argv = a->argv, .argvlen = a->argvlen};
}

static void acquire_cmd_expect(acquire_cmd *a, long long expected) {
    a->argvlen[3] = rlock__fmt_i64(a->expected, expected);
}

/* Sends ACQUIRE. On RLOCK_OK, *kind and *value hold the script's answer. */
static int send_acquire(rlock_client *c, const acquire_cmd *a, int64_t deadline_ms,
                        long long *kind, long long *value) {
    redisReply *reply = NULL;
    int status = rlock__exec(c, &a->cmd, deadline_ms, &reply, NULL);
    if (status == RLOCK_OK)
        status = parse_acquire(reply, kind, value);
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}

/*
 * Tells the calling thread's loss of lock: one LOCK_LOST event (and
 * on_lock_lost) when this call is the first to know, and RLOCK_ELOST.
 */
static int lost(rlock *lock, int report, long long lease_left_ms, const char *how) {
    if (report)
        rlock__event_post(lock->client, RLOCK_EVENT_LOCK_LOST, lock->name, lock->name_len,
                          lease_left_ms, RLOCK_ELOST, how);
    return rlock__fail(RLOCK_ELOST, 0, "lock '%.200s': %s; the calling thread holds nothing now",
                       lock->name, how);
}

/*
 * What the calling thread's hold tells before an acquire: RLOCK_OK with its
 * count (0: none), or RLOCK_ELOST when its hold was lost since its last call
 * (the tombstone is cleared: the next call starts afresh).
 */
static int hold_before_acquire(rlock *lock, uint64_t tid, rlock__hold_info *info) {
    rlock__holds *holds = &lock->client->holds;
    int state = rlock__holds_get(holds, lock->name, lock->name_len, tid, rlock__now_ms(), info);
    if (state != RLOCK__HOLD_LOST) {
        if (state != RLOCK__HOLD_HELD)
            info->count = 0;
        return RLOCK_OK;
    }
    rlock__holds_forget(holds, lock->name, lock->name_len, tid);
    return lost(lock, info->report, info->lease_left_ms,
                info->report ? "its lease ran out with no renewal confirmed"
                             : "its hold was lost earlier (reported then)");
}

/*
 * An ACQUIRE answered "stale": Redis has count holds, the caller expected
 * others. Fewer than expected means the hold is gone -- unless the caller's
 * last unlock had an unknown outcome and Redis shows exactly that unlock
 * applied. Returns RLOCK_OK to re-base on count, or RLOCK_ELOST.
 */
static int check_stale(rlock *lock, uint64_t tid, const rlock__hold_info *info,
                       long long expected, long long count) {
    long long lease_left = 0;
    if (expected == 0 || count >= expected || (info->unsure && count == expected - 1))
        return RLOCK_OK;
    int report = rlock__holds_found_gone(&lock->client->holds, lock->name, lock->name_len, tid,
                                         &lease_left, rlock__now_ms());
    return lost(lock, report, lease_left, "its hold is gone from Redis");
}

/*
 * One acquisition attempt for the calling thread. RLOCK_OK when it holds the
 * lock (the holds table updated, renewal registered for watchdog locks),
 * RLOCK_BUSY with *ttl_ms (the holder's PTTL) when another owner holds it,
 * RLOCK_ELOST when the thread's own hold was lost (nothing acquired), or an
 * error.
 */
static int acquire_once(rlock *lock, long long lease_ms, uint64_t tid, int64_t deadline_ms,
                        long long *ttl_ms) {
    rlock_client *c = lock->client;
    int status = RLOCK_EREDIS;
    long long kind = ACQUIRE_STALE, value = 0;
    rlock__hold_info info;
    acquire_cmd a;

    rlock__hold *spare = rlock__holds_spare(lock->name, lock->name_len);
    if (spare == NULL || rlock__thread_watch_exit() != RLOCK_OK) {
        rlock__free(spare);
        return rlock__fail(RLOCK_ENOMEM, 0, "lock '%.200s': out of memory", lock->name);
    }
    status = hold_before_acquire(lock, tid, &info);
    long long expected = info.count;
    acquire_cmd_init(&a, c, lock->name, lock->name_len, tid, lease_ms, expected);
    int64_t sent_ms = rlock__now_ms();
    for (int i = 0; status == RLOCK_OK && i < MAX_REBASES && kind == ACQUIRE_STALE; i++) {
        sent_ms = rlock__now_ms();
        status = send_acquire(c, &a, deadline_ms, &kind, &value);
        if (status == RLOCK_OK && kind == ACQUIRE_STALE)
            status = check_stale(lock, tid, &info, expected, value);
        expected = value;
        acquire_cmd_expect(&a, value); /* used only if stale */
    }
    if (status == RLOCK_OK && kind == ACQUIRE_HELD) {
        rlock__grant grant = {.count = value, .sent_ms = sent_ms, .lease_ms = a.lease_ms,
                              .renew = lease_ms == RLOCK_LEASE_WATCHDOG};
        rlock__holds_acquired(&c->holds, lock->name, lock->name_len, tid, &grant, &spare);
    } else if (status == RLOCK_OK && kind == ACQUIRE_BUSY) {
        status = RLOCK_BUSY;
    } else if (status == RLOCK_OK) {
        status = rlock__fail(RLOCK_EREDIS, 0, "lock '%.200s': ACQUIRE kept finding a stale count",
                             lock->name);
    }
    *ttl_ms = value;
    rlock__free(spare);
    return status;
}

/*
 * Sends a sleeping waiter's ACQUIRE ahead of its wake-up (the subscriber
 * thread, on an unlock message), with the same expected count the waiter's
 * own attempt would send, so that attempt is a safe re-send of this one.
 */
rlock__conn *rlock__acquire_ahead(rlock_client *c, const rlock__waiter *w) {
    acquire_cmd a;
    long long expected = rlock__holds_expected(&c->holds, w->name, w->name_len, w->tid);
    acquire_cmd_init(&a, c, w->name, w->name_len, w->tid, w->lease_ms, expected);
    return rlock__send_ahead(c, &a.cmd);
}

/*
 * Reads the reply of an ACQUIRE sent ahead. Stores its answer; RLOCK_OK only
 * for an answer an attempt would act on (held or busy), else the caller makes
 * an ordinary attempt (a re-send is always safe). RLOCK_EIO: no reply, so
 * the outcome is unknown; RLOCK_EREDIS: any other answer (NOSCRIPT, stale).
 */
static int read_acquire_ahead(rlock_client *c, rlock__conn *ahead, long long *kind,
                              long long *value) {
    redisReply *reply = NULL;
    int status = rlock__read_ahead(c, ahead, rlock__deadline_after(c->settings.command_timeout_ms),
                                   &reply);
    if (status == RLOCK_OK)
        status = parse_acquire(reply, kind, value); /* NOSCRIPT, errors: not parsed */
    if (status == RLOCK_OK && *kind != ACQUIRE_HELD && *kind != ACQUIRE_BUSY)
        status = RLOCK_EREDIS;
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}

/*
 * Sends RELEASE with the given expected count. Returns RLOCK_OK with the
 * reply, which the caller frees.
 */
static int send_release(rlock *lock, const char *owner, size_t owner_len, long long expected,
                        redisReply **reply, int *resent) {
    char expected_str[24];
    const char *argv[] = {lock->name, owner, expected_str, lock->channel};
    size_t argvlen[] = {lock->name_len, owner_len, rlock__fmt_i64(expected_str, expected),
                        lock->channel_len};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_RELEASE, .argc = 4, .nkeys = 1,
                      .argv = argv, .argvlen = argvlen};
    return rlock__exec(lock->client, &cmd, RLOCK__NO_DEADLINE, reply, resent);
}

/* A thread waiting for the lock; the cleanup also runs if it is cancelled. */
typedef struct waiting {
    rlock *lock;
    rlock__waiter waiter;
    rlock__hold *spare;         /* owned: records a handed-over hold without allocating */
} waiting;

/*
 * Leaves the channel. A cancelled waiter may leave holding a lock it never
 * returned to its caller (handed over, or taken by its ACQUIRE sent ahead):
 * it gives that back at once rather than leave it held for a whole lease.
 */
static void stop_waiting(void *arg) {
    waiting *w = arg;
    rlock_client *c = w->lock->client;
    rlock__conn *ahead = NULL;
    long long kind, value;
    int ignored;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored); /* already so, unless cancelled */
    int unclaimed = rlock__pubsub_leave(c, &w->waiter, &ahead);
    if (ahead != NULL) {
        /* Taken, or unknown (a RELEASE of a field that is not there changes nothing). */
        int status = read_acquire_ahead(c, ahead, &kind, &value);
        if (status == RLOCK_EIO || (status == RLOCK_OK && kind == ACQUIRE_HELD))
            unclaimed = 1;
    }
    if (unclaimed) {
        char owner[RLOCK__OWNER_MAX];
        redisReply *reply = NULL;
        size_t owner_len = rlock__owner(c, w->waiter.tid, owner);
        send_release(w->lock, owner, owner_len, 1, &reply, NULL); /* best effort */
        if (reply != NULL)
            freeReplyObject(reply);
    }
    rlock__free(w->spare);
}

static void leave_on_cancel(void *guard) {
    rlock__leave(guard);
}

/* How long to sleep before the next attempt: the holder's TTL, within the deadline. */
static int64_t sleep_until(long long ttl_ms, int64_t deadline_ms) {
    if (ttl_ms < 0)
        return deadline_ms; /* no TTL: only a message (or the deadline) helps */
    int64_t wake = rlock__deadline_after(ttl_ms);
    return wake < deadline_ms ? wake : deadline_ms;
}

/*
 * A thread that queued behind others without trying first sleeps at most
 * this long before its first attempt (normally a hand-off or an unlock
 * message wakes it much sooner; this covers the others all giving up).
 */
#define QUEUED_FIRST_SLEEP_MS 100

/*
 * Records a hold the waiter got without an attempt of its own (a hand-off,
 * or its ACQUIRE sent ahead at sent_ms).
 */
static int took_over(waiting *w, long long count, int64_t sent_ms) {
    rlock *lock = w->lock;
    rlock_client *c = lock->client;
    long long lease_ms = w->waiter.lease_ms;
    rlock__grant grant = {.count = count, .sent_ms = sent_ms,
                          .lease_ms = lease_ms == RLOCK_LEASE_WATCHDOG
                                          ? c->settings.watchdog_timeout_ms
                                          : lease_ms,
                          .renew = lease_ms == RLOCK_LEASE_WATCHDOG};
    rlock__holds_acquired(&c->holds, lock->name, lock->name_len, w->waiter.tid, &grant, &w->spare);
    return RLOCK_OK;
}

/*
 * Alternates attempts with sleeps until acquired (by an attempt, by an
 * ACQUIRE the subscriber thread sent ahead, or handed over by a releasing
 * thread of this client), an error, or the deadline. With queued set the
 * first attempt is skipped: the thread sleeps first.
 */
static int retry_until_acquired(rlock__guard *g, waiting *w, int queued, int64_t deadline_ms) {
    rlock *lock = w->lock;
    rlock_client *c = lock->client;
    long long ttl_ms = QUEUED_FIRST_SLEEP_MS, kind, value;
    int attempt = !queued;
    unsigned epoch = rlock__pubsub_epoch(c, &w->waiter);
    for (;;) {
        int granted = 0, status = RLOCK_BUSY;
        int64_t sent_ms = 0;
        rlock__conn *ahead = NULL;
        if (attempt) {
            epoch = rlock__pubsub_epoch(c, &w->waiter);
            status = acquire_once(lock, w->waiter.lease_ms, w->waiter.tid, deadline_ms, &ttl_ms);
        }
        if (status != RLOCK_BUSY || rlock__now_ms() >= deadline_ms)
            return status;
        status = rlock__pubsub_wait(c, &w->waiter, epoch, sleep_until(ttl_ms, deadline_ms),
                                    g->cancel_state, &granted, &ahead, &sent_ms);
        if (granted)
            return took_over(w, 1, sent_ms);
        attempt = 1;
        if (ahead != NULL && read_acquire_ahead(c, ahead, &kind, &value) == RLOCK_OK) {
            if (kind == ACQUIRE_HELD)
                return took_over(w, value, sent_ms);
            ttl_ms = value; /* busy: that answer was this round's attempt */
            attempt = 0;
        }
        if (status != RLOCK_OK)
            return status;
    }
}

/*
 * Subscribes first (so no unlock can slip between an attempt and the sleep),
 * then retries. The cleanup handlers also run if the thread is cancelled
 * while it sleeps: it leaves the channel and the call.
 */
static int wait_and_acquire(rlock__guard *g, rlock *lock, long long lease_ms, uint64_t tid,
                            int queued, int64_t deadline_ms) {
    waiting w = {.lock = lock,
                 .waiter = {.tid = tid, .lease_ms = lease_ms, .name = lock->name,
                            .name_len = lock->name_len}};
    /* A hand-off can make us the owner without an attempt of ours: arm the
     * thread-exit hook (which drops our holds) before that can happen. */
    if (rlock__thread_watch_exit() != RLOCK_OK)
        return RLOCK_ENOMEM;
    w.spare = rlock__holds_spare(lock->name, lock->name_len);
    if (w.spare == NULL)
        return RLOCK_ENOMEM;
    int status = rlock__pubsub_join(lock->client, lock->channel, lock->channel_len, deadline_ms,
                                    &w.waiter);
    if (status != RLOCK_OK) {
        rlock__free(w.spare);
        return status;
    }
    pthread_cleanup_push(leave_on_cancel, g);
    pthread_cleanup_push(stop_waiting, &w);
    status = retry_until_acquired(g, &w, queued, deadline_ms);
    pthread_cleanup_pop(1);
    pthread_cleanup_pop(0); /* the guard is left by our caller on the normal path */
    return status;
}

/*
 * Whether the calling thread should queue behind waiting threads of its own
 * client instead of trying first. Trying first would let a thread that just
 * unlocked take the lock straight back, ahead of the waiters it woke here
 * and in other processes; queued, it gets the lock by a hand-off (or an
 * unlock message) in turn. A thread re-entering a lock it holds never queues.
 */
static int should_queue(rlock *lock, long long wait_ms, uint64_t tid) {
    rlock_client *c = lock->client;
    return wait_ms != 0 && rlock__pubsub_queued(c, lock) &&
           rlock__holds_expected(&c->holds, lock->name, lock->name_len, tid) == 0;
}

static int acquire(rlock *lock, long long wait_ms, long long lease_ms) {
    rlock__guard g;
    rlock__hold_info info;
    long long ttl_ms;
    if (!valid_lease(lease_ms))
        return rlock__fail(RLOCK_EINVAL, 0, "lease_ms %lld: must be 1..%lld or RLOCK_LEASE_WATCHDOG",
                           lease_ms, (long long)RLOCK_MAX_LEASE_MS);
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    int64_t deadline_ms = rlock__deadline_after(wait_ms);
    uint64_t tid = rlock__thread_id();
    /* A lost hold is told before anything else: queueing could hand us the lock. */
    if ((status = hold_before_acquire(lock, tid, &info)) != RLOCK_OK) {
        /* told: RLOCK_ELOST */
    } else if (should_queue(lock, wait_ms, tid)) {
        status = wait_and_acquire(&g, lock, lease_ms, tid, 1, deadline_ms);
    } else {
        status = acquire_once(lock, lease_ms, tid, deadline_ms, &ttl_ms);
        if (status == RLOCK_BUSY && wait_ms != 0)
            status = wait_and_acquire(&g, lock, lease_ms, tid, 0, deadline_ms);
    }
    return rlock__leave_status(&g, status);
}

int rlock_lock(rlock *lock) {
    return acquire(lock, -1, RLOCK_LEASE_WATCHDOG);
}

int rlock_lock_lease(rlock *lock, long long lease_ms) {
    return acquire(lock, -1, lease_ms);
}

int rlock_try_lock(rlock *lock, long long wait_ms, long long lease_ms) {
    return acquire(lock, wait_ms, lease_ms);
}

/* RELEASE's answer for a stale expected count: {true count}. */
static int is_stale_release(const redisReply *reply, long long *count) {
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER)
        return 0;
    *count = reply->element[0]->integer;
    return 1;
}

/*
 * Releases one hold (RELEASE script). Stores in *remaining the hold count
 * left (0 = released), or RLOCK__RELEASE_UNKNOWN when the outcome is unknown
 * (I/O), or -2 when Redis refused and changed nothing. *gone is set when the
 * caller's field is not in Redis.
 */
static int release(rlock *lock, const char *owner, size_t owner_len, long long expected,
                   long long *remaining, int *gone) {
    redisReply *reply = NULL;
    int resent = 0, status = RLOCK_EREDIS;
    *remaining = -2;
    *gone = 0;
    for (int i = 0; i < MAX_REBASES; i++) {
        status = send_release(lock, owner, owner_len, expected, &reply, &resent);
        if (status != RLOCK_OK || !is_stale_release(reply, &expected))
            break;
        freeReplyObject(reply);
        reply = NULL;
        status = RLOCK_EREDIS;
    }
    if (status == RLOCK_EIO) {
        *remaining = RLOCK__RELEASE_UNKNOWN; /* the entry stays, marked unsure */
    } else if (status != RLOCK_OK) {
        /* Refused (an error reply): Redis is unchanged, the hold stays as it was. */
    } else if (reply->type == REDIS_REPLY_INTEGER) {
        *remaining = reply->integer;
    } else if (reply->type == REDIS_REPLY_NIL) {
        /* Gone: lost, or (on a re-send of our last hold) released by the first send. */
        *remaining = 0;
        *gone = !(resent && expected == 1);
    } else {
        status = rlock__fail_reply(reply, "RELEASE");
    }
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}

/*
 * Moves the caller's last hold to the offered waiter (TRANSFER script).
 * Stores in *remaining 0 (ours is gone), RLOCK__RELEASE_UNKNOWN or -2 (an
 * error reply: nothing changed), in *granted whether the waiter now holds
 * the lock, in *gone whether our field was not there, and in *sent_ms when
 * the script was sent.
 */
static int hand_over(rlock *lock, const char *owner, size_t owner_len, const rlock__offer *offer,
                     long long *remaining, int *granted, int *gone, int64_t *sent_ms) {
    rlock_client *c = lock->client;
    char to[RLOCK__OWNER_MAX], lease[24];
    redisReply *reply = NULL;
    long long lease_ms = offer->lease_ms == RLOCK_LEASE_WATCHDOG ? c->settings.watchdog_timeout_ms
                                                                 : offer->lease_ms;
    const char *argv[] = {lock->name, owner, to, lease};
    size_t argvlen[] = {lock->name_len, owner_len, rlock__owner(c, offer->tid, to),
                        rlock__fmt_i64(lease, lease_ms)};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_TRANSFER, .argc = 4, .nkeys = 1,
                      .argv = argv, .argvlen = argvlen};
    *remaining = -2;
    *granted = 0;
    *gone = 0;
    *sent_ms = rlock__now_ms();
    int status = rlock__exec(c, &cmd, RLOCK__NO_DEADLINE, &reply, NULL);
    if (status == RLOCK_EIO) {
        *remaining = RLOCK__RELEASE_UNKNOWN;
    } else if (status == RLOCK_OK && reply->type == REDIS_REPLY_INTEGER) {
        *remaining = 0;
        *granted = reply->integer == 1;
        *gone = !*granted;
    } else if (status == RLOCK_OK) {
        status = rlock__fail_reply(reply, "TRANSFER");
    }
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}

/*
 * The unlock of a lost hold of count holds: reported once (report), and
 * RLOCK_ELOST when the thread would still believe it held the lock after
 * this unlock (count >= 2); for its last hold the thread holds nothing, as
 * it wanted: RLOCK_ENOTOWNER.
 */
static int unlock_lost(rlock *lock, int report, long long count, long long lease_left_ms,
                       const char *how) {
    if (count >= 2)
        return lost(lock, report, lease_left_ms, how);
    if (report)
        rlock__event_post(lock->client, RLOCK_EVENT_LOCK_LOST, lock->name, lock->name_len,
                          lease_left_ms, RLOCK_ELOST, how);
    return rlock__fail(RLOCK_ENOTOWNER, 0, "lock '%.200s': not held by the calling thread (%s)",
                       lock->name, how);
}

/*
 * Before an unlock: RLOCK_OK with the expected count (0: nothing known, let
 * Redis say), or the unlock's answer for a hold already known to be over
 * (its lease ran out, or it was lost: see unlock_lost).
 */
static int hold_before_release(rlock *lock, uint64_t tid, long long *expected) {
    rlock__holds *holds = &lock->client->holds;
    rlock__hold_info info;
    int state = rlock__holds_get(holds, lock->name, lock->name_len, tid, rlock__now_ms(), &info);
    *expected = state == RLOCK__HOLD_HELD ? info.count : 0;
    if (state == RLOCK__HOLD_EXPIRED)
        return rlock__fail(RLOCK_ENOTOWNER, 0, "lock '%.200s': its lease ran out before the unlock",
                           lock->name);
    if (state != RLOCK__HOLD_LOST)
        return RLOCK_OK;
    rlock__holds_forget(holds, lock->name, lock->name_len, tid);
    return unlock_lost(lock, info.report, info.count, info.lease_left_ms,
                       info.report ? "its lease ran out with no renewal confirmed"
                                   : "its hold was lost earlier (reported then)");
}

/* The unlock found the caller's field gone: a loss if it believed it held. */
static int unlock_found_gone(rlock *lock, uint64_t tid, long long expected) {
    long long lease_left = 0;
    if (expected == 0)
        return rlock__fail(RLOCK_ENOTOWNER, 0, "lock '%.200s': not held by the calling thread",
                           lock->name);
    int report = rlock__holds_found_gone(&lock->client->holds, lock->name, lock->name_len, tid,
                                         &lease_left, rlock__now_ms());
    return unlock_lost(lock, report, expected, lease_left, "its hold is gone from Redis");
}

int rlock_unlock(rlock *lock) {
    rlock__guard g;
    char owner[RLOCK__OWNER_MAX];
    rlock__offer offer;
    long long expected, remaining;
    int64_t sent_ms = 0;
    int granted = 0, gone = 0, offered = 0;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock_client *c = lock->client;
    uint64_t tid = rlock__thread_id();
    size_t owner_len = rlock__owner(c, tid, owner);
    status = hold_before_release(lock, tid, &expected);
    if (status != RLOCK_OK)
        return rlock__leave_status(&g, status);
    offered = expected == 1 && rlock__pubsub_offer(c, lock, &offer);
    rlock__holds_begin_release(&c->holds, lock->name, lock->name_len, tid);
    if (offered)
        status = hand_over(lock, owner, owner_len, &offer, &remaining, &granted, &gone, &sent_ms);
    else
        status = release(lock, owner, owner_len, expected, &remaining, &gone);
    /* Our entry goes before the waiter records its own under the same name. */
    rlock__holds_released(&c->holds, lock->name, lock->name_len, tid, gone ? -2 : remaining);
    if (offered)
        rlock__pubsub_settle(c, &offer, granted, sent_ms);
    if (gone)
        status = unlock_found_gone(lock, tid, expected);
    return rlock__leave_status(&g, status);
}

int rlock_force_unlock(rlock *lock) {
    rlock__guard g;
    redisReply *reply = NULL;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    const char *argv[] = {lock->name, lock->channel};
    size_t argvlen[] = {lock->name_len, lock->channel_len};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_FORCE_UNLOCK, .argc = 2, .nkeys = 1,
                      .argv = argv, .argvlen = argvlen};
    status = rlock__exec(lock->client, &cmd, RLOCK__NO_DEADLINE, &reply, NULL);
    if (status == RLOCK_OK)
        status = reply->type == REDIS_REPLY_INTEGER ? (int)(reply->integer != 0)
                                                    : rlock__fail_reply(reply, "FORCE_UNLOCK");
    if (reply != NULL)
        freeReplyObject(reply);
    return rlock__leave_status(&g, status);
}

/*
 * Runs a read-only command about the lock: verb name [owner of the calling
 * thread]. Stores an integer reply in *value (a bulk reply is parsed as a
 * decimal, nil as 0).
 */
static int query(rlock *lock, const char *verb, int with_owner, long long *value) {
    rlock__guard g;
    char owner[RLOCK__OWNER_MAX];
    redisReply *reply = NULL;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    const char *argv[] = {verb, lock->name, owner};
    size_t argvlen[] = {strlen(verb), lock->name_len, 0};
    if (with_owner)
        argvlen[2] = rlock__owner(lock->client, rlock__thread_id(), owner);
    rlock__cmd cmd = {.script = -1, .argc = with_owner ? 3 : 2, .argv = argv, .argvlen = argvlen};
    status = rlock__exec(lock->client, &cmd, RLOCK__NO_DEADLINE, &reply, NULL);
    if (status == RLOCK_OK) {
        if (reply->type == REDIS_REPLY_INTEGER)
            *value = reply->integer;
        else if (reply->type == REDIS_REPLY_NIL)
            *value = 0;
        else if (reply->type == REDIS_REPLY_STRING)
            *value = strtoll(reply->str, NULL, 10);
        else
            status = rlock__fail_reply(reply, verb);
    }
    if (reply != NULL)
        freeReplyObject(reply);
    return rlock__leave_status(&g, status);
}

int rlock_is_locked(rlock *lock) {
    long long fields = 0;
    int status = query(lock, "HLEN", 0, &fields); /* HLEN: WRONGTYPE for a non-lock key */
    return status != RLOCK_OK ? status : fields > 0;
}

/*
 * 1 if the client's own view already says the calling thread does not hold
 * the lock: its loss was found, or its lease ran out by the client's clock.
 * A lost hold stays a tombstone, so the thread's next lock still learns of it.
 */
static int known_not_held(rlock *lock) {
    rlock__hold_info info;
    uint64_t tid = rlock__thread_id();
    int state = rlock__holds_get(&lock->client->holds, lock->name, lock->name_len, tid,
                                 rlock__now_ms(), &info);
    if (state == RLOCK__HOLD_LOST && info.report)
        rlock__event_post(lock->client, RLOCK_EVENT_LOCK_LOST, lock->name, lock->name_len,
                          info.lease_left_ms, RLOCK_ELOST,
                          "lease ran out by the client's clock with no renewal confirmed");
    return state == RLOCK__HOLD_LOST || state == RLOCK__HOLD_EXPIRED;
}

int rlock_is_held_by_current_thread(rlock *lock) {
    rlock__guard g;
    long long held = 0;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    int known = known_not_held(lock);
    rlock__leave(&g);
    if (known)
        return 0;
    status = query(lock, "HEXISTS", 1, &held);
    return status != RLOCK_OK ? status : held != 0;
}

int rlock_hold_count(rlock *lock) {
    long long count = 0;
    int status = query(lock, "HGET", 1, &count);
    if (status != RLOCK_OK)
        return status;
    return count > INT_MAX ? INT_MAX : (int)count;
}

int rlock_remain_ttl(rlock *lock, long long *ttl_ms) {
    long long ttl = 0;
    if (ttl_ms == NULL)
        return RLOCK_EINVAL;
    int status = query(lock, "PTTL", 0, &ttl);
    if (status == RLOCK_OK)
        *ttl_ms = ttl;
    return status;
}
