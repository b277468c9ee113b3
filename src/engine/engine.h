/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.h - the machinery every lock kind shares: which holds this client
 * has (holds.c), lease renewal (watchdog.c), waiting for unlocks
 * (channels.c, subscriber.c, waiters.c), and the client's registration hash
 * (registration.c). PRIVATE: not installed, not API.
 *
 * The engine knows locks only by name and owner id; what a lock's keys and
 * fields look like is the lock kind's business. Where the engine needs the
 * kind (the renewal script and owner field for the watchdog, an attempt
 * sent ahead of a waiter's wake-up), the kind gives it a function or an
 * index: the engine never calls up by name.
 *
 * Calls go down only: engine uses net (net.h) and core.
 */
#ifndef RLOCK_ENGINE_H
#define RLOCK_ENGINE_H

#include "../net/net.h"

/* ---- owners ----------------------------------------------------------------- */

/*
 * Whose hold it is: the calling thread (is_thread, id from
 * rlock__thread_id), or an explicit owner id the application gave (the _as
 * calls: event loops, holds handed between threads), which never takes the
 * thread-exit path. The engine keys everything by id alone.
 */
typedef struct rlock__owner {
    uint64_t id;
    int is_thread;
} rlock__owner;

/* ---- renewers: how the watchdog renews one kind of hold ------------------------ */

#define RLOCK__OWNER_MAX 64

/*
 * How one kind of hold is renewed: a lock kind's (static), recorded by each
 * hold (rlock__grant). It is part of the hold's identity: a read-write lock's
 * reader and writer holds of one owner are two holds of one name, with two
 * owner fields. The watchdog batches holds by script, so kinds that share a
 * script (and differ only in the owner field) share batches.
 */
typedef struct rlock__renewer {
    /*
     * KEYS = lock names, ARGV[1] = the lease in ms, ARGV[1 + i] = the owner
     * field of key i; answers one integer per key: 1 renewed, 0 not held by
     * that owner.
     */
    int script;                 /* index in the net's script set */
    /*
     * On a Cluster: the same for the locks of many slots of one node. KEYS[1]
     * is the first name (it routes the script); ARGV = lease, KEYS[1]'s owner
     * field, then name and owner field of each further lock; answers 1, 0,
     * or -1 for a lock not on that node (a slot moved or moving).
     */
    int node_script;
    /* The owner's field in a lock's hash into buf (RLOCK__OWNER_MAX bytes);
     * its length. arg: the engine's owner_arg (the client id). */
    size_t (*owner_field)(const void *arg, uint64_t owner, char *buf);
    /*
     * The scripts renew a lock once for a run of its holds (a read-write
     * lock's readers: the hash is re-armed once, each reader's own keys
     * too): the watchdog keeps the holds of one lock next to each other.
     */
    int by_lock;
    /*
     * Non-NULL: a hold's field may outlive its lease in Redis while the
     * owner has holds of this other renewer's kind of the same lock (a
     * read-write lock's writer field, in a hash its owner's read holds --
     * a downgrade -- keep alive; Redis queries would read it as held). Its
     * entry is kept past the lease, as over, until the owner's next lock
     * or unlock; when the table fills up it goes only once the owner has
     * no such hold.
     */
    const struct rlock__renewer *kept_by;
    /*
     * A lock of several keys whose script touches them all (a read-write
     * lock's read holds): its family (net.h, rlock__cmd.family) for name into
     * buf (len + 2 bytes), its length. A renewal of such a lock whose keys a
     * migration split is sent alone, with its family, and answered by the
     * script "TRYAGAIN" where a key is elsewhere, so that the net gathers
     * them. NULL: the renewal touches the name only.
     */
    size_t (*family)(const char *name, size_t len, char *buf);
} rlock__renewer;

/* Which hold: owner's hold of lock name, of the kind renewer renews. */
typedef struct rlock__hold_key {
    const char *name;
    size_t len;
    uint64_t owner;
    const rlock__renewer *renewer;
} rlock__hold_key;

/* ---- holds.c: the holds this client has -------------------------------------- */

typedef struct rlock__hold rlock__hold;

typedef struct rlock__holds {
    pthread_mutex_t mutex;      /* guards everything below and every rlock__hold */
    rlock__hold **buckets;      /* owned; chained hash table by name */
    size_t nbuckets;
    size_t count;               /* entries */
    size_t lost;                /* entries that are tombstones (count - lost: held) */
    size_t renewed;             /* entries with renew set */
    size_t renewed_bytes;       /* their names' bytes (a snapshot sizes its arena at once) */
    int64_t earliest_ms;        /* no renewed lease ends before: a lower bound a sweep
                                   that walks the table sets, acquisitions lower */
    int round_open;             /* a snapshot's records point at entries (until round_end) */
    rlock__hold *graveyard;     /* owned: entries unlinked while a round is open */
    uint64_t next_serial;
} rlock__holds;

/* A snapshot of one renewed hold for a watchdog round. */
typedef struct rlock__renewal {
    const char *name;           /* points into the snapshot's arena */
    size_t name_len;
    uint64_t owner;
    uint64_t serial;
    const rlock__renewer *renewer; /* the hold's */
    rlock__hold *hold;          /* the entry it was taken from: not freed until round_end */
    int64_t expires_ms;         /* its lease end by the client's clock */
    int slot;                   /* the watchdog's: the name's Cluster slot, or -1 */
    int node;                   /* the watchdog's: its batch group in the round (Cluster: by
                                   node; renewers that renew by lock apart) */
    size_t index;               /* the watchdog's: its place in the snapshot */
} rlock__renewal;

/* What the client knows of one owner's hold (rlock__holds_get). */
enum {
    RLOCK__HOLD_NONE,           /* nothing known */
    RLOCK__HOLD_HELD,           /* held, lease not run out by the client's clock */
    RLOCK__HOLD_LOST,           /* lost: reported (or to be reported: info.report) */
    RLOCK__HOLD_EXPIRED         /* a lease lock whose lease ran out: over, dropped (kept
                                   where its field may outlive it: renewer.kept_by) */
};

typedef struct rlock__hold_info {
    long long count;            /* HELD, LOST: the hold count (believed, for LOST) */
    long long lease_left_ms;    /* HELD, LOST: lease end - now */
    int unsure;                 /* HELD: an unlock's outcome is unknown */
    int renew;                  /* HELD: renewed by the watchdog */
    int report;                 /* LOST: found by the clock in this call: report it */
    int64_t acquired_us;        /* HELD: when the hold began (rlock__now_us), for its
                                   hold time */
} rlock__hold_info;

/* A confirmed acquisition, for rlock__holds_acquired. */
typedef struct rlock__grant {
    long long count;            /* hold count Redis reported */
    int64_t sent_ms;            /* when the acquiring command was sent */
    long long lease_ms;         /* the TTL it set */
    int renew;                  /* watchdog lock */
    int unsure;                 /* its reply was lost: Redis may hold count - 1 (the
                                   scripts' idempotence settles it at the next call) */
} rlock__grant;

/* rlock__holds_released's count when the unlock's outcome is unknown. */
#define RLOCK__RELEASE_UNKNOWN -1

/*
 * owner's hold of name as of now_ms (one of RLOCK__HOLD_*). A renewed hold
 * past its lease becomes LOST with info->report set: the caller reports it
 * (exactly once). A lease hold past its lease is dropped (kept, over, where
 * its field may outlive it: renewer.kept_by).
 */
int rlock__holds_get(rlock__holds *h, const rlock__hold_key *key, int64_t now_ms,
                     rlock__hold_info *info);
/* The hold's last known hold count (0 = none, lost, or a lease hold past its lease). */
long long rlock__holds_expected(rlock__holds *h, const rlock__hold_key *key);
/* 1 if the hold is there and the watchdog renews it (nothing else changes). */
int rlock__holds_renewing(rlock__holds *h, const rlock__hold_key *key);
/* Drops the hold's entry (a tombstone its owner has now learnt of). */
void rlock__holds_forget(rlock__holds *h, const rlock__hold_key *key);
/*
 * A call of owner found its hold gone from Redis: drops the entry and
 * returns 1 if the loss was not reported yet (the caller reports it), else 0.
 */
int rlock__holds_found_gone(rlock__holds *h, const rlock__hold_key *key, long long *lease_left_ms,
                            int64_t now_ms);
/*
 * An unlinked entry allocated before the round trip, so that recording the
 * acquisition afterwards cannot fail. Free a leftover one with rlock__free.
 */
rlock__hold *rlock__holds_spare(const char *name, size_t len);
/* Records a confirmed acquisition; may consume *spare (then sets it to NULL). */
void rlock__holds_acquired(rlock__holds *h, const rlock__hold_key *key, const rlock__grant *grant,
                           rlock__hold **spare);
/*
 * The hold now has a fixed lease: its TTL was set to lease_ms by a command
 * sent at sent_ms, and the watchdog no longer renews it (a multi-lock's
 * member, renewed while the others were waited for).
 */
void rlock__holds_relet(rlock__holds *h, const rlock__hold_key *key, int64_t sent_ms,
                        long long lease_ms);
/*
 * Brackets an unlock: begin before sending the release, then released() with
 * the remaining count (0 = fully released, entry dropped;
 * RLOCK__RELEASE_UNKNOWN = outcome unknown, entry kept and marked unsure;
 * other < 0 = unchanged). While an unlock is in flight the watchdog never
 * reports the lock lost: a key missing then may be the unlock's own doing.
 */
void rlock__holds_begin_release(rlock__holds *h, const rlock__hold_key *key);
void rlock__holds_released(rlock__holds *h, const rlock__hold_key *key, long long count);
/* The entries held now (not tombstones), for the held_locks gauge. */
size_t rlock__holds_held(rlock__holds *h);
/* Drops every entry of an owner that is gone (a thread that exited). */
void rlock__holds_owner_gone(rlock__holds *h, uint64_t owner);

/* ---- watchdog.c: lease renewal ------------------------------------------------- */

typedef struct rlock__watchdog {
    rlock__worker worker;       /* its mutex guards stop and renew_now */
    int renew_now;              /* a new master took over: a round at once */
    const void *owner_arg;      /* the renewers' owner_field argument; read-only after start */
    atomic_ullong rounds;       /* completed renewal rounds (for tests and bench) */
} rlock__watchdog;

/* ---- waiting: channels, the subscriber thread, waiters ---------------------------- */

typedef struct rlock__channel rlock__channel;
typedef struct rlock__waiter rlock__waiter;

/* What a lock kind tells the waiting machinery about its waiters. */
typedef struct rlock__wait_ops {
    /*
     * Sends w's next attempt ahead of its wake-up on an idle pooled
     * connection (rlock__send_ahead), with exactly what w's own attempt
     * would send, so that attempt is a safe re-send of it. Runs on the
     * subscriber thread with the waiters' mutex held: must not block.
     * NULL: the kind sends nothing ahead.
     */
    rlock__conn *(*send_ahead)(const rlock__waiter *w);
    /*
     * An unlock message that wakes one waiter of a lock wakes a sleeping
     * waiter of this kind before the others (a read-write lock's writer:
     * the readers waiting here wait behind it).
     */
    int woken_first;
} rlock__wait_ops;

typedef struct rlock__waiters {
    rlock__worker worker;       /* the subscriber thread; its mutex guards every field
                                   below, every channel and the waiters' shared fields */
    rlock__channel *channels;   /* owned list: channels with waiters or unsubscribing */
    int wake_pipe[2];           /* waiters -> subscriber thread; O_NONBLOCK|O_CLOEXEC */
    int dirty;                  /* the subscription set changed since last sent */
    int64_t subscriber_wakes_ms; /* when the subscriber's poll() ends by itself
                                   (RLOCK__NO_DEADLINE: only a wake-up ends it) */
    atomic_int resubscribe;     /* a new master took over: reconnect, subscribe again */
    int queue_calls;            /* calls that may stand in a kind's queue in Redis and
                                   have not left it yet (rlock__wait_queue_begin); guarded
                                   by worker.mutex */
    pthread_cond_t queues_left; /* broadcast when queue_calls drops to 0, waited on under
                                   worker.mutex by close only (rlock__waiters_drain_queues);
                                   made and destroyed with the subscriber (subscriber.c) */
} rlock__waiters;

enum {
    RLOCK__HANDOFF_NONE,        /* no offer open */
    RLOCK__HANDOFF_OFFERED,     /* a releasing thread is moving the lock to this waiter */
    RLOCK__HANDOFF_GRANTED,     /* moved: the waiter holds the lock in Redis */
    RLOCK__HANDOFF_DECLINED     /* not moved (or outcome unknown): try again */
};

/*
 * A thread waiting for a lock. Lives on the waiting thread's stack from
 * rlock__wait_join to rlock__wait_leave.
 */
struct rlock__waiter {
    rlock__owner owner;         /* set before join; read-only while joined */
    long long lease_ms;         /* its acquire's lease (or RLOCK_LEASE_WATCHDOG); ditto */
    const char *name;           /* the lock's name (the handle's); ditto */
    size_t name_len;
    const rlock__wait_ops *ops; /* the lock kind's; ditto */
    const void *lock;           /* the handle, for ops; ditto */
    /* The rest belongs to the waiting machinery and is guarded by its mutex. */
    rlock__waiter *next;        /* the channel's queue, oldest first */
    rlock__channel *channel;
    int unheard;                /* unlock messages on channel do not reach it (sharded
                                   pub/sub, name and channel in different slots): poll */
    pthread_cond_t wakeup;      /* this waiter sleeps here, and only it; initialised by
                                   join, destroyed by leave (with the mutex) */
    int sleeping;               /* asleep and not yet signalled: may be offered the lock */
    int permit;                 /* an unlock message it has not acted on yet */
    int handoff;                /* RLOCK__HANDOFF_* */
    rlock__conn *ahead;         /* its attempt, sent ahead by the subscriber thread; the
                                   waiter reads the reply */
    int64_t sent_ms;            /* when that attempt, or a granted hand-off's transfer,
                                   was sent: the start of the waiter's lease */
    long long token;            /* a granted hand-off's fencing token (fenced lock), else 0;
                                   written by settle, read by the waiter once granted */
};

/* An open offer, held by the releasing thread until it settles it. */
typedef struct rlock__offer {
    rlock__waiter *waiter;      /* stays valid (it cannot leave) until settled */
    rlock__owner owner;         /* copies of the waiter's owner and lease_ms */
    long long lease_ms;
    long long token;            /* the releasing thread's, before settling: the fencing
                                   token the transfer gave the waiter (fenced lock), else 0 */
} rlock__offer;

/* ---- registration.c: the client's hash in Redis while it is open ------------------ */

typedef struct rlock__registration {
    pthread_mutex_t mutex;      /* guards the fields below but initialised */
    pthread_cond_t idle;        /* broadcast when a write ends */
    int initialised;            /* written by init/destroy only (client open/close) */
    const char **argv;          /* owned: HSET key field value ...; NULL: not registering */
    size_t *argvlen;            /* in argv's block */
    int argc;
    char *text;                 /* owned: the strings argv points to */
    long long ttl_ms;           /* set at start; argv, argvlen, text, ttl_ms and ttl change
                                   no more once argv is set: a write reads them unlocked */
    char ttl[24];               /* ttl_ms as PEXPIRE's argument */
    int64_t next_ms;            /* when the next write is due */
    int busy;                   /* a write is in flight (made without the mutex) */
    int stopped;                /* close began: no more writes */
    int written;                /* a write worked: close deletes the hash */
    int failing;                /* the last write failed (logged at the first failure) */
    int logged_ok;              /* REGISTERED was logged (again after failures) */
} rlock__registration;

/* ---- the engine: what the lock kinds are given ---------------------------------- */

typedef struct rlock__engine {
    const rlock__settings *settings; /* read-only; the client's */
    rlock__net *net;
    rlock__events *events;
    rlock__holds holds;
    rlock__watchdog watchdog;
    rlock__waiters waiters;
    rlock__registration registration;
} rlock__engine;

/* registration.c (the struct above; its set-up: internal.h) */
/*
 * Registers the client: the hash key with nfields (name, value) pairs of
 * fields (copied), TTL max(watchdog_timeout_ms, 1 s), written now (by a
 * command timeout) and kept alive by the watchdog. A failed write is
 * counted and logged, not returned: RLOCK_OK or RLOCK_ENOMEM.
 */
int rlock__registration_start(rlock__engine *e, const char *key, const char *const *fields,
                              int nfields);
/*
 * Close, first step: no more writes; the hash deleted on an idle pooled
 * connection (at most about half a second; skipped with Redis down).
 */
void rlock__registration_stop(rlock__engine *e);

/*
 * Starts the watchdog and subscriber threads over e's net, holds and
 * events (which must be ready). Undo with rlock__engine_stop and
 * rlock__engine_destroy, also after a failure.
 */
int rlock__engine_start(rlock__engine *e, const void *owner_arg);
/* Close, first step: a master switch is no longer told; waiters return
 * RLOCK_ECLOSED; the subscriber thread ends. */
void rlock__waiters_stop(rlock__engine *e);
/* Close, after commands in flight were aborted: the watchdog ends. */
void rlock__watchdog_stop(rlock__engine *e);
/* Frees the channels and the table (no thread, no call left). */
void rlock__engine_destroy(rlock__engine *e);

/*
 * Registers w (owner, lease_ms, name, ops, lock filled in) as a waiter on
 * channel and waits (until deadline_ms, and at most about a command
 * timeout) for the subscription to be confirmed, so that no unlock message
 * published after this call returns can be missed. On RLOCK_OK w must later
 * go to rlock__wait_leave().
 */
int rlock__wait_join(rlock__engine *e, const char *channel, size_t len, int64_t deadline_ms,
                     rlock__waiter *w);
/*
 * The channel's epoch: read it before an attempt and pass it to the wait
 * that follows, so a nudge (reconnect, resubscription) that lands during the
 * attempt is not slept through.
 */
unsigned rlock__wait_epoch(rlock__engine *e, const rlock__waiter *w);
/*
 * Sleeps until an unlock message for the channel (one per waiter), the epoch
 * moving past `epoch`, a settled hand-off, deadline_ms, or close. While a
 * hand-off to w is open it sleeps on regardless of deadline and close. A
 * cancellation point when cancel_state is PTHREAD_CANCEL_ENABLE. Sets
 * *granted when the lock was handed to w (w's owner now holds it in Redis:
 * the caller records the hold). Sets *ahead when the unlock message that woke
 * w came with w's attempt already sent: the caller reads its reply (always,
 * even on RLOCK_ECLOSED). Returns RLOCK_OK or RLOCK_ECLOSED (never with
 * *granted set).
 */
int rlock__wait_sleep(rlock__engine *e, rlock__waiter *w, unsigned epoch, int64_t deadline_ms,
                      int cancel_state, int *granted, rlock__conn **ahead, int64_t *sent_ms);
/*
 * Unregisters w. If a hand-off to w is still open (w's thread was cancelled
 * while offered), first waits for it to settle. Returns 1 if w was granted a
 * lock it never claimed: the caller must release it. *ahead receives an
 * attempt sent ahead for w that nobody read (cancelled): the caller reads it.
 * acquired: w leaves with the lock (its channel, if w was its last waiter,
 * is unsubscribed now; else it lingers, channels.h).
 */
int rlock__wait_leave(rlock__engine *e, rlock__waiter *w, int acquired, rlock__conn **ahead);
/* 1 if waiters of this client wait for lock name on channel (on a confirmed subscription). */
int rlock__wait_queued(rlock__engine *e, const char *channel, size_t channel_len,
                       const char *name, size_t name_len);
/*
 * Picks the oldest sleeping waiter for lock name for a hand-off, unless none
 * sleeps or local_handoffs offers in a row have been made (then this unlock
 * must release to everybody). Returns 1 with *offer filled, else 0.
 */
int rlock__wait_offer(rlock__engine *e, const char *channel, size_t channel_len,
                      const char *name, size_t name_len, rlock__offer *offer);
/* Tells the offered waiter the outcome and wakes it. */
void rlock__wait_settle(rlock__engine *e, const rlock__offer *offer, int granted, int64_t sent_ms);

/*
 * A call that may stand in a lock kind's queue in Redis (a fair lock's
 * queue, a read-write lock's waiting writers) is counted from before its
 * first attempt until it has left that queue (its kind's give_up sent), so
 * that close lets its leave reach Redis before the network goes: a closed
 * client's waiter leaves at once, as one that gives up otherwise does.
 * Begin returns RLOCK_ECLOSED once close has begun (nothing is counted);
 * every RLOCK_OK is matched by one end.
 */
int rlock__wait_queue_begin(rlock__engine *e);
void rlock__wait_queue_end(rlock__engine *e);
/* Whether close has begun: a counted call that got its lock meanwhile gives it back. */
int rlock__wait_closing(rlock__engine *e);
/* Close, after rlock__waiters_stop: waits until no call is counted, or deadline_ms. */
void rlock__waiters_drain_queues(rlock__engine *e, int64_t deadline_ms);

#endif /* RLOCK_ENGINE_H */
