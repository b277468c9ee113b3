/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kind.h - the lock-kind layer: what a lock is in Redis and how it is taken,
 * given back and waited for. PRIVATE: not installed, not API.
 *
 * A lock kind (rlock__kind) is a table of the operations whose wire format
 * differs between Redisson's lock kinds -- one attempt, a release, a
 * transfer to a waiter, a forced unlock, the read-only questions, the
 * renewal script and how its waiters are woken. The generic parts (waiting,
 * re-basing a stale hold count, telling a lost hold, in-process hand-offs)
 * are written once (acquire.c, release.c) over that table. The reentrant
 * lock (reentrant.c) is the first kind, the fair lock (fair.c) the second,
 * the fenced lock (reentrant.c too: the reentrant lock plus a token
 * counter) the third, the read-write lock's read and write locks (rw.c)
 * the fourth and fifth.
 *
 *   layout.c         Redisson's names: the channel of a lock, the owner field
 *   scripts.c        the script set every client loads (the script table)
 *   lua/             the Lua scripts, one .lua file each, and the Lua they
 *                    share (lua/prelude/); built into C by scripts/lua-gen.sh
 *   reentrant.c      the reentrant kind
 *   fair.c           the fair kind (FIFO queue in Redis, a channel per waiter)
 *   fence.c          the fenced lock's token, and the resource helper (FENCED_SET)
 *   rw.c             the read and write kinds (one hash, a mode, per-hold keys)
 *   hold.c           one owner's hold: its key, its lease TTL, its loss told
 *   acquire.c        lock / try_lock: attempts, waiting, hand-offs received
 *   release.c        unlock (hand-offs given), force unlock, queries
 *
 * Calls go down only: kind uses engine (engine.h), net and core.
 */
#ifndef RLOCK_KIND_H
#define RLOCK_KIND_H

#include "../engine/engine.h"

typedef struct rlock__kind rlock__kind;

#define RLOCK__LOCK_MAGIC 0x726c6b68u /* "rlkh" */

/* A lock handle (public opaque type). */
/*
 * The keys a lock has besides its name, by kind (Redisson's names), made and
 * freed together by layout.c for the handle's kind; every pointer owned,
 * NULL where the kind has no such key.
 */
typedef struct rlock__kind_keys {
    char *queue;                /* fair lock: "redisson_lock_queue:{name}" */
    size_t queue_len;
    char *timeouts;             /* fair lock: "redisson_lock_timeout:{name}" */
    size_t timeouts_len;
    char *token_key;            /* fenced lock: "redisson_lock_token:{name}" */
    size_t token_key_len;
    char *writers;              /* read-write lock: "rlock_rwlock_writers:{name}" */
    size_t writers_len;
    const char *family;         /* a lock of several keys: "{name}" (name if it has a '{'),
                                   which each of its keys names (net.h, rlock__cmd.family);
                                   points into queue, token_key or writers; else NULL */
    size_t family_len;
} rlock__kind_keys;

struct rlock {
    uint32_t magic;
    rlock_client *client;       /* the API layer's; kept alive by its handle count */
    rlock__engine *engine;      /* the client's */
    const char *client_id;      /* the client's UUID (36 chars); the client's memory */
    const rlock__kind *kind;
    char *name;                 /* owned, NUL-terminated copy */
    size_t name_len;
    char *channel;              /* owned: the kind's channel for name */
    size_t channel_len;
    const char *publish_verb;   /* static: what unlock scripts publish with, for this name
                                   (rlock__net_publish_verb), fixed when the handle is made */
    rlock__kind_keys keys;      /* its kind's keys besides the name (layout.c) */
};

/* ---- layout.c: Redisson's names ----------------------------------------------- */

/* kind's keys for name (Redisson's names, see rlock__kind_keys): RLOCK_OK or RLOCK_ENOMEM
 * (nothing left allocated). */
int rlock__kind_keys_make(rlock__kind_keys *k, const rlock__kind *kind, const char *name,
                          size_t len);
void rlock__kind_keys_free(rlock__kind_keys *k);
/*
 * Redisson's prefixName(): "<prefix>:{<name>}", or "<prefix>:<name>" for a
 * name with '{'; owned by the caller. NULL if out of memory.
 */
char *rlock__prefixed_name(const char *prefix, const char *name, size_t len, size_t *out_len);
/*
 * 1 if the keys Redisson derives from name ("<prefix>:{name}", "{name}:<suffix>",
 * or with the name as it is when it has '{') hash to name's Cluster slot:
 * a name without braces, or one with a non-empty "{tag}" (Redis's rule: the
 * text between the first '{' and the next '}'). "a}b" (the derived keys'
 * tag is "a") and "a{b", "a{}b" (no tag: each key hashes whole) do not.
 */
int rlock__derived_keys_share_slot(const char *name, size_t len);

/* ---- the kind table ---------------------------------------------------------------- */

/* The answer of one attempt. */
enum {
    RLOCK__ATTEMPT_NONE = -1,   /* no answer (the command was refused) */
    RLOCK__ATTEMPT_BUSY,        /* another owner holds it: value = its PTTL (-1: none) */
    RLOCK__ATTEMPT_HELD,        /* held: value = the owner's hold count */
    RLOCK__ATTEMPT_STALE        /* the expected count was wrong: value = the true count */
};

typedef struct rlock__attempt {
    int outcome;                /* RLOCK__ATTEMPT_* */
    long long value;
    long long token;            /* HELD on a fenced lock: the acquisition's token; else 0 */
    int64_t sent_ms;            /* when the send Redis answered began (0: not known): the
                                   lease runs from it, not from an earlier send that went
                                   unanswered (every acquire re-arms the TTL when re-sent) */
} rlock__attempt;

/* A release's outcome (rlock__kind.release / .transfer). */
typedef struct rlock__released {
    long long remaining;        /* holds left (0: gone), RLOCK__RELEASE_UNKNOWN, or -2:
                                   refused, nothing changed */
    int gone;                   /* the owner's field was not there */
    int granted;                /* transfer: the waiter now holds the lock */
    int64_t sent_ms;            /* transfer: when it was sent */
    long long token;            /* transfer granted on a fenced lock: the waiter's token */
} rlock__released;

/* The read-only questions. */
enum { RLOCK__ASK_LOCKED, RLOCK__ASK_HELD, RLOCK__ASK_COUNT, RLOCK__ASK_TTL };

struct rlock__kind {
    const char *name;
    /*
     * Sends one attempt for owner, which believes it holds `expected` holds
     * (the idempotence key of re-sends), with a lease of lease_ms (a TTL, not
     * RLOCK_LEASE_WATCHDOG), for an acquire that waits wait_ms (-1: for
     * ever, 0: not at all; a kind with a queue joins it when wait_ms != 0).
     * RLOCK_OK with *answer, or an error.
     */
    int (*attempt)(const rlock *lock, const rlock__owner *owner, long long lease_ms,
                   long long expected, long long wait_ms, int64_t deadline_ms,
                   rlock__attempt *answer);
    /*
     * Reads the reply of an attempt the waiters' machinery sent ahead
     * (wait->send_ahead). RLOCK_OK only for HELD or BUSY; RLOCK_EIO when the
     * outcome is unknown; RLOCK_EREDIS for anything else (try again).
     */
    int (*read_ahead)(const rlock *lock, rlock__conn *ahead, rlock__attempt *answer);
    /*
     * Releases one of owner's `expected` holds, re-sending until deadline_ms.
     * RLOCK_OK with *out filled; an I/O failure leaves out->remaining
     * RLOCK__RELEASE_UNKNOWN; a refusal (an error reply, NOREPLICAS too)
     * leaves it -2: Redis unchanged.
     */
    int (*release)(const rlock *lock, const rlock__owner *owner, long long expected,
                   int64_t deadline_ms, rlock__released *out);
    /* Moves owner's last hold to the offered waiter; NULL: no in-process hand-offs. */
    int (*transfer)(const rlock *lock, const rlock__owner *owner, const rlock__offer *offer,
                    rlock__released *out);
    /* Deletes the lock whoever holds it: 1 deleted, 0 not locked, or an error. */
    int (*force_unlock)(const rlock *lock);
    /* Answers a read-only question (RLOCK__ASK_*) about the lock and owner. */
    int (*ask)(const rlock *lock, int question, const rlock__owner *owner, long long *value);
    const rlock__wait_ops *wait;
    /* How the watchdog renews its holds; also tells its holds apart from another
     * kind's of the same name and owner in the holds table. */
    const rlock__renewer *renewer;
    /* Redisson's prefix of the channel its unlocks publish on (prefixName rule). */
    const char *channel_prefix;
    /*
     * The channel owner's waiter sleeps on, owned by the caller (NULL if out
     * of memory); NULL function: the handle's channel, shared by all its
     * waiters.
     */
    char *(*waiter_channel)(const rlock *lock, const rlock__owner *owner, size_t *len);
    /*
     * An acquire of owner that waited wait_ms ends without the lock (timed
     * out, cancelled, closed, failed): owner leaves the kind's queue in
     * Redis. Best effort, no error. NULL: the kind has no queue.
     */
    void (*give_up)(const rlock *lock, const rlock__owner *owner, long long wait_ms);
    /*
     * Before an acquire of owner: RLOCK_EDEADLK (with its message) when the
     * owner's own holds would make it wait for itself, by the client's holds
     * table -- a read-write lock's reader asking for the write lock -- else
     * RLOCK_OK. NULL: nothing to check.
     */
    int (*self_deadlock)(rlock *lock, const rlock__owner *owner);
    /* The other kind of hold of the same lock (a read-write lock's read and
     * write locks are each other's), or NULL. */
    const rlock__kind *sibling;
    /*
     * No barging: a thread that holds nothing of the lock and asks while
     * threads of this client wait for it queues behind them. Not for a kind
     * whose queue in Redis orders every waiter (the fair lock).
     */
    int local_queue;
    /*
     * A hold whose lease ran out may leave the owner's field in Redis (other
     * holds keep the key alive: a read-write lock's reader, or a writer whose
     * own read holds -- a downgrade -- keep the hash): an unlock that
     * finds the lease ran out by the client's clock still sends the release
     * (expected 0: every hold), to take the field out, and answers
     * RLOCK_ENOTOWNER whatever it finds. 0: that unlock asks nothing.
     */
    int release_expired;
};

/* reentrant.c: Redisson's RLock. */
extern const rlock__kind rlock__reentrant;
/* reentrant.c: the renewal of a hold that is one field of the hash (RENEW, RENEW_NODE). */
extern const rlock__renewer rlock__hash_renewer;
/* fair.c: Redisson's RedissonFairLock (getFairLock). */
extern const rlock__kind rlock__fair;
/*
 * Removes another waiter's entry (owner field) from a fair lock's queue, as
 * that waiter giving up would (FAIR_LEAVE: those behind it move wait_ms
 * earlier; if it was the head and the lock is free, the next live head is
 * woken). For rlockctl's dequeue: a queue stuck behind a stopped head.
 * 1 removed, 0 it was not queued, or an error.
 */
int rlock__fair_dequeue(const rlock *lock, const char *field, size_t field_len,
                        long long wait_ms);
/* rw.c: Redisson's RedissonReadWriteLock (getReadWriteLock): its read lock and its write lock. */
extern const rlock__kind rlock__rw_read, rlock__rw_write;
/*
 * reentrant.c: Redisson's RedissonFencedLock (getFencedLock): the reentrant
 * lock whose ACQUIRE and TRANSFER also INCR lock->keys.token_key and answer the
 * token (the scripts take the counter as an optional KEYS[2]).
 */
extern const rlock__kind rlock__fenced;
/* An attempt's reply (ACQUIRE's and FAIR_ACQUIRE's): a rlock__reply_reader (reentrant.c). */
int rlock__read_attempt(const redisReply *reply, void *arg);
/*
 * The reentrant lock's ACQUIRE, RENEW and RELEASE as commands, with their argument
 * strings (reentrant.c), for those that send them themselves: a fan-out
 * over several locks (group.c). The command points into the struct.
 */
typedef struct rlock__lock_cmd {
    char number[2][24];
    char owner[RLOCK__OWNER_MAX];
    const char *argv[7];
    size_t argvlen[7];
    rlock__cmd cmd;
} rlock__lock_cmd;
/* ACQUIRE of lock for owner with lease_ms, owner believing it holds `expected`. */
void rlock__acquire_cmd(rlock__lock_cmd *a, const rlock *lock, uint64_t owner,
                        long long lease_ms, long long expected);
/* The kind's RENEW of lock alone: its TTL becomes lease_ms if owner holds it (answer {1|0}). */
void rlock__renew_cmd(rlock__lock_cmd *a, const rlock *lock, uint64_t owner, long long lease_ms);
/* RELEASE of one of owner's `expected` holds of lock. */
void rlock__release_cmd(rlock__lock_cmd *a, const rlock *lock, uint64_t owner,
                        long long expected);
/* RELEASE's (and FAIR_RELEASE's) answer: remaining count, nil (field gone), {true count}. */
typedef struct rlock__release_answer {
    long long count;
    int stale, gone;
    int read;                   /* an answer came (else the command was refused) */
} rlock__release_answer;
/* A rlock__reply_reader for RELEASE (arg: rlock__release_answer *). */
int rlock__read_release(const redisReply *reply, void *arg);
/* scripts.c: the script set every client loads (its indexes are RLOCK__SCRIPT_*). */
enum {
    RLOCK__SCRIPT_ACQUIRE,
    RLOCK__SCRIPT_RELEASE,
    RLOCK__SCRIPT_TRANSFER,
    RLOCK__SCRIPT_RENEW,
    RLOCK__SCRIPT_RENEW_NODE,
    RLOCK__SCRIPT_FORCE_UNLOCK,
    RLOCK__SCRIPT_FAIR_ACQUIRE,
    RLOCK__SCRIPT_FAIR_RELEASE,
    RLOCK__SCRIPT_FAIR_LEAVE,
    RLOCK__SCRIPT_FAIR_FORCE_UNLOCK,
    RLOCK__SCRIPT_FENCED_SET,
    RLOCK__SCRIPT_RW_READ_ACQUIRE,
    RLOCK__SCRIPT_RW_WRITE_ACQUIRE,
    RLOCK__SCRIPT_RW_READ_RELEASE,
    RLOCK__SCRIPT_RW_WRITE_RELEASE,
    RLOCK__SCRIPT_RW_FORCE_UNLOCK,
    RLOCK__SCRIPT_RW_LOCKED,
    RLOCK__SCRIPT_RW_RENEW,
    RLOCK__SCRIPT_RW_RENEW_NODE,
    RLOCK__SCRIPT_RW_WRITE_LEAVE,
    RLOCK__SCRIPT_RW_READ_HOLDS,
    RLOCK__SCRIPT_COUNT
};
extern const rlock__script rlock__scripts[RLOCK__SCRIPT_COUNT];
/* The Lua text of a script (the bench baseline runs the very same). */
const char *rlock__script_body(int script);

/* ---- hold.c, acquire.c, release.c: the generic operations ------------------------ */

/* owner's hold of lock in the holds table (the key of its entry). */
rlock__hold_key rlock__hold_of(const rlock *lock, const rlock__owner *owner);

/* The lease a lock's TTL is set to: lease_ms, or the watchdog timeout. */
long long rlock__lease_ttl(const rlock *lock, long long lease_ms);

/*
 * What an acquire is given by its public call: how a blocked acquire is
 * cancelled (the caller's cancel state and its cleanup), and where a fenced
 * lock's token goes.
 */
typedef struct rlock__call {
    int cancel_state;           /* the caller's; the sleep is a cancellation point if ENABLE */
    void (*on_cancel)(void *arg); /* runs if the thread is cancelled while it sleeps */
    void *arg;
    long long *token;           /* on RLOCK_OK, the acquisition's token (0 unless fenced);
                                   NULL: not wanted */
    int member;                 /* an attempt inside a multi-lock's call: its RLOCK_BUSY is
                                   not the call's (the API counts the call's) */
} rlock__call;

/*
 * Acquires lock for owner: lease_ms (or RLOCK_LEASE_WATCHDOG), waiting up
 * to wait_ms (-1: forever, 0: one attempt). RLOCK_OK, RLOCK_BUSY, RLOCK_ELOST
 * (owner's earlier hold was lost: told now, nothing acquired) or an error.
 */
int rlock__acquire(rlock *lock, const rlock__owner *owner, long long wait_ms, long long lease_ms,
                   const rlock__call *call);
/*
 * One attempt in steps, for those that send the attempt themselves (a
 * fan-out, group.c); acquire.c's own attempts run the same steps:
 *   rlock__try_begin    the spare entry, the thread-exit hook, and the hold
 *                       count owner believes it has (t->expected); a hold
 *                       lost since owner's last call is told: RLOCK_ELOST
 *   (send the attempt with t->expected, sent at t->sent_ms)
 *   rlock__try_settle   from its first answer (status, *answer): re-bases a
 *                       stale count with further attempts, gives back an
 *                       acquisition the replicas did not acknowledge; RLOCK_OK
 *                       (held: answer->value the count), RLOCK_BUSY, RLOCK_ELOST
 *                       or an error (RLOCK_EIO: unknown whether it applied)
 *   rlock__try_record   books a held answer in the holds table (unsure: its
 *                       reply was lost, Redis may hold one hold fewer)
 *   rlock__try_end      always, last
 */
typedef struct rlock__try {
    rlock__hold *spare;         /* owned until rlock__try_end */
    rlock__hold_info info;      /* owner's hold before the attempt */
    long long expected;         /* the count the attempt sends */
    int64_t sent_ms;            /* when the attempt that answered was sent */
} rlock__try;
int rlock__try_begin(rlock *lock, const rlock__owner *owner, rlock__try *t);
int rlock__try_settle(rlock *lock, const rlock__owner *owner, long long lease_ms,
                      long long wait_ms, int64_t deadline_ms, rlock__try *t, int status,
                      rlock__attempt *answer);
void rlock__try_record(rlock *lock, const rlock__owner *owner, long long lease_ms, rlock__try *t,
                       long long count, int unsure);
void rlock__try_end(rlock__try *t);
/* Releases one hold of owner (a hand-off to a waiter of this client if one sleeps). */
int rlock__release(rlock *lock, const rlock__owner *owner);

/*
 * The statistics (rlock_stats) of every path that takes or gives back a
 * hold -- acquire.c and release.c for one lock, group.c and redlock.c for a
 * multi-lock's or a Redlock's members -- counted on lock's client: an
 * acquisition at once (wait_start_us 0) or after a wait that began then,
 * handed over by a thread of this client or not; an unlock that worked, and
 * the hold time of a hold it ended (remaining 0; acquired_us 0: unknown).
 */
static inline void rlock__count_acquired(const rlock *lock, int64_t wait_start_us,
                                         int handed_over) {
    rlock__stats *st = &lock->engine->events->stats;
    if (wait_start_us == 0) {
        rlock__count(st, RLOCK__COUNT_ACQUIRED_IMMEDIATELY, 1);
        return;
    }
    rlock__count(st, RLOCK__COUNT_ACQUIRED_AFTER_WAIT, 1);
    rlock__count(st, handed_over ? RLOCK__COUNT_HANDOFFS_LOCAL : RLOCK__COUNT_HANDOFFS_REMOTE, 1);
    rlock__observe_us(&st->wait_time, rlock__now_us() - wait_start_us);
}

static inline void rlock__count_released(const rlock *lock, long long remaining,
                                         int64_t acquired_us) {
    rlock__stats *st = &lock->engine->events->stats;
    rlock__count(st, RLOCK__COUNT_UNLOCKS, 1);
    if (remaining == 0 && acquired_us != 0)
        rlock__observe_us(&st->hold_time, rlock__now_us() - acquired_us);
}

/*
 * 1 if the client's own view already says owner does not hold the lock (its
 * loss was found, or its lease ran out by the client's clock); reports a
 * loss found now, once.
 */
int rlock__known_not_held(rlock *lock, const rlock__owner *owner);

/* ---- fence.c: the fenced lock's token, the resource helper ------------------------ */

/* GET of lock->keys.token_key: the last token handed out (0: none yet). */
int rlock__fence_token(const rlock *lock, long long *token);
/*
 * FENCED_SET: key = value if token >= the highest token in fence_key, which
 * then records it. RLOCK_OK, RLOCK_ESTALE (nothing written) or an error.
 */
int rlock__fenced_set(rlock__net *net, const char *key, size_t key_len, const char *fence_key,
                      size_t fence_key_len, long long token, const char *value, size_t len);

#endif /* RLOCK_KIND_H */
