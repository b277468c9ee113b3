/*
 * rlock.h - Redisson-compatible reentrant, cross-process mutexes on Redis.
 *
 * This header is the whole public contract of librlock. Anything not declared
 * here (everything under src/, every rlock__ name) is private and may change
 * without notice.
 *
 * Model
 *   rlock_client   one per process (or per Redis deployment): a connection pool,
 *                  a watchdog thread that renews leases, and a subscriber thread
 *                  that wakes waiters on unlock messages. Thread-safe.
 *   rlock          a named lock handle obtained from a client (Redisson's
 *                  getLock()). Thread-safe and shareable between threads; the
 *                  owner of a lock is the *calling thread*, not the handle.
 *
 * Ownership is per thread: the lock is held by "<client uuid>:<thread id>",
 * where the thread id is unique for the life of the process and never reused.
 * A thread that locks twice must unlock twice (hold counts).
 *
 * Return codes: 0 is success, positive values are non-error outcomes
 * (RLOCK_BUSY), negative values are errors. New codes may be added in later
 * versions; rlock_strerror() and rlock_status_name() accept any int.
 *
 * Errors are returned, never stored on a shared handle. Nothing in this
 * library aborts the process on caller input.
 *
 * Cancellation: every function disables thread cancellation while it runs,
 * except while rlock_lock*() / rlock_try_lock() sleep waiting for the lock,
 * which is a cancellation point (the C counterpart of Java's
 * lockInterruptibly()). A cancelled waiter leaves no subscription, waiter
 * entry, memory or lock behind.
 *
 * Fork: a forked child must not use a client it inherited. Every call on an
 * inherited client or its handles returns RLOCK_ECLOSED without touching the
 * parent's connections, threads or locks. rlock_client_close() and
 * rlock_free() on inherited objects are safe and release nothing. The child
 * may open a client of its own.
 */
#ifndef RLOCK_H
#define RLOCK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define RLOCK_EXTERN __attribute__((visibility("default")))
#else
#define RLOCK_EXTERN
#endif

/*
 * Version. The shared library's soname is librlock.so.RLOCK_VERSION_MAJOR;
 * the major number changes whenever a declaration in this header changes in
 * a way that breaks existing binaries (a removed function, a changed
 * signature, a reordered field of rlock_config).
 */
#define RLOCK_VERSION_MAJOR 0
#define RLOCK_VERSION_MINOR 4
#define RLOCK_VERSION_PATCH 0
#define RLOCK_VERSION_NUM                                                     \
    ((RLOCK_VERSION_MAJOR << 16) | (RLOCK_VERSION_MINOR << 8) |               \
     RLOCK_VERSION_PATCH)
#define RLOCK_VERSION_STRING "0.4.0"

/* The library's version string ("0.3.0"); static, never NULL. */
RLOCK_EXTERN const char *rlock_version(void);
/* The library's RLOCK_VERSION_NUM, to compare with the header's. */
RLOCK_EXTERN unsigned rlock_version_num(void);

/*
 * Status codes: XX(name, value, message). One table; the enumerators,
 * rlock_strerror() and rlock_status_name() are all generated from it.
 *
 *   OK        success
 *   BUSY      try_lock: another owner held the lock for the whole wait
 *   EINVAL    a bad argument (NULL, empty or oversized name, bad lease, a
 *             config field out of range, a malformed url)
 *   ENOTOWNER unlock by a thread that holds nothing: never held, already
 *             released, its lease ran out, or its loss was already reported
 *             (on_lock_lost / RLOCK_EVENT_LOCK_LOST); nothing changed
 *   EIO       Redis unreachable, connection lost, or no reply in time;
 *             rlock_last_error() names host:port and the system error
 *   EREDIS    Redis answered an error not listed below (WRONGTYPE, OOM,
 *             READONLY, ...); rlock_last_error() has Redis's text
 *   ENOMEM    an allocation of rlock's own failed
 *   ECLOSED   client closed, or used in a forked child
 *   ELOST     the calling thread believed it held the lock, and its hold is
 *             gone (deleted, force-unlocked, expired while its watchdog could
 *             not renew it, Redis restarted empty, replaced by another
 *             owner). Returned once, by the first lock/try_lock after the
 *             loss, or by an unlock that would have left the thread still
 *             holding (hold count >= 2); that call changed nothing, and the
 *             thread holds nothing: its next call starts afresh. (The last
 *             unlock of a lost hold returns ENOTOWNER: the thread holds
 *             nothing, as it wanted; the loss is reported to on_lock_lost.)
 *   ENOTLOCK  the name holds a Redis hash that is not a lock (no TTL, or a
 *             field not of the form "<owner id>:<decimal thread id>"): acquire, unlock and
 *             force_unlock touch nothing
 *   EAUTH     Redis refused the credentials (WRONGPASS, NOAUTH)
 *   ENOPERM   an ACL refused a command, key or channel (NOPERM); nothing
 *             was changed in Redis
 *   ENOREPL   replica_acks is set and fewer replicas acknowledged the write
 *             (WAIT) within replica_ack_timeout_ms (or a re-send after a lost
 *             reply left it unknown), or the master refused it with
 *             NOREPLICAS (min-replicas-to-write: nothing changed). An
 *             acquisition is given back (the caller holds nothing); an
 *             acknowledged-too-few unlock or force unlock did apply on the
 *             master, but a failover now may undo it.
 */
#define RLOCK_STATUS_MAP(XX)                                                  \
    XX(OK, 0, "success")                                                      \
    XX(BUSY, 1, "lock held by another owner for the whole wait")             \
    XX(EINVAL, -1, "invalid argument")                                        \
    XX(ENOTOWNER, -2, "lock not held by the calling thread")                 \
    XX(EIO, -3, "Redis unreachable, connection lost or command timed out")   \
    XX(EREDIS, -4, "Redis answered with an error")                           \
    XX(ENOMEM, -5, "out of memory")                                           \
    XX(ECLOSED, -6, "client closed, or used in a forked child")             \
    XX(ELOST, -7, "the calling thread's hold was lost; it holds nothing now") \
    XX(ENOTLOCK, -8, "the key under this name is not a lock; left untouched") \
    XX(EAUTH, -9, "Redis refused the credentials (NOAUTH, WRONGPASS)")      \
    XX(ENOPERM, -10, "Redis ACL refused a command, key or channel (NOPERM)") \
    XX(ENOREPL, -11, "fewer replicas acknowledged the write than replica_acks")

/* RLOCK_OK, RLOCK_BUSY, RLOCK_EINVAL, ...: one enumerator per table row. */
enum rlock_status {
#define RLOCK__STATUS_ENUM(name, value, message) RLOCK_##name = (value),
    RLOCK_STATUS_MAP(RLOCK__STATUS_ENUM)
#undef RLOCK__STATUS_ENUM
};

/*
 * Static English text for any status: never NULL, never allocates. Unknown
 * values give "unknown rlock status".
 */
RLOCK_EXTERN const char *rlock_strerror(int status);
/* "RLOCK_OK", "RLOCK_EIO", ...; "RLOCK_UNKNOWN" for unknown values. Static. */
RLOCK_EXTERN const char *rlock_status_name(int status);

/* Names are any bytes but NUL, 1 byte to RLOCK_MAX_NAME_LEN bytes. */
#define RLOCK_MAX_NAME_LEN 65536
/* Largest lease accepted, in ms (about 34 years). */
#define RLOCK_MAX_LEASE_MS (1LL << 40)
/* lease_ms value meaning "no fixed lease: the watchdog renews it". */
#define RLOCK_LEASE_WATCHDOG -1LL

typedef struct rlock_client rlock_client; /* thread-safe */
typedef struct rlock rlock;               /* named lock handle; thread-safe, shareable */

/*
 * Client configuration. Always fill it with rlock_config_init() first, then
 * change the fields you need: the init call records the struct's size, which
 * lets later versions append fields without breaking binaries built against
 * this header. The client copies everything it needs (including the url
 * string) during rlock_client_open(); the struct may be freed afterwards.
 */
/*
 * Events: what the client tells the application as it happens, on the
 * client's own event thread (never on the watchdog or subscriber thread, so
 * a slow callback delays no renewal). Events are delivered one at a time, in
 * the order they happened.
 */
typedef enum rlock_event_kind {
    /* A renewal of the lock failed (I/O error, timeout, error reply); the
     * watchdog keeps trying while lease_left_ms lasts. A round waits for its
     * reply until the earlier of command_timeout_ms and the lease end: with a
     * command timeout as long as the lease left, the loss comes unwarned. */
    RLOCK_EVENT_RENEWAL_FAILED = 1,
    /* The calling thread's hold of the lock is gone: found missing in Redis,
     * or its lease ran out by the client's clock with no renewal confirmed
     * (reported then even if Redis never answers again). Exactly once per
     * hold; on_lock_lost is called for the same loss. */
    RLOCK_EVENT_LOCK_LOST = 2,
    /* A connection to Redis failed (command or subscriber connection): once,
     * until a connection works again. */
    RLOCK_EVENT_CONNECTION_LOST = 3,
    /* A connection to Redis works again after RLOCK_EVENT_CONNECTION_LOST: once. */
    RLOCK_EVENT_RECONNECTED = 4,
    /* Redis refused SUBSCRIBE on the lock's channel (status RLOCK_ENOPERM for
     * an ACL refusal, detail Redis's text): once per channel and connection;
     * the lock's waiters poll every 100 ms instead of sleeping until an
     * unlock message. */
    RLOCK_EVENT_SUBSCRIBE_REFUSED = 5,
    /* Sentinel: the master changed (detail "old -> new"); commands, the
     * subscription and renewals move to the new master (once per switch).
     * Cluster: the set of masters changed, a failover (detail "+new -old"
     * for each master that came or went); renewals run at once, waiters
     * subscribe again. A slot moving between masters is not told. */
    RLOCK_EVENT_MASTER_SWITCHED = 6
} rlock_event_kind;

typedef struct rlock_event {
    rlock_event_kind kind;
    /* The lock's name (RENEWAL_FAILED with more than 64 locks in the failed
     * round: NULL, one event for the round), or NULL. */
    const char *name;
    /* RENEWAL_FAILED, LOCK_LOST: the lease left by the client's clock, from
     * the send time of the last acquisition or renewal Redis confirmed
     * (<= 0: run out). -1 for the other kinds. */
    long long lease_left_ms;
    int status;             /* the rlock status behind the event (RLOCK_EIO, ...) */
    const char *detail;     /* for a person: Redis's error text or host:port and
                               the system error; never NULL */
} rlock_event;

/*
 * Client configuration. Always fill it with rlock_config_init() first, then
 * change the fields you need: the init call records the struct's size, which
 * lets later versions append fields without breaking binaries built against
 * this header. The client copies everything it needs (including the url
 * string) during rlock_client_open(); the struct may be freed afterwards.
 * A field out of its range makes rlock_client_open() return RLOCK_EINVAL.
 */
typedef struct rlock_config {
    size_t struct_size; /* set by rlock_config_init(); do not change */
    /*
     * One of (user and password may be %-encoded; host may be [ipv6]; port
     * 1..65535; db >= 0; default "redis://127.0.0.1:6379"):
     *
     *   redis://[[user]:password@]host[:port][/db]       one server (port 6379)
     *   unix:///path/to/socket[?db=N]                    one server, local socket
     *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/master
     *                    [?db=N][&sentinel_user=U][&sentinel_password=P]
     *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
     *
     * redis-sentinel: the hosts are sentinels (port 26379 by default), tried
     * in turn; master is the name they monitor (%-encoded if needed). user,
     * password and db are for the master; sentinel_user and
     * sentinel_password (%-encoded) authenticate to the sentinels. The
     * master each sentinel names is checked with ROLE before any use, and
     * followed through failovers (docs/design.md section 6).
     *
     * redis-cluster: the hosts are seed nodes of one Redis Cluster (port
     * 6379 by default), tried in turn for CLUSTER SLOTS; user and password
     * are for every node (a cluster has only db 0). Each lock goes to the
     * master of its name's slot (Redis's hash-tag rule); MOVED, ASK,
     * TRYAGAIN, CLUSTERDOWN, slot migrations and failovers are followed
     * (docs/design.md section 6). pool_size is per master (connections idle
     * for 30 s close, one per master stays).
     */
    const char *url;
    /* Lease of watchdog locks, renewed every third of it. Default 30000;
     * 30..RLOCK_MAX_LEASE_MS. */
    long long watchdog_timeout_ms;
    /* Bound of one connection attempt (connect, AUTH, SELECT), and never more
     * than the calling function's own bound. Default 5000; 1..3600000. */
    int connect_timeout_ms;
    /* Bound of one command: queueing for a pooled connection, connecting,
     * sending and the reply, enforced with absolute deadlines (signals do not
     * stretch it). Default 3000; 1..3600000. */
    int command_timeout_ms;
    int pool_size;                 /* command connections; default 8; 1..1024 */
    int retry_attempts;            /* re-sends of a failed command; default 3; 0..100 */
    int retry_interval_ms;         /* longest pause between re-sends; default 1000; 0..3600000 */
    /*
     * Called once for each hold of the client's threads that is lost (see
     * RLOCK_EVENT_LOCK_LOST), on the client's event thread. name is valid
     * only during the call. The callback may call rlock functions (a blocking
     * one delays later events, never renewals) but not rlock_client_close()
     * on this client. NULL = no callback.
     */
    void (*on_lock_lost)(const char *name, void *arg);
    void *callback_arg;            /* passed to on_lock_lost and on_event */
    /*
     * In-process hand-off: when a thread's last unlock finds another thread of
     * this client sleeping in rlock_lock*()/rlock_try_lock() on the same lock,
     * one script moves the lock straight to that thread (oldest first): no
     * PUBLISH, no wake-up of other processes, no acquisition round trip for
     * the waiter. At most local_handoffs unlocks in a row do so; the next one
     * releases the lock to everybody, so waiters in other processes are not
     * starved. 0 turns hand-offs off (every unlock releases, as Redisson
     * does). Never for fair locks (rlock_get_fair): their queue in Redis
     * decides. Default 4; 0..1000.
     */
    int local_handoffs;
    /*
     * Called for every event (see rlock_event_kind) on the client's event
     * thread; event and its strings are valid only during the call. Same
     * rules as on_lock_lost. NULL = none. (Appended in 0.2.)
     */
    void (*on_event)(const rlock_event *event, void *arg);
    /*
     * Replica acknowledgement (WAIT), opt-in. When > 0, every write --
     * acquire, unlock, renewal, force unlock -- is followed on the same
     * connection, in the same round trip, by WAIT replica_acks
     * replica_ack_timeout_ms; fewer acknowledgements give RLOCK_ENOREPL (an
     * acquisition is rolled back first; a renewal not acknowledged does not
     * extend the lease by the client's clock). WAIT is not consensus: see
     * docs/design.md. Default 0 (off); 0..100. (Appended in 0.3.)
     */
    int replica_acks;
    /* How long WAIT waits for the acknowledgements. Default 1000; 1..3600000. */
    int replica_ack_timeout_ms;
    /*
     * Which pub/sub unlock messages use (Redisson's shardedSubscriptionMode):
     * a waiter hears only the kind its lock's holders publish, so every
     * client sharing a lock -- Redisson's too -- must use the same kind.
     * RLOCK_PUBSUB_AUTO (default): sharded on a Redis Cluster whose nodes
     * answer PUBSUB SHARDNUMSUB (Redis >= 7.0), as Redisson >= 3.22 does by
     * default; classic elsewhere. (Appended in 0.4.)
     */
    int pubsub_mode;
    /*
     * Fair locks (rlock_get_fair) only: how long a waiter of rlock_lock*()
     * may stay at the head of the queue without taking the lock before the
     * other waiters, of every process, treat it as dead and drop it (its
     * deadline in redisson_lock_timeout:{name} is set with this value when it
     * joins). Redisson's fairLockWaitTimeout, whose default this is: a Java
     * waiter's deadline uses its client's setting, a C waiter's this one.
     * Smaller: a crashed waiter stalls the queue for less time, but a live
     * waiter that waits longer than its deadline at the head (a holder
     * keeping the lock that long) loses its place and queues again at the
     * tail. rlock_try_lock() waiters use their wait_ms instead, as Redisson's
     * tryLock(wait) does. Default 300000; 1..RLOCK_MAX_LEASE_MS.
     * (Appended in 0.4.)
     */
    long long fair_wait_timeout_ms;
} rlock_config;

/* rlock_config.pubsub_mode */
enum {
    RLOCK_PUBSUB_AUTO = 0,    /* sharded on a cluster that supports it, else classic */
    RLOCK_PUBSUB_CLASSIC = 1, /* SUBSCRIBE / PUBLISH: any node hears every message */
    RLOCK_PUBSUB_SHARDED = 2  /* SSUBSCRIBE / SPUBLISH on the channel's shard (Redis >= 7.0) */
};

/* Fills cfg with the defaults above. cfg must not be NULL. */
RLOCK_EXTERN void rlock_config_init(rlock_config *cfg);

/*
 * Opens a client: parses the url, connects one pool connection (AUTH, SELECT),
 * loads the Lua scripts, and starts the watchdog, subscriber and event threads.
 * With a redis-sentinel:// url it first asks the sentinels in turn (each
 * step bounded by 1 s) for the master, checks it with ROLE, and starts a
 * thread that follows failovers. With a redis-cluster:// url it first asks
 * the seeds in turn (each step bounded by 1 s) for CLUSTER SLOTS, and starts
 * a thread that keeps the slot table true; it then chooses the pub/sub kind
 * (pubsub_mode; AUTO asks PUBSUB SHARDNUMSUB). cfg NULL means all defaults.
 * On success *out is the new client.
 *
 * Returns RLOCK_OK; RLOCK_EINVAL (NULL out, a field out of range, a malformed
 * url, cfg not initialised by rlock_config_init, RLOCK_PUBSUB_SHARDED on a
 * server without sharded pub/sub); RLOCK_EIO (cannot resolve
 * the host, connection refused, or no answer within connect_timeout_ms: see
 * rlock_last_error_info()); RLOCK_EAUTH (wrong user or password, or a
 * password is required); RLOCK_ENOPERM (the ACL user may not run a command
 * rlock needs: SELECT, SCRIPT LOAD); RLOCK_EREDIS (any other refusal, e.g.
 * SELECT of a db that does not exist; a master name no sentinel knows:
 * the message says what each sentinel answered; a redis-cluster:// seed that
 * is not in cluster mode: "cluster support disabled"); RLOCK_ENOMEM. Blocks
 * for at most connect_timeout_ms + command_timeout_ms (Sentinel, Cluster:
 * plus 1 s per sentinel or seed tried). Thread-safe.
 */
RLOCK_EXTERN int rlock_client_open(const rlock_config *cfg, rlock_client **out);

/*
 * Closes a client. NULL is a no-op. Threads blocked in rlock_lock*() or
 * rlock_try_lock() on its handles return RLOCK_ECLOSED; commands in flight are
 * aborted (RLOCK_ECLOSED); later calls on its handles return RLOCK_ECLOSED.
 * Locks still held are NOT released: renewal stops and they expire after
 * their lease (watchdog_timeout_ms for watchdog locks). Lock handles stay
 * valid until rlock_free(). Blocks until its threads have stopped and every
 * call in flight has returned: normally well under a second, at most about
 * connect_timeout_ms if a connection attempt is under way. Must be called
 * once, and not from the on_lock_lost callback. In a forked child it only
 * marks the inherited client; it releases nothing of the parent's.
 */
RLOCK_EXTERN void rlock_client_close(rlock_client *client);

/*
 * The client's UUID (lower-case, 36 characters), the first half of every
 * owner field it writes. Owned by the client; valid until the client's last
 * handle is freed and the client closed. NULL if client is NULL.
 */
RLOCK_EXTERN const char *rlock_client_id(const rlock_client *client);

/*
 * Makes a handle for the lock called name (Redisson's getLock()). No Redis
 * traffic. The name is copied. Many handles may name the same lock; they are
 * the same lock.
 *
 * Returns RLOCK_OK; RLOCK_EINVAL (NULL argument, empty name, name longer than
 * RLOCK_MAX_NAME_LEN); RLOCK_ECLOSED; RLOCK_ENOMEM. Thread-safe.
 */
RLOCK_EXTERN int rlock_get(rlock_client *client, const char *name, rlock **out);

/*
 * Makes a handle for the FAIR lock called name (Redisson's getFairLock()).
 * No Redis traffic. The name is copied. The handle works with every call
 * below (rlock_lock*, rlock_try_lock, rlock_unlock, rlock_force_unlock, the
 * queries, rlock_free); it is reentrant and renewed by the watchdog like a
 * lock of rlock_get().
 *
 * FIFO: a thread whose attempt finds the lock busy joins a queue in Redis
 * (Redisson's layout: the list "redisson_lock_queue:{name}" and the sorted
 * set "redisson_lock_timeout:{name}" of deadlines), and the lock goes to the
 * queue's head only: an unlock publishes "0" on the head's own channel,
 * "redisson_lock__channel:{name}:<client id>:<thread id>". Threads of all
 * processes and languages (Java RedissonFairLock too) are served in the
 * order their first attempt reached Redis; no in-process hand-off
 * (rlock_config.local_handoffs) ever overtakes the queue. Limits:
 * - rlock_try_lock() with wait_ms 0 never queues (as Redisson's tryLock()),
 *   and takes a free lock only if nobody is queued;
 * - a waiter that gives up (try_lock's wait ends, thread cancelled, client
 *   closed, an error) leaves the queue at once; a waiter whose process dies
 *   stays queued until its deadline: when it reaches the head, the waiters
 *   behind it wait until then. The deadline of a waiter is set when it
 *   joins: the deadline of the waiter before it (or the lock's TTL) plus its
 *   wait -- try_lock's wait_ms, or rlock_config.fair_wait_timeout_ms (300000
 *   by default, Redisson's fairLockWaitTimeout) for rlock_lock*() -- and
 *   moves earlier by the winner's wait at each acquisition, as in Redisson;
 * - a waiter of rlock_lock*() still at the head after that deadline is
 *   taken for dead: dropped from the queue; its next attempt queues it again
 *   at the tail;
 * - deadlines are wall-clock times written by each client's clock: clients
 *   whose clocks disagree by more than the waits misjudge each other's
 *   waiters (Redisson's design);
 * - a name must not be used both with rlock_get() and rlock_get_fair()
 *   (nor with Redisson getLock and getFairLock): the plain lock ignores the
 *   queue.
 * rlock_force_unlock() on a fair handle deletes the lock, drops dead heads
 * and wakes the live head of the queue; the queue itself stays.
 *
 * Cluster: the three keys must hash to one slot. Names without '{' or '}',
 * and names with a non-empty "{tag}" do; a name with '}' but no '{', or with
 * '{' and no non-empty tag, does not, and is refused with RLOCK_EINVAL on a
 * redis-cluster:// client (fine elsewhere).
 *
 * Returns RLOCK_OK; RLOCK_EINVAL (NULL argument, empty name, name longer than
 * RLOCK_MAX_NAME_LEN, a name whose keys span Cluster slots: the message
 * says which); RLOCK_ECLOSED; RLOCK_ENOMEM. Does not block. Thread-safe. The
 * handle is the caller's: free it with rlock_free(). (Appended in 0.4.)
 */
RLOCK_EXTERN int rlock_get_fair(rlock_client *client, const char *name, rlock **out);

/*
 * Frees a handle. NULL is a no-op. Valid before or after the client is
 * closed. Does not unlock anything. The caller must ensure no other thread is
 * still using the handle.
 */
RLOCK_EXTERN void rlock_free(rlock *lock);

/* The lock's name (NUL-terminated copy owned by the handle), or NULL. */
RLOCK_EXTERN const char *rlock_name(const rlock *lock);

/*
 * Acquires the lock for the calling thread, waiting without limit. Reentrant:
 * a thread that holds it increments its hold count. Without a lease, the
 * watchdog renews the lock every watchdog_timeout_ms/3 until it is fully
 * released, lost, the client closes, or the owning thread exits (then the
 * lock expires within watchdog_timeout_ms).
 *
 * A thread whose hold was lost (see RLOCK_ELOST) is never silently given a
 * new hold in its place: its next lock/try_lock returns RLOCK_ELOST and
 * acquires nothing, even when the loss was already reported to on_lock_lost;
 * the call after that acquires afresh (hold count 1). A lease lock that
 * simply ran out its lease is not "lost": the next call acquires afresh.
 *
 * Returns RLOCK_OK; RLOCK_ELOST; RLOCK_EINVAL; RLOCK_EIO (Redis unreachable
 * after the retries); RLOCK_ENOTLOCK (a hash that is not a lock has the
 * name); RLOCK_EREDIS (e.g. the key holds another type of value; it is left
 * untouched); RLOCK_ENOPERM, RLOCK_EAUTH; RLOCK_ENOREPL (replica_acks set:
 * the acquisition was not acknowledged and was given back -- the thread holds
 * nothing -- or the master refused writes with NOREPLICAS); RLOCK_ECLOSED;
 * RLOCK_ENOMEM. Blocks until acquired or failed; the wait is a cancellation
 * point.
 */
RLOCK_EXTERN int rlock_lock(rlock *lock);

/*
 * As rlock_lock(), but the lock expires lease_ms after this acquisition and is
 * not renewed. lease_ms in 1..RLOCK_MAX_LEASE_MS, or RLOCK_LEASE_WATCHDOG.
 * A reentrant acquisition resets the key's TTL to its own lease.
 */
RLOCK_EXTERN int rlock_lock_lease(rlock *lock, long long lease_ms);

/*
 * Tries to acquire the lock, waiting at most wait_ms in all (subscribing and
 * retrying included). wait_ms 0: one attempt, and no re-send after an I/O
 * error (re-sends happen only while the wait lasts); wait_ms < 0: no limit.
 * lease_ms as for rlock_lock_lease(), RLOCK_LEASE_WATCHDOG (-1) for watchdog
 * renewal.
 *
 * Returns RLOCK_OK (acquired); RLOCK_BUSY (another owner held it for the whole
 * wait); RLOCK_ELOST (as for rlock_lock()); RLOCK_EINVAL; RLOCK_EIO (Redis
 * unreachable: returned within wait_ms + command_timeout_ms plus scheduling
 * slack, whatever the signals, the pool's queue or a hanging connect);
 * RLOCK_ENOTLOCK; RLOCK_EREDIS; RLOCK_ENOPERM; RLOCK_ENOREPL (as for
 * rlock_lock(); giving an unacknowledged acquisition back is bounded by the
 * same time, plus replica_ack_timeout_ms for each WAIT); RLOCK_ECLOSED;
 * RLOCK_ENOMEM. A command that surely never reached Redis (the pooled connection was
 * closed by the server while idle, or the write failed) is sent again on a
 * fresh connection even with wait_ms 0. An error return never leaves a renewed hold
 * behind. If the reply to an acquisition was lost, the acquisition may
 * still have happened in Redis: calling rlock_try_lock()/rlock_lock() again
 * from the same thread then adopts it exactly once (the scripts are
 * idempotent per hold count); otherwise it expires after its lease. A call
 * whose wait ends while another thread of this client is handing it the lock
 * (rlock_config.local_handoffs) waits for that unlock's outcome and returns
 * RLOCK_OK if it got the lock: at most one unlock round trip after wait_ms.
 */
RLOCK_EXTERN int rlock_try_lock(rlock *lock, long long wait_ms, long long lease_ms);

/*
 * Releases one hold of the calling thread. At hold count zero the key is
 * deleted, renewal stops and one waiter per process is woken (PUBLISH "0" on
 * the lock's channel) -- or, if a thread of the same client is waiting for
 * the lock, it may be handed straight to that thread instead (see
 * rlock_config.local_handoffs); either way the caller no longer holds it.
 * A fair lock (rlock_get_fair) wakes the head of its queue only, on that
 * waiter's own channel, and is never handed over in-process.
 *
 * Returns RLOCK_OK; RLOCK_ENOTOWNER (the calling thread does not hold it:
 * never held, already released, its lease ran out, or lost while this was
 * its last hold -- the loss is reported once through on_lock_lost/on_event
 * if this call is the first to find it; nothing in Redis is changed and
 * nothing is published); RLOCK_ELOST (the thread's hold was lost while it
 * held it more than once: after this unlock it would still believe it held
 * the lock; reported once, nothing changed); RLOCK_EIO (the outcome is unknown:
 * calling rlock_unlock() again from the same thread completes it exactly
 * once); RLOCK_ENOTLOCK; RLOCK_ENOPERM (e.g. the ACL forbids PUBLISH on the
 * lock's channel: the lock is NOT released, still held and renewed);
 * RLOCK_ENOREPL (replica_acks set: either the master applied the unlock and
 * fewer replicas acknowledged it -- the thread no longer holds that hold,
 * but a failover now could bring it back until its lease ends -- or the
 * master refused it with NOREPLICAS and nothing changed: the message says
 * which, and rlock_is_held_by_current_thread() tells); RLOCK_EREDIS;
 * RLOCK_ECLOSED; RLOCK_EINVAL. Any error other than RLOCK_EIO and
 * RLOCK_ENOREPL means Redis was left unchanged. Blocks for at most
 * command_timeout_ms (+ replica_ack_timeout_ms with replica_acks) per attempt.
 * Thread-safe.
 */
RLOCK_EXTERN int rlock_unlock(rlock *lock);

/*
 * Deletes the lock whoever holds it, and wakes waiters. Returns 1 (it was
 * locked and is now deleted), 0 (it was not locked) or a negative error:
 * RLOCK_ENOTLOCK (the name holds a hash that is not a lock: left untouched),
 * RLOCK_EREDIS (another type of value: untouched), RLOCK_ENOPERM, RLOCK_EIO,
 * RLOCK_ENOREPL (replica_acks set: deleted on the master, not acknowledged;
 * or refused by NOREPLICAS, nothing changed), RLOCK_ECLOSED, RLOCK_EINVAL.
 * The previous holder learns of the loss at its next renewal, lock or
 * unlock.
 */
RLOCK_EXTERN int rlock_force_unlock(rlock *lock);

/* 1 if anyone holds the lock, 0 if not, or a negative error. Asks Redis. */
RLOCK_EXTERN int rlock_is_locked(rlock *lock);

/*
 * 1 if the calling thread holds the lock, 0 if not, or a negative error.
 * Answers 0 without a round trip once the hold's lease has run out by the
 * client's clock (send time of the last confirmed acquisition or renewal +
 * lease) or its loss was reported; otherwise asks Redis (HEXISTS), so a
 * deleted lock shows as 0.
 */
RLOCK_EXTERN int rlock_is_held_by_current_thread(rlock *lock);

/* The calling thread's hold count (0 if it does not hold it), or < 0. Asks Redis. */
RLOCK_EXTERN int rlock_hold_count(rlock *lock);

/*
 * Stores in *ttl_ms the lock's remaining time to live in ms, -1 if it has no
 * expiry, -2 if it is not locked. Returns RLOCK_OK or a negative error.
 */
RLOCK_EXTERN int rlock_remain_ttl(rlock *lock, long long *ttl_ms);

/*
 * Detail of the calling thread's last failed rlock call, for a program
 * (status, errno, Redis's error) and for a person (message). Every rlock
 * call that returns an error (< 0) records it; a call that succeeds leaves
 * the previous detail in place. Per thread; no locking needed.
 */
typedef struct rlock_error_info {
    int status;             /* that call's status; RLOCK_OK if none failed yet */
    int sys_errno;          /* errno of the failed system call (ECONNREFUSED,
                               ETIMEDOUT, ECONNRESET, ...), else 0 */
    int host_not_found;     /* 1 when the url's host name could not be resolved */
    const char *redis_error; /* Redis's own error reply ("WRONGPASS invalid ...",
                               "NOPERM ...", "READONLY ..."), or "" */
    const char *message;    /* one line: what failed, where (host:port), why; "" if none */
} rlock_error_info;

/*
 * Fills *out with the calling thread's last error detail. The strings stay
 * valid until the thread's next failing rlock call. out NULL: no-op.
 */
RLOCK_EXTERN void rlock_last_error_info(rlock_error_info *out);
/* The calling thread's last error message (as above); never NULL. */
RLOCK_EXTERN const char *rlock_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* RLOCK_H */
