/* SPDX-License-Identifier: BSD-3-Clause */
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
 * A thread that locks twice must unlock twice (hold counts). The _as calls
 * take an explicit owner id instead of the calling thread (event loops,
 * locks handed between threads: see section 7); in this header "the calling
 * thread" then reads "the owner".
 *
 * Return codes: 0 is success, positive values are non-error outcomes
 * (RLOCK_BUSY), negative values are errors (section 10). Errors are returned,
 * never stored on a shared handle. Nothing in this library aborts the process
 * on caller input.
 *
 * Sections
 *   1. Client: version, open, close, configuration, url; fork, threads
 *   2. Plain lock        rlock_get, rlock_lock*, rlock_try_lock, rlock_unlock
 *   3. Fair lock         rlock_get_fair
 *   4. Read-write lock   rlock_get_rw
 *   5. Fenced lock       rlock_get_fenced, tokens, rlock_fenced_set
 *   6. Multi-lock and Redlock   rlock_multi_*, rlock_redlock_*
 *   7. Explicit owners   the _as calls
 *   8. Inspection        rlock_is_locked, rlock_hold_count, rlock_name, ...
 *   9. Events and statistics   rlock_event, log levels, rlock_stats
 *  10. Errors            status codes, rlock_strerror, rlock_last_error
 *
 * Every function's entry has the same layout: a one-line summary, what it
 * does, then Arguments, Returns, Blocks and Threads. What each call means in
 * depth, lock kind by lock kind: docs/semantics.md. What each version added:
 * CHANGELOG.md.
 */
#ifndef RLOCK_H
#define RLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define RLOCK_EXTERN __attribute__((visibility("default")))
#else
#define RLOCK_EXTERN
#endif

/* ==========================================================================
 * 1. Client: version, open, close, configuration, url; fork and thread rules
 * ==========================================================================
 *
 * Threads: every function of this header is thread-safe unless its entry
 * says otherwise. A client and its handles may be shared by any number of
 * threads.
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

/*
 * Version. The shared library's soname is librlock.so.RLOCK_VERSION_MAJOR;
 * the major number changes whenever a declaration in this header changes in
 * a way that breaks existing binaries (a removed function, a changed
 * signature, a reordered field of rlock_config).
 */
#define RLOCK_VERSION_MAJOR 0
#define RLOCK_VERSION_MINOR 5
#define RLOCK_VERSION_PATCH 0
#define RLOCK_VERSION_NUM                                                     \
    ((RLOCK_VERSION_MAJOR << 16) | (RLOCK_VERSION_MINOR << 8) |               \
     RLOCK_VERSION_PATCH)
#define RLOCK_VERSION_STRING "0.5.0"

/*
 * rlock_version - the library's version string.
 *
 * Returns:    "0.5.0" (the library's, which may differ from the header's
 *             RLOCK_VERSION_STRING); static, never NULL.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN const char *rlock_version(void);

/*
 * rlock_version_num - the library's RLOCK_VERSION_NUM.
 *
 * Compare it with the header's RLOCK_VERSION_NUM.
 *
 * Returns:    the library's version number.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN unsigned rlock_version_num(void);

typedef struct rlock_client rlock_client; /* thread-safe */

/*
 * Events (rlock_event_kind, rlock_event) belong to section 9; they are
 * declared here because rlock_config.on_event uses them.
 *
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
    /* An owner's hold of the lock is gone (the owner is a thread, or an
     * explicit owner of the _as calls: event.owner says which): found
     * missing in Redis, or its lease ran out by the client's clock with no
     * renewal confirmed (reported then even if Redis never answers again).
     * Exactly once per hold; on_lock_lost is called for the same loss. */
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
    /* LOCK_LOST, RENEWAL_FAILED with a name: whose hold it is -- a thread's
     * id (rlock_thread_owner() on that thread) or an explicit owner's id
     * (rlock_lock_as() ...). 0 for the other events. */
    uint64_t owner;
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
     *   rediss://, rediss-sentinel://, rediss-cluster://   the same over TLS
     *
     * TLS (OpenSSL 3): a rediss scheme speaks TLS to every server the client
     * reaches -- the server, or the sentinels and every master they name, or
     * every cluster node (seeds and those MOVED, ASK and CLUSTER SLOTS name)
     * -- for commands, waiters' subscriptions and the watchdog alike; never
     * plaintext. Its options are the tls_* fields below, or query parameters
     * after the path ('?' first, '&' between; a parameter wins over the
     * field): tls_ca=<PEM file>, tls_cert=<PEM file>, tls_key=<PEM file>,
     * tls_verify=full|ca|none, tls_server_name=<name>, e.g.
     *   rediss://:pw@localhost:6380/3?tls_ca=/etc/ca.pem&tls_verify=ca
     *   rediss-sentinel://s1,s2/mymaster?tls_server_name=redis.internal
     * A value is %-decoded. A rediss url whose parameter is unknown, repeated
     * or malformed is RLOCK_EINVAL naming it and its position.
     *
     * redis-sentinel: the hosts are sentinels (port 26379 by default), tried
     * in turn; master is the name they monitor (%-encoded if needed). user,
     * password and db are for the master; sentinel_user and
     * sentinel_password (%-encoded) authenticate to the sentinels. Every
     * sentinel is asked; the master named under the highest config epoch
     * is used only once it answers ROLE with master and the sentinels
     * still name it when asked again after that. It is followed through
     * failovers; once the client has switched, nothing it sends reaches
     * the old master, and a command in flight there (an unlock too) is
     * sent again to the new one. A master the sentinels no longer name
     * (another under a newer config epoch, which cannot be confirmed yet)
     * is left too: commands fail with RLOCK_EIO until the new one is
     * adopted (docs/design.md section 6).
     *
     * redis-cluster: the hosts are seed nodes of one Redis Cluster (port
     * 6379 by default), tried in turn for CLUSTER SLOTS; user and password
     * are for every node (a cluster has only db 0). Each lock goes to the
     * master of its name's slot (Redis's hash-tag rule); MOVED, ASK,
     * TRYAGAIN, CLUSTERDOWN, slot migrations and failovers are followed
     * (docs/design.md section 6); a fair, fenced or read-write lock whose
     * keys a migration has split between two masters has those left on the
     * exporting master moved to the importing one with MIGRATE before its
     * script runs there (the ACL user then needs CLUSTER COUNTKEYSINSLOT,
     * CLUSTER GETKEYSINSLOT, MIGRATE and ASKING: docs/failure-modes.md). pool_size is per master (connections idle
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
     * Called once for each hold of the client's owners (threads and
     * explicit owners) that is lost (see RLOCK_EVENT_LOCK_LOST), on the
     * client's event thread. name is valid only during the call. The
     * callback may call rlock functions (a blocking one delays later events,
     * never renewals) but not rlock_client_close() on this client. NULL = no
     * callback.
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
     * rules as on_lock_lost. NULL = none.
     */
    void (*on_event)(const rlock_event *event, void *arg);
    /*
     * Replica acknowledgement (WAIT), opt-in. When > 0, every write --
     * acquire, unlock, renewal, force unlock -- is followed on the same
     * connection, in the same round trip, by WAIT replica_acks
     * replica_ack_timeout_ms; fewer acknowledgements give RLOCK_ENOREPL (an
     * acquisition is rolled back first; a renewal not acknowledged does not
     * extend the lease by the client's clock). WAIT is not consensus: see
     * docs/design.md. Default 0 (off); 0..100.
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
     * default; classic elsewhere.
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
     *
     */
    long long fair_wait_timeout_ms;
    /*
     * Registration: 1 (default) keeps a small hash "rlock:client:<client
     * id>" in Redis while the client is open, so that the first half of an
     * owner field can be tied to a host and a process (docs/operations.md:
     * its fields, and finding a stuck lock's owner). It is written at open,
     * rewritten with a TTL of max(watchdog_timeout_ms, 1000) ms every third
     * of that TTL by the watchdog thread, and deleted by
     * rlock_client_close() (a client that dies leaves it to expire). Best
     * effort: a refusal (an ACL without "~rlock:client:*", OOM) is logged
     * once (REGISTER_FAILED) and counted (rlock_stats.registration_failures);
     * it never fails an open or a lock call. 0: nothing is written.
     * Independent of it, every connection the client opens is named
     * "rlock:<host>:<pid>:<first 8 characters of the client id>" (CLIENT
     * SETNAME, pipelined with AUTH and SELECT, or else with the connection's
     * first command: no round trip of its own; a refusal is logged once
     * (NAME_REFUSED) and ignored).
     */
    int register_client;
    /*
     * Log lines: called with one line (no newline) for each event and each
     * log-only happening at or above log_level (RLOCK_LOG_*), on the client's
     * event thread, never with an rlock mutex held, in order with the
     * events. message is valid only during the call. Every line starts with
     * "rlock <first 8 characters of the client id> <WORD>", WORD one of the
     * stable words docs/operations.md lists with their meaning and what to
     * do (LOCK_LOST, RENEWAL_FAILED, CONNECTION_LOST, RECONNECTED, ...).
     * Same rules as on_event. NULL (default): nothing is logged or
     * formatted.
     */
    void (*log)(int level, const char *message, void *arg);
    void *log_arg;                 /* passed to log (callback_arg is not) */
    /* The least important level logged: RLOCK_LOG_ERROR..RLOCK_LOG_DEBUG.
     * Default RLOCK_LOG_WARN. */
    int log_level;
    /*
     * Ignored (0 or 1..1000, else RLOCK_EINVAL as before). In 0.5 it made
     * the client's threads that read one lock share one Redis read hold;
     * that left the library after 0.5 (CHANGELOG.md) and the field stays
     * for ABI only. A client opened with it set logs one WARN line,
     * CONFIG_IGNORED, and every reader takes a hold of its own (a field per
     * thread, as Redisson's readers do). An application whose threads read
     * one lock at a high rate can share one hold among them with an
     * explicit owner: examples/shared_read.c shows how, and its caveats.
     */
    int shared_reads_ms;
    /*
     * TLS options of a rediss url (ignored for redis:// and unix://): each
     * is overridden by the url's query parameter of the same name. The
     * strings are copied at open. Every new connection reads the files
     * anew, so a CA bundle or client certificate replaced on disk is used
     * by the next connection without reopening the client
     * (docs/operations.md, "Certificate rotation").
     *
     * tls_ca: PEM file of the CAs trusted to sign the server's certificate
     * (tls_ca=); NULL (default): the system's trust store (OpenSSL's
     * default paths, on Debian /etc/ssl/certs).
     */
    const char *tls_ca;
    /* Mutual TLS: the client certificate (with its chain) and its private
     * key, PEM files (tls_cert=, tls_key=); both or neither. NULL (default):
     * no client certificate (a server that requires one refuses the
     * connection: RLOCK_EAUTH "server requires a client certificate"). */
    const char *tls_cert;
    const char *tls_key;
    /*
     * RLOCK_TLS_VERIFY_FULL (default; tls_verify=full): the certificate chain
     * up to a trusted CA, its validity dates, and the server's name (the
     * tls_server_name, else the url's host; an IP literal host is checked
     * against the certificate's IP addresses). RLOCK_TLS_VERIFY_CA
     * (tls_verify=ca): the chain and the dates, not the name.
     * RLOCK_TLS_VERIFY_NONE (tls_verify=none): nothing -- UNSAFE, anyone on
     * the path can read and change the traffic; for tests only.
     * A failed verification is RLOCK_EIO with the cause in words
     * ("certificate has expired", "host name mismatch: ...", "unable to get
     * local issuer certificate (unknown CA ...)").
     */
    int tls_verify;
    /*
     * The name sent as SNI and verified in full mode (tls_server_name=);
     * NULL (default): the host being connected to -- the url's, or the
     * address a sentinel or a cluster node announced, which then is
     * usually an IP literal: set this to the name the servers' certificates
     * carry. An IP literal is not sent as SNI.
     */
    const char *tls_server_name;
    /*
     * Credentials asked at each new connection's AUTH, instead of the url's
     * user and password, for short-lived tokens (ElastiCache IAM, Entra):
     * fill user (empty string: no user, AUTH <password>) and password
     * (NUL-terminated, within the sizes given) and return 0; another value
     * fails that connection with RLOCK_EAUTH. Called on whichever thread
     * connects (an application thread, the subscriber, the watchdog), so it
     * must be thread-safe and quick; never with an rlock mutex held, never
     * for sentinels (sentinel_user/sentinel_password). NULL (default): the
     * url's.
     */
    int (*credentials)(void *arg, char *user, size_t user_size, char *password,
                       size_t password_size);
    void *credentials_arg;         /* passed to credentials */
} rlock_config;

/* rlock_config.pubsub_mode */
enum {
    RLOCK_PUBSUB_AUTO = 0,    /* sharded on a cluster that supports it, else classic */
    RLOCK_PUBSUB_CLASSIC = 1, /* SUBSCRIBE / PUBLISH: any node hears every message */
    RLOCK_PUBSUB_SHARDED = 2  /* SSUBSCRIBE / SPUBLISH on the channel's shard (Redis >= 7.0) */
};

/* rlock_config.tls_verify */
enum {
    RLOCK_TLS_VERIFY_FULL = 0, /* chain, dates and host name (default) */
    RLOCK_TLS_VERIFY_CA = 1,   /* chain and dates */
    RLOCK_TLS_VERIFY_NONE = 2  /* nothing: unsafe */
};
/* rlock_config.log_level: the RLOCK_LOG_* levels, section 9. */

/*
 * rlock_config_init - fill a configuration with the defaults.
 *
 * Sets every field of *cfg to the default its comment in rlock_config
 * states, and records the struct's size.
 *
 * Arguments:  cfg   the configuration to fill; must not be NULL.
 * Returns:    nothing.
 * Blocks:     no.
 * Threads:    safe (cfg is the caller's).
 */
RLOCK_EXTERN void rlock_config_init(rlock_config *cfg);

/*
 * rlock_client_open - connect to Redis and start a client.
 *
 * Parses the url, connects one pool connection (AUTH, SELECT), loads the Lua
 * scripts, and starts the watchdog, subscriber and event threads.
 * With a redis-sentinel:// url it first asks every sentinel (each step
 * bounded by 1 s) for the master, takes the one named under the highest
 * config epoch, checks it with ROLE, asks the sentinels again that they
 * still name it (else takes their new choice, at most three times), and
 * starts a thread that follows failovers. With a redis-cluster:// url it
 * first asks the seeds in turn (each step bounded by 1 s) for CLUSTER SLOTS,
 * and starts a thread that keeps the slot table true; it then chooses the
 * pub/sub kind (pubsub_mode; AUTO asks PUBSUB SHARDNUMSUB).
 *
 * Arguments:  cfg   filled by rlock_config_init(), then changed; NULL means
 *                   all defaults. Copied: may be freed after the call.
 *             out   on success, the new client.
 * Returns:    RLOCK_OK;
 *             RLOCK_EINVAL   NULL out, a field out of range, a malformed url
 *                            (rlock_last_error() names the wrong part, its
 *                            text -- never a password's -- and its position
 *                            from 1), cfg not initialised by
 *                            rlock_config_init, RLOCK_PUBSUB_SHARDED on a
 *                            server without sharded pub/sub;
 *             RLOCK_EIO      cannot resolve the host, connection refused, or
 *                            no answer within connect_timeout_ms (see
 *                            rlock_last_error_info()); TLS: the server's
 *                            certificate failed verification --
 *                            "certificate has expired", "host name
 *                            mismatch: <want> vs <certificate's names>",
 *                            "unable to get local issuer certificate
 *                            (unknown CA ...)" --, a plaintext server behind
 *                            rediss:// ("did not answer the TLS handshake:
 *                            is it a plaintext port?"), a TLS port behind
 *                            redis:// ("is it a TLS port? use rediss://"),
 *                            an unreadable tls_ca, tls_cert or tls_key file;
 *                            Sentinel: also a failover under way -- a
 *                            sentinel in the middle of one, a master named
 *                            that is down or not yet master --: try again;
 *             RLOCK_EAUTH    wrong user or password, or a password is
 *                            required; TLS: the server requires a client
 *                            certificate or refused the one given; the
 *                            credentials callback failed;
 *             RLOCK_ENOPERM  the ACL user may not run a command rlock needs:
 *                            SELECT, SCRIPT LOAD, EVALSHA -- asked at open
 *                            with EVALSHA of a sha no script has, which runs
 *                            nothing; the message points at the
 *                            least-privilege ACL;
 *             RLOCK_EREDIS   any other refusal, e.g. SELECT of a db that
 *                            does not exist; a master name no sentinel knows
 *                            (every sentinel was reached and said so -- with
 *                            one unreachable, RLOCK_EIO: it may know the
 *                            name): the message says what each sentinel
 *                            answered; a redis-cluster:// seed that is not in
 *                            cluster mode: "cluster support disabled"; a
 *                            server older than Redis 6.2, the oldest
 *                            supported: the message names its version;
 *             RLOCK_ENOMEM.
 * Blocks:     at most connect_timeout_ms + command_timeout_ms (Cluster: plus
 *             1 s per seed tried; Sentinel: plus 1 s per sentinel, and for
 *             each master named, at most three, connect_timeout_ms + 1 s +
 *             1 s per sentinel that answered).
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_client_open(const rlock_config *cfg, rlock_client **out);

/*
 * rlock_client_close - stop a client; held locks are not released.
 *
 * Threads blocked in rlock_lock*() or rlock_try_lock() on its handles return
 * RLOCK_ECLOSED; a thread that waits in a queue kept in Redis (a fair lock's,
 * or a read-write lock's waiting writers) first leaves it, as a waiter that
 * gives up does: the close waits for that (its attempt in flight, then its
 * leave), at most 2 x command_timeout_ms; then commands in flight are
 * aborted (RLOCK_ECLOSED); later calls on its handles return RLOCK_ECLOSED.
 * Locks still held are NOT released: renewal stops and they expire after
 * their lease (watchdog_timeout_ms for watchdog locks). The client's
 * registration hash (rlock_config.register_client) is deleted first, on an
 * idle connection, waiting at most 0.25 s for a registration write in flight
 * and 0.25 s for the reply (unanswered, it expires by its TTL). Lock handles
 * stay valid until rlock_free(). In a forked child it only marks the
 * inherited client; it releases nothing of the parent's.
 *
 * Arguments:  client  the client; NULL is a no-op. Must be closed once.
 *                     The client pointer itself stays valid after the close
 *                     (calls taking it, such as rlock_get or
 *                     rlock_fenced_set, return RLOCK_ECLOSED) only while a
 *                     handle of it lives: with none left, the close frees it.
 * Returns:    nothing.
 * Blocks:     until its threads have stopped and every call in flight has
 *             returned: normally well under a second, at most about
 *             connect_timeout_ms if a connection attempt is under way (plus
 *             the queue leaves above, with Redis slow to answer them).
 * Threads:    safe, but not from the on_lock_lost callback.
 */
RLOCK_EXTERN void rlock_client_close(rlock_client *client);

/* ==========================================================================
 * 2. Plain lock: Redisson's getLock() -- reentrant, renewed by a watchdog
 * ==========================================================================
 *
 * A handle made by rlock_get() (and by rlock_get_fair, rlock_get_rw,
 * rlock_get_fenced: sections 3-5) works with every call of this section, of
 * section 7 (the _as forms) and of section 8 (the queries).
 */

/* Names are any bytes but NUL, 1 byte to RLOCK_MAX_NAME_LEN bytes. */
#define RLOCK_MAX_NAME_LEN 65536
/* Largest lease accepted, in ms (about 34 years). */
#define RLOCK_MAX_LEASE_MS (1LL << 40)
/* lease_ms value meaning "no fixed lease: the watchdog renews it". */
#define RLOCK_LEASE_WATCHDOG -1LL

typedef struct rlock rlock;               /* named lock handle; thread-safe, shareable */

/*
 * rlock_get - make a handle for the lock called name (Redisson's getLock()).
 *
 * No Redis traffic. Many handles may name the same lock; they are the same
 * lock.
 *
 * Arguments:  client  an open client.
 *             name    the lock's name; copied.
 *             out     on success, the new handle: the caller's, freed with
 *                     rlock_free().
 * Returns:    RLOCK_OK; RLOCK_EINVAL (NULL argument, empty name, name longer
 *             than RLOCK_MAX_NAME_LEN); RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_get(rlock_client *client, const char *name, rlock **out);

/*
 * rlock_free - free a handle.
 *
 * Valid before or after the client is closed. Does not unlock anything.
 *
 * Arguments:  lock  the handle; NULL is a no-op. No other thread may still
 *                   be using it (the caller must ensure this).
 * Returns:    nothing.
 * Blocks:     no.
 * Threads:    not while another thread uses the same handle.
 */
RLOCK_EXTERN void rlock_free(rlock *lock);

/*
 * rlock_lock - acquire the lock for the calling thread, waiting without limit.
 *
 * Reentrant: a thread that holds it increments its hold count. Without a
 * lease, the watchdog renews the lock every watchdog_timeout_ms/3 until it
 * is fully released, lost, the client closes, or the owning thread exits
 * (then the lock expires within watchdog_timeout_ms).
 *
 * A thread whose hold was lost (see RLOCK_ELOST) is never silently given a
 * new hold in its place: its next lock/try_lock returns RLOCK_ELOST and
 * acquires nothing, even when the loss was already reported to on_lock_lost;
 * the call after that acquires afresh (hold count 1). A lease lock that
 * simply ran out its lease is not "lost": the next call acquires afresh.
 *
 * Arguments:  lock  the handle.
 * Returns:    RLOCK_OK;
 *             RLOCK_ELOST    see above;
 *             RLOCK_EDEADLK  a read-write lock's write handle, called by a
 *                            thread that holds its read lock: nothing
 *                            acquired (section 4);
 *             RLOCK_EINVAL;
 *             RLOCK_EIO      Redis unreachable after the retries;
 *             RLOCK_ENOTLOCK a hash that is not a lock has the name;
 *             RLOCK_EREDIS   e.g. the key holds another type of value; it is
 *                            left untouched;
 *             RLOCK_ENOPERM  the ACL refuses a command of the acquisition, or
 *                            one its unlock or renewal will need -- Redis >=
 *                            7.0 checks both before anything is written;
 *                            nothing held;
 *             RLOCK_EAUTH;
 *             RLOCK_ENOREPL  replica_acks set: the acquisition was not
 *                            acknowledged and was given back -- the thread
 *                            holds nothing -- or the master refused writes
 *                            with NOREPLICAS;
 *             RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     until acquired or failed; the wait is a cancellation point.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_lock(rlock *lock);

/*
 * rlock_lock_lease - rlock_lock() with a fixed lease, not renewed.
 *
 * The lock expires lease_ms after this acquisition and is not renewed. A
 * reentrant acquisition resets the key's TTL to its own lease.
 *
 * Arguments:  lock      the handle.
 *             lease_ms  1..RLOCK_MAX_LEASE_MS, or RLOCK_LEASE_WATCHDOG.
 * Returns:    as rlock_lock().
 * Blocks:     as rlock_lock(); the wait is a cancellation point.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_lock_lease(rlock *lock, long long lease_ms);

/*
 * rlock_try_lock - try to acquire the lock, waiting at most wait_ms.
 *
 * The wait counts everything (subscribing and retrying included). A command
 * that surely never reached Redis (the pooled connection was closed by the
 * server while idle, or the write failed) is sent again on a fresh
 * connection even with wait_ms 0. An error return never leaves a renewed
 * hold behind. If the reply to an acquisition was lost, the acquisition may
 * still have happened in Redis: calling rlock_try_lock()/rlock_lock() again
 * from the same thread then adopts it exactly once (the scripts are
 * idempotent per hold count); otherwise it expires after its lease.
 *
 * Arguments:  lock      the handle.
 *             wait_ms   0: one attempt, and no re-send after an I/O error
 *                       (re-sends happen only while the wait lasts); < 0: no
 *                       limit.
 *             lease_ms  as for rlock_lock_lease(); RLOCK_LEASE_WATCHDOG (-1)
 *                       for watchdog renewal.
 * Returns:    RLOCK_OK       acquired;
 *             RLOCK_BUSY     another owner held it for the whole wait;
 *                            rlock_last_error() names the lock and what the
 *                            last busy answer told: a plain or fenced lock's
 *                            holder's lease left, e.g. "lock 'seat:42' is
 *                            held by another owner for 12.4 s more (rlockctl
 *                            show names the holder)", a fair or read-write
 *                            lock's time to try again;
 *             RLOCK_ELOST, RLOCK_EDEADLK   as for rlock_lock(), whatever
 *                            wait_ms;
 *             RLOCK_EINVAL;
 *             RLOCK_EIO      Redis unreachable: returned within wait_ms +
 *                            command_timeout_ms plus scheduling slack,
 *                            whatever the signals, the pool's queue or a
 *                            hanging connect;
 *             RLOCK_ENOTLOCK; RLOCK_EREDIS; RLOCK_ENOPERM;
 *             RLOCK_ENOREPL  as for rlock_lock(); giving an unacknowledged
 *                            acquisition back is bounded by the same time,
 *                            plus replica_ack_timeout_ms for each WAIT;
 *             RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     at most wait_ms (see RLOCK_EIO for the bound on errors). A call
 *             whose wait ends while another thread of this client is handing
 *             it the lock (rlock_config.local_handoffs) waits for that
 *             unlock's outcome and returns RLOCK_OK if it got the lock: at
 *             most one unlock round trip after wait_ms. The wait is a
 *             cancellation point.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_try_lock(rlock *lock, long long wait_ms, long long lease_ms);

/*
 * rlock_unlock - release one hold of the calling thread.
 *
 * At hold count zero the key is deleted, renewal stops and one waiter per
 * process is woken (PUBLISH "0" on the lock's channel) -- or, if a thread of
 * the same client is waiting for the lock, it may be handed straight to that
 * thread instead (see rlock_config.local_handoffs); either way the caller no
 * longer holds it. A fair lock (rlock_get_fair) wakes the head of its queue
 * only, on that waiter's own channel, and is never handed over in-process; a
 * read-write lock's handles release the handle's kind of hold (section 4).
 *
 * Arguments:  lock  the handle.
 * Returns:    RLOCK_OK;
 *             RLOCK_ENOTOWNER  the calling thread does not hold it: never
 *                            held, already released, its lease ran out, or
 *                            lost while this was its last hold -- the loss
 *                            is reported once through on_lock_lost/on_event
 *                            if this call is the first to find it; nothing
 *                            in Redis is changed and nothing is published;
 *             RLOCK_ELOST    the thread's hold was lost while it held it
 *                            more than once: after this unlock it would
 *                            still believe it held the lock; reported once,
 *                            nothing changed;
 *             RLOCK_EIO      the outcome is unknown: calling rlock_unlock()
 *                            again from the same thread completes it exactly
 *                            once; if the failed call had released the last
 *                            hold, the repeat returns RLOCK_ENOTOWNER and
 *                            reports no loss;
 *             RLOCK_ENOTLOCK;
 *             RLOCK_ENOPERM  e.g. the ACL forbids PUBLISH on the lock's
 *                            channel -- on Redis >= 7.0 only when the
 *                            permission was taken away after the acquisition,
 *                            which checked it: the lock is NOT released,
 *                            still held and renewed;
 *             RLOCK_ENOREPL  replica_acks set: either the master applied the
 *                            unlock and fewer replicas acknowledged it -- the
 *                            thread no longer holds that hold, but a failover
 *                            now could bring it back until its lease ends --
 *                            or the master refused it with NOREPLICAS and
 *                            nothing changed: the message says which, and
 *                            rlock_is_held_by_current_thread() tells;
 *             RLOCK_EREDIS; RLOCK_ECLOSED; RLOCK_EINVAL.
 *             Any error other than RLOCK_EIO and RLOCK_ENOREPL means Redis
 *             was left unchanged.
 * Blocks:     at most command_timeout_ms (+ replica_ack_timeout_ms with
 *             replica_acks) per attempt.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_unlock(rlock *lock);

/*
 * rlock_force_unlock - delete the lock whoever holds it, and wake waiters.
 *
 * The previous holder learns of the loss at its next renewal, lock or
 * unlock. On a fair handle it also drops dead heads and wakes the live head
 * of the queue (the queue itself stays); on a read-write or fenced handle
 * see sections 4 and 5.
 *
 * Arguments:  lock  the handle.
 * Returns:    1 (it was locked and is now deleted), 0 (it was not locked),
 *             or a negative error:
 *             RLOCK_ENOTLOCK (the name holds a hash that is not a lock: left
 *             untouched); RLOCK_EREDIS (another type of value: untouched);
 *             RLOCK_ENOPERM; RLOCK_EIO; RLOCK_ENOREPL (replica_acks set:
 *             deleted on the master, not acknowledged; or refused by
 *             NOREPLICAS, nothing changed); RLOCK_ECLOSED; RLOCK_EINVAL.
 * Blocks:     a round trip (at most command_timeout_ms per attempt).
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_force_unlock(rlock *lock);

/* ==========================================================================
 * 3. Fair lock: Redisson's getFairLock() -- FIFO across processes
 * ==========================================================================
 *
 * The queue's layout, the waiters' deadlines and the limits of fairness:
 * docs/semantics.md, "Fair lock".
 */

/*
 * rlock_get_fair - make a handle for the FAIR lock called name.
 *
 * Redisson's getFairLock(). No Redis traffic. The handle works with every
 * call of sections 2, 7 and 8 (rlock_lock*, rlock_try_lock, rlock_unlock,
 * rlock_force_unlock, the queries, rlock_free); it is reentrant and renewed
 * by the watchdog like a lock of rlock_get(). A thread whose attempt finds
 * the lock busy joins a queue in Redis, and the lock goes to the queue's
 * head only; no in-process hand-off (rlock_config.local_handoffs) ever
 * overtakes the queue. rlock_try_lock() with wait_ms 0 never queues. A name
 * must not be used both with rlock_get() and rlock_get_fair() (nor with
 * Redisson getLock and getFairLock): the plain lock ignores the queue.
 *
 * Cluster: the lock's three keys must hash to one slot. Names without '{'
 * or '}', and names with a non-empty "{tag}" do; a name with '}' but no '{',
 * or with '{' and no non-empty tag, does not, and is refused with
 * RLOCK_EINVAL on a redis-cluster:// client (fine elsewhere).
 *
 * Arguments:  client  an open client.
 *             name    the lock's name; copied.
 *             out     on success, the new handle: the caller's, freed with
 *                     rlock_free().
 * Returns:    RLOCK_OK; RLOCK_EINVAL (NULL argument, empty name, name longer
 *             than RLOCK_MAX_NAME_LEN, a name whose keys span Cluster slots:
 *             the message says which); RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_get_fair(rlock_client *client, const char *name, rlock **out);

/* ==========================================================================
 * 4. Read-write lock: Redisson's getReadWriteLock()
 * ==========================================================================
 *
 * What each call of sections 2, 7 and 8 means on each of the two handles
 * (downgrade, upgrade refused with RLOCK_EDEADLK, writers first, unlock
 * messages), and Redisson's key layout: docs/semantics.md, "Read-write lock".
 */

/*
 * rlock_get_rw - make the read and the write handle of the lock called name.
 *
 * *read_lock is its read lock (shared: any number of owners, of any process
 * or language, hold it at once) and *write_lock its write lock (exclusive:
 * one owner, and no reader but that owner). No Redis traffic. Each is an
 * ordinary handle: every call of this header works on it -- the _as calls
 * of explicit owners too -- and each is freed with rlock_free(). Both are
 * reentrant, per owner (the calling thread, or an explicit owner), and
 * renewed by the watchdog like a lock of rlock_get(); never an in-process
 * hand-off (rlock_config.local_handoffs does not apply). Java
 * RedissonReadWriteLock shares the lock. A name must not be used both for a
 * read-write lock and with rlock_get() or rlock_get_fair().
 *
 * Cluster: every key of the lock must hash to the name's slot: as for
 * rlock_get_fair(), names without '{' or '}' and names with a non-empty
 * "{tag}" do; others are refused with RLOCK_EINVAL on a redis-cluster://
 * client (fine elsewhere).
 *
 * Arguments:  client      an open client.
 *             name        the lock's name; copied.
 *             read_lock   on success, the read handle (the caller's).
 *             write_lock  on success, the write handle (the caller's).
 * Returns:    RLOCK_OK (both set); RLOCK_EINVAL (a NULL argument, read_lock
 *             == write_lock, an empty name, a name longer than
 *             RLOCK_MAX_NAME_LEN, a name whose keys span Cluster slots: the
 *             message says which); RLOCK_ECLOSED; RLOCK_ENOMEM. On an error
 *             neither handle is made (the non-NULL ones are set to NULL).
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_get_rw(rlock_client *client, const char *name, rlock **read_lock,
                              rlock **write_lock);

/* ==========================================================================
 * 5. Fenced lock: Redisson's getFencedLock() -- a token per acquisition
 * ==========================================================================
 *
 * Every acquisition of a fenced lock -- the first, each reentrant one, an
 * in-process hand-off, also through the plain calls of section 2 and by Java
 * RFencedLock -- gets a token larger than every earlier acquisition's, drawn
 * from the counter "redisson_lock_token:{<name>}". The resource the lock
 * protects refuses a write whose token is lower than the highest it has seen
 * (rlock_fenced_set), so a holder paused past its lease cannot write after
 * the next holder. Every acquirer of the name must use a fenced handle (Java:
 * RFencedLock). A fenced handle works with every call of this header;
 * rlock_force_unlock deletes the lock, not the counter. The calls below that
 * return a token take a fenced handle only (another handle: RLOCK_EINVAL).
 * When a token can go backwards (restarts, failovers, deleted keys) and what
 * to do then: docs/semantics.md, "Fenced lock".
 *
 * Cluster: the counter and the lock must hash to one slot. Names without
 * '{' or '}' and names with a non-empty "{tag}" do; others are refused with
 * RLOCK_EINVAL on a redis-cluster:// client, as by rlock_get_fair().
 */

/*
 * rlock_get_fenced - make a handle for the fenced lock called name.
 *
 * Redisson's getFencedLock(). No Redis traffic.
 *
 * Arguments:  client  an open client.
 *             name    the lock's name; copied.
 *             out     on success, the new handle: the caller's, freed with
 *                     rlock_free().
 * Returns:    RLOCK_OK; RLOCK_EINVAL (NULL argument, empty name, name longer
 *             than RLOCK_MAX_NAME_LEN, a name whose counter key hashes to
 *             another Cluster slot); RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_get_fenced(rlock_client *client, const char *name, rlock **out);

/*
 * rlock_try_lock_fenced - rlock_try_lock() that also returns the fencing token.
 *
 * Redisson's tryLockAndGetToken(wait, lease, unit). A reentrant acquisition
 * gets a new, larger token.
 *
 * Arguments:  lock      a fenced handle.
 *             wait_ms   as for rlock_try_lock().
 *             lease_ms  as for rlock_try_lock().
 *             token     the acquisition's token; written only on RLOCK_OK.
 * Returns:    as rlock_try_lock(), plus RLOCK_EINVAL (token NULL, not a
 *             fenced handle).
 * Blocks:     as rlock_try_lock().
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_try_lock_fenced(rlock *lock, long long wait_ms, long long lease_ms,
                                       long long *token);

/*
 * rlock_lock_fenced - rlock_try_lock_fenced() waiting without limit.
 *
 * Redisson's lockAndGetToken(lease, unit).
 *
 * Arguments:  lock, lease_ms, token   as for rlock_try_lock_fenced().
 * Returns:    as rlock_try_lock_fenced().
 * Blocks:     until acquired or failed, as rlock_lock().
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_lock_fenced(rlock *lock, long long lease_ms, long long *token);

/*
 * rlock_try_lock_fenced_as - rlock_try_lock_fenced() for an explicit owner.
 *
 * Arguments:  owner   as for rlock_try_lock_as() (section 7); the others as
 *                     for rlock_try_lock_fenced().
 * Returns:    as rlock_try_lock_fenced(), plus RLOCK_EINVAL as
 *             rlock_try_lock_as().
 * Blocks:     as rlock_try_lock().
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_try_lock_fenced_as(rlock *lock, uint64_t owner, long long wait_ms,
                                          long long lease_ms, long long *token);

/*
 * rlock_fence_token - read the lock's token counter.
 *
 * The last token handed out, 0 if none ever was (Redisson's getToken(),
 * which answers null there). A GET on the master; it says nothing about who
 * holds the lock.
 *
 * Arguments:  lock   a fenced handle.
 *             token  the counter; written on RLOCK_OK only.
 * Returns:    RLOCK_OK; RLOCK_EINVAL (NULL, not a fenced handle);
 *             RLOCK_EREDIS (the key holds something that is not an
 *             integer); RLOCK_EIO; RLOCK_ENOPERM; RLOCK_ECLOSED.
 * Blocks:     at most command_timeout_ms per attempt.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_fence_token(rlock *lock, long long *token);

/*
 * rlock_fenced_set - write a Redis string only if token is not stale.
 *
 * The resource side, for a resource kept in Redis: sets the string key to
 * value (SET semantics: any old value or type is replaced, any TTL dropped)
 * only if token is >= the highest token a rlock_fenced_set() on key has
 * carried, and records token as the new highest -- one script, atomic.
 * Equal tokens are accepted: a holder may write several times with its
 * token; a later holder's token is larger. The highest token lives in the
 * companion string key "rlock_fence:{<key>}" ("rlock_fence:<key>" when key
 * holds '{'), with no TTL: delete both keys to reset the resource. Readers
 * read key with a plain GET. For a resource in SQL, keep the highest token
 * in the row and make the write conditional (docs/semantics.md, "Fenced
 * lock"):
 *   UPDATE t SET value = :value, fence = :token WHERE id = :id AND fence <= :token
 * 0 rows updated means the token is stale.
 *
 * Arguments:  client  an open client.
 *             key     the resource's key: 1..RLOCK_MAX_NAME_LEN bytes.
 *             token   the writer's token, >= 1.
 *             value   len bytes, any bytes; may be NULL when len is 0.
 *             len     value's length.
 * Returns:    RLOCK_OK (written);
 *             RLOCK_ESTALE   token < the highest seen: nothing written;
 *                            rlock_last_error() says both tokens;
 *             RLOCK_EINVAL   NULL client or key, empty key or longer than
 *                            RLOCK_MAX_NAME_LEN, value NULL with len > 0,
 *                            token < 1, or on a redis-cluster:// client a key
 *                            whose companion hashes to another slot;
 *             RLOCK_EREDIS   the companion key holds something that is not a
 *                            token: nothing written;
 *             RLOCK_ENOPERM  an ACL refuses SET on either key: nothing
 *                            written;
 *             RLOCK_EIO      outcome unknown; sending the same write again is
 *                            safe: equal tokens are accepted, so it applies
 *                            again, or is refused if a higher token wrote
 *                            meanwhile -- which is also what an RLOCK_ESTALE
 *                            after rlock's own re-send of a lost reply may
 *                            hide: the first send applied, then a higher
 *                            token's write followed;
 *             RLOCK_ENOREPL  replica_acks: written on the master, not
 *                            acknowledged;
 *             RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     at most command_timeout_ms per attempt (re-sent like any
 *             command).
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_fenced_set(rlock_client *client, const char *key, long long token,
                                  const char *value, size_t len);

/* ==========================================================================
 * 6. Multi-lock and Redlock
 * ==========================================================================
 *
 * rlock_multi      several lock handles (of any clients) taken together,
 *                  all or nothing (Redisson's RedissonMultiLock).
 * rlock_redlock    one lock name on n independent Redis masters, one client
 *                  each, held on a majority (antirez's Redlock; Redisson's
 *                  deprecated RedissonRedLock, done as the algorithm says).
 *
 * Both are immutable once made: thread-safe and shareable between threads.
 * The owner is the calling thread, or an explicit owner in the _as forms
 * (rlock_multi_try_lock_as, rlock_redlock_try_lock_as, ...). The design and
 * the safety arguments: docs/design.md section 12; what a Redlock does and
 * does not guarantee: docs/failure-modes.md.
 */

/* Most locks in a multi-lock, most masters in a Redlock. */
#define RLOCK_GROUP_MAX 1024

typedef struct rlock_multi rlock_multi;     /* thread-safe, shareable */
typedef struct rlock_redlock rlock_redlock; /* thread-safe, shareable */

/*
 * rlock_multi_new - make a multi-lock over several lock handles.
 *
 * No Redis traffic. The members are taken in one order every process
 * computes alike (the name's bytes; for one name on several servers, where
 * it is served), so multi-locks over overlapping sets, listed in any order,
 * in any processes, never deadlock one another (docs/design.md section 12)
 * -- provided a thread that calls a multi-lock holds no other lock it could
 * wait behind.
 *
 * Arguments:  locks  locks[0..n-1]: handles of rlock_get() or
 *                    rlock_get_fair(), of one client or several. The array
 *                    is copied; the handles stay the caller's, who must keep
 *                    them (and their clients) alive while the multi-lock is
 *                    used: free the multi-lock first, then the handles.
 *             n      1..RLOCK_GROUP_MAX.
 *             out    on success, the new multi-lock (rlock_multi_free()).
 * Returns:    RLOCK_OK;
 *             RLOCK_EINVAL   NULL locks or out, n not 1..RLOCK_GROUP_MAX, a
 *                            NULL or freed handle, a handle of another kind
 *                            than rlock_get / rlock_get_fair, or one Redis
 *                            key given twice: the same name through one
 *                            client, or through two clients of one server
 *                            and database -- one server is known by the
 *                            address its first connection reached, so
 *                            "localhost" and "127.0.0.1" are one; two
 *                            addresses of one machine, or TCP and a unix
 *                            socket, are not recognised -- the message names
 *                            it;
 *             RLOCK_ECLOSED  a member's client is closed, or inherited across
 *                            fork;
 *             RLOCK_ENOMEM.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_multi_new(rlock *const *locks, size_t n, rlock_multi **out);

/*
 * rlock_multi_lock - acquire every member for the calling thread, no time limit.
 *
 * Watchdog renewal for each (as rlock_lock()). All or nothing: on any return
 * but RLOCK_OK the thread holds nothing it did not hold before the call.
 * Reentrant per member: a member the thread already holds gains a hold (and
 * rlock_multi_unlock() gives one back), as rlock_lock() would. An
 * uncontended multi-lock of plain locks costs one round trip: one attempt
 * on every member at once.
 *
 * Arguments:  m  the multi-lock.
 * Returns:    RLOCK_OK;
 *             RLOCK_ELOST    a member's earlier hold was lost: told now, as
 *                            rlock_lock() tells it; nothing taken;
 *             or a member's error, as rlock_lock() returns them (RLOCK_EIO,
 *             RLOCK_ENOTLOCK, RLOCK_EREDIS, RLOCK_ENOPERM, RLOCK_ENOREPL,
 *             RLOCK_ECLOSED, ...; the message names the lock);
 *             RLOCK_EINVAL   NULL or freed m;
 *             RLOCK_ENOMEM.
 * Blocks:     until acquired or failed; the waits are cancellation points (a
 *             cancelled call gives back what it took).
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_multi_lock(rlock_multi *m);

/*
 * rlock_multi_lock_lease - rlock_multi_lock() with a fixed lease per member.
 *
 * Every member's lease runs from the end of the call: members taken before a
 * later one was waited for are renewed meanwhile, then all get lease_ms at
 * once. A member the thread already held with watchdog renewal stays
 * renewed.
 *
 * Arguments:  m         the multi-lock.
 *             lease_ms  1..RLOCK_MAX_LEASE_MS, or RLOCK_LEASE_WATCHDOG.
 * Returns:    as rlock_multi_lock().
 * Blocks:     as rlock_multi_lock().
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_multi_lock_lease(rlock_multi *m, long long lease_ms);

/*
 * rlock_multi_try_lock - rlock_multi_lock_lease(), waiting at most wait_ms.
 *
 * Arguments:  m         the multi-lock.
 *             wait_ms   0: no waiting; < 0: no limit.
 *             lease_ms  as for rlock_multi_lock_lease().
 * Returns:    RLOCK_BUSY when a member stayed another owner's for the whole
 *             wait (nothing taken), or what rlock_multi_lock() returns;
 *             RLOCK_EINVAL for a bad lease_ms.
 * Blocks:     returns within about wait_ms + command_timeout_ms per member
 *             (a member waited for to the end).
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_multi_try_lock(rlock_multi *m, long long wait_ms, long long lease_ms);

/*
 * rlock_multi_unlock - release one hold of the calling thread on every member.
 *
 * Each as rlock_unlock() (waiters woken, in-process hand-offs), last member
 * first, trying every member whatever the others answer.
 *
 * Arguments:  m  the multi-lock.
 * Returns:    RLOCK_OK, or the first member's failure as rlock_unlock()
 *             reports it (RLOCK_ENOTOWNER for a member not held: its lease
 *             ran out, or it was lost; RLOCK_EIO: unlock again to complete
 *             it; ...), or RLOCK_EINVAL.
 * Blocks:     a round trip per member.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_multi_unlock(rlock_multi *m);

/*
 * rlock_multi_try_lock_as, rlock_multi_unlock_as - the same for an explicit owner.
 *
 * rlock_multi_try_lock() and rlock_multi_unlock() for owner (section 7).
 * Each member's hold is owner's, as rlock_try_lock_as() would take it:
 * rlock_is_held_by(member, owner) tells, rlock_unlock_as(member, owner)
 * releases one member alone.
 *
 * Arguments:  owner     the explicit owner, not 0.
 *             wait_ms   < 0 waits without limit; lease_ms as there,
 *                       RLOCK_LEASE_WATCHDOG too.
 * Returns:    as the calling-thread forms, plus RLOCK_EINVAL for owner 0 or
 *             a call of owner still running on a member's name through its
 *             client (another multi-lock's or a single-lock _as call too:
 *             one call at a time per owner and lock, nothing done).
 * Blocks:     as the calling-thread forms.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_multi_try_lock_as(rlock_multi *m, uint64_t owner, long long wait_ms,
                                         long long lease_ms);
RLOCK_EXTERN int rlock_multi_unlock_as(rlock_multi *m, uint64_t owner);

/*
 * rlock_multi_free - free a multi-lock (not its handles, not any hold).
 *
 * Arguments:  m  the multi-lock; NULL is a no-op.
 * Returns:    nothing.
 * Blocks:     no.
 * Threads:    not while another thread uses m.
 */
RLOCK_EXTERN void rlock_multi_free(rlock_multi *m);

/*
 * rlock_redlock_new - make a Redlock of one name on n independent masters.
 *
 * No Redis traffic. On each master the lock is Redisson's RLock hash under
 * name, written by that client (owner "<its uuid>:<thread id>"), so a Java
 * RedissonRedLock over getLock(name) of clients of the same masters excludes
 * and is excluded (docs/redisson.md). The Redlock makes a handle of its own
 * on each client (freed by rlock_redlock_free()).
 *
 * n masters need n/2 + 1 for a quorum: 3 tolerate one failure, 5 two. A
 * master restarted empty while it held the lock forgets it: keep a crashed
 * master down for longer than the longest lease, or run it with
 * appendfsync always (docs/failure-modes.md). Give the clients a short
 * command_timeout_ms: it bounds how long an attempt waits for a master that
 * does not answer.
 *
 * Arguments:  clients  clients[i] reaches master i (any url kind; each is
 *                      one master). The array is copied; the clients must
 *                      stay open while the Redlock is used.
 *             n        1..RLOCK_GROUP_MAX.
 *             name     the lock's name, as for rlock_get().
 *             out      on success, the new Redlock (rlock_redlock_free()).
 * Returns:    RLOCK_OK;
 *             RLOCK_EINVAL   NULL clients, name or out, n not
 *                            1..RLOCK_GROUP_MAX, a bad name as for
 *                            rlock_get(), the same client twice, or two
 *                            clients of one server -- of two of its
 *                            databases, or through two names of its address,
 *                            as rlock_multi_new() tells servers apart: not
 *                            independent masters;
 *             RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_redlock_new(rlock_client *const *clients, size_t n, const char *name,
                                   rlock_redlock **out);

/*
 * rlock_redlock_try_lock - try to take the Redlock on a quorum of masters.
 *
 * One attempt sends the acquisition to every master at once and reads the
 * replies as they arrive, until a quorum answered "held" (a slower master is
 * not waited for: a hold it takes is released by the unlock): about one
 * round trip. Replies are awaited until lease_ms minus the drift allowance
 * at most, and no longer than the smallest command_timeout_ms of the
 * clients. With a quorum and time left, the validity is
 *
 *     lease_ms - (time the attempt took) - (lease_ms / 100 + 2 ms)
 *
 * Without, every master that took the hold or did not answer is released at
 * once and the attempt is tried again after a random pause (2.5..100 ms,
 * growing) while the wait lasts. Reentrant: a thread that holds it gains a
 * hold on each master it reaches (and a new validity); unlock once per
 * acquisition.
 *
 * Arguments:  rl           the Redlock.
 *             wait_ms      at most this in all; 0: one attempt; < 0: no limit.
 *             lease_ms     3..RLOCK_MAX_LEASE_MS; RLOCK_LEASE_WATCHDOG is
 *                          refused: a Redlock's guarantee is its validity,
 *                          counted from a fixed lease.
 *             validity_ms  may be NULL; on RLOCK_OK the validity: the thread
 *                          may count on holding the lock exclusively for
 *                          that long from the return, and not longer.
 * Returns:    RLOCK_OK;
 *             RLOCK_BUSY     no quorum during the whole wait: other owners
 *                            held it, or the attempts took longer than the
 *                            lease allows;
 *             RLOCK_EIO      fewer than a quorum of masters answered at the
 *                            end of the wait, or in retry_attempts + 1
 *                            attempts in a row;
 *             a master's refusal (RLOCK_ENOTLOCK, RLOCK_ENOPERM,
 *             RLOCK_EREDIS, RLOCK_ENOREPL, ...) when more masters refused
 *             than a quorum can spare (the first refusing master's status,
 *             its address and Redis text in rlock_last_error_info());
 *             RLOCK_EINVAL   NULL or freed rl, bad lease_ms;
 *             RLOCK_ECLOSED  a client closed;
 *             RLOCK_ENOMEM.
 *             On any return but RLOCK_OK nothing was taken (a master that
 *             could not be told keeps its part until lease_ms ends).
 * Blocks:     at most wait_ms plus one attempt; the pauses are cancellation
 *             points.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_redlock_try_lock(rlock_redlock *rl, long long wait_ms, long long lease_ms,
                                        long long *validity_ms);

/*
 * rlock_redlock_lock - rlock_redlock_try_lock() with no limit on the wait.
 *
 * Arguments:  rl, lease_ms, validity_ms   as for rlock_redlock_try_lock().
 * Returns:    as rlock_redlock_try_lock().
 * Blocks:     until acquired or failed; the pauses are cancellation points.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_redlock_lock(rlock_redlock *rl, long long lease_ms,
                                    long long *validity_ms);

/*
 * rlock_redlock_unlock - release one hold of the calling thread on every master.
 *
 * All masters that have one at once (about one round trip).
 *
 * Arguments:  rl  the Redlock.
 * Returns:    RLOCK_OK        a quorum of masters still had the thread's hold
 *                             at unlock: nobody else held the Redlock
 *                             meanwhile -- unless a master's clock jumped;
 *             RLOCK_ENOTOWNER held on fewer than a quorum at unlock -- its
 *                             validity had run out, or masters lost it -- or
 *                             not at all; the holds that were left are
 *                             released;
 *             RLOCK_ELOST     the same at an unlock that would have left the
 *                             thread holding -- it held the Redlock more
 *                             than once --: every hold it had left on the
 *                             other masters is released, it holds nothing
 *                             now;
 *             RLOCK_EIO or a master's refusal (the first refusing master's,
 *             named in the message) when so many masters did not answer or
 *             refused that another owner could not take it yet: unlock again
 *             to complete it (each master's release is idempotent; that
 *             unlock counts only the masters that still had the hold, so it
 *             may say RLOCK_ENOTOWNER);
 *             RLOCK_EINVAL; RLOCK_ECLOSED; RLOCK_ENOMEM.
 * Blocks:     at most the smallest command_timeout_ms of the clients.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_redlock_unlock(rlock_redlock *rl);

/*
 * rlock_redlock_try_lock_as, rlock_redlock_unlock_as - for an explicit owner.
 *
 * rlock_redlock_try_lock() and rlock_redlock_unlock() for owner (section
 * 7): an event loop that serves many requests on one thread, or a Redlock
 * taken on one thread and released on another. On each master the field is
 * "<that client's uuid>:<owner>".
 *
 * Arguments:  owner   the explicit owner, not 0; the others as for the
 *                     calling-thread forms.
 * Returns:    as the calling-thread forms, plus RLOCK_EINVAL for owner 0 or
 *             a call of owner still running on this name through one of the
 *             masters' clients (this Redlock's, another's, or a single-lock
 *             _as call: one call at a time per owner and lock, nothing done).
 * Blocks:     as the calling-thread forms.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_redlock_try_lock_as(rlock_redlock *rl, uint64_t owner, long long wait_ms,
                                           long long lease_ms, long long *validity_ms);
RLOCK_EXTERN int rlock_redlock_unlock_as(rlock_redlock *rl, uint64_t owner);

/*
 * rlock_redlock_free - free a Redlock and its handles (not any hold).
 *
 * Arguments:  rl  the Redlock; NULL is a no-op.
 * Returns:    nothing.
 * Blocks:     no.
 * Threads:    not while another thread uses rl.
 */
RLOCK_EXTERN void rlock_redlock_free(rlock_redlock *rl);

/* ==========================================================================
 * 7. Explicit owners: the _as calls
 * ==========================================================================
 *
 * By default the owner of a hold is the calling thread. The _as calls take
 * the owner as an argument instead: an id the application chooses, for
 * programs where one thread serves many requests (an event loop, a worker
 * pool: each request is its own owner), or where a lock taken on one thread
 * is released on another. This is Redisson's threadId argument: the hold is
 * the field "<client uuid>:<owner>" of the lock's hash (docs/redisson.md).
 *
 * An owner id is a uint64_t, 1..UINT64_MAX (0 is refused: RLOCK_EINVAL). It
 * names one owner within one client. An explicit owner shares everything
 * with a thread (hold counts, the watchdog, loss reporting with event.owner =
 * the id, hand-offs, every lock kind, multi-locks and Redlocks: their _as
 * forms are in section 6, rlock_try_lock_fenced_as in section 5, the _as
 * queries in section 8), except that no thread's exit drops its holds. One
 * call at a time per owner and lock: an _as call while another _as call for
 * the same owner on the same lock (same name, same client) is still running
 * returns RLOCK_EINVAL and touches nothing. The _as calls block as the plain
 * ones do: a thread serving many owners that waits in rlock_lock_as() for a
 * lock another of its owners holds waits for itself -- for ever with a
 * watchdog lease: on such a thread use rlock_try_lock_as() with wait_ms 0,
 * or wait on another thread. Id ranges, thread ids, memory kept per owner,
 * and what must not be mixed: docs/semantics.md, "Explicit owners".
 */

/*
 * rlock_owner_new() never gives an id >= this; ids the application picks
 * itself from RLOCK_OWNER_CALLER_MIN up cannot equal one of rlock's.
 */
#define RLOCK_OWNER_CALLER_MIN (UINT64_C(1) << 62)

/*
 * rlock_owner_new - a new owner id.
 *
 * Never returned before in this process and never equal to a thread's id
 * (rlock_thread_owner). Owner ids need no freeing.
 *
 * Returns:    the id; never fails. Needs no client; no Redis traffic.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN uint64_t rlock_owner_new(void);

/*
 * rlock_thread_owner - the calling thread's owner id.
 *
 * What the plain calls (rlock_lock, ...) use as owner, and what event.owner
 * holds for this thread's losses. Fixed for the thread's life, never
 * reused. Another thread may pass it to rlock_is_held_by() /
 * rlock_hold_count_as() (Redisson's isHeldByThread(threadId)), or to
 * rlock_unlock_as() to release a hold on this thread's behalf while this
 * thread lives (its holds stop being renewed when it exits: to hand a lock
 * between threads, take it as an rlock_owner_new() owner in the first
 * place).
 *
 * Returns:    the id. No Redis traffic.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN uint64_t rlock_thread_owner(void);

/*
 * rlock_lock_as - rlock_lock_lease() for an explicit owner.
 *
 * Arguments:  lock      the handle.
 *             owner     the owner, not 0.
 *             lease_ms  1..RLOCK_MAX_LEASE_MS, or RLOCK_LEASE_WATCHDOG
 *                       (renewed until fully released).
 * Returns:    as rlock_lock(), plus RLOCK_EINVAL for owner 0 or a call for
 *             this owner and lock still running.
 * Blocks:     waits without limit; the wait is a cancellation point.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_lock_as(rlock *lock, uint64_t owner, long long lease_ms);

/*
 * rlock_try_lock_as - rlock_try_lock() for an explicit owner.
 *
 * Arguments:  owner              as for rlock_lock_as().
 *             wait_ms, lease_ms  as for rlock_try_lock().
 * Returns:    as rlock_try_lock(), plus RLOCK_EINVAL as rlock_lock_as().
 * Blocks:     at most as rlock_try_lock().
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_try_lock_as(rlock *lock, uint64_t owner, long long wait_ms,
                                   long long lease_ms);

/*
 * rlock_unlock_as - rlock_unlock() for an explicit owner: one of its holds.
 *
 * Arguments:  owner  as for rlock_lock_as().
 * Returns:    as rlock_unlock() (RLOCK_ENOTOWNER: owner holds nothing), plus
 *             RLOCK_EINVAL as rlock_lock_as().
 * Blocks:     as rlock_unlock().
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_unlock_as(rlock *lock, uint64_t owner);

/* ==========================================================================
 * 8. Inspection: who holds what, and names
 * ==========================================================================
 */

/*
 * rlock_is_locked - whether anyone holds the lock.
 *
 * On a read-write lock's handles see docs/semantics.md, "Read-write lock".
 *
 * Arguments:  lock  the handle.
 * Returns:    1 if anyone holds the lock, 0 if not, or a negative error.
 * Blocks:     a round trip: asks Redis.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_is_locked(rlock *lock);

/*
 * rlock_is_held_by_current_thread - whether the calling thread holds the lock.
 *
 * Answers 0 without a round trip once the hold's lease has run out by the
 * client's clock (send time of the last confirmed acquisition or renewal +
 * lease: of the send Redis answered, when a call was re-sent, e.g. through a
 * failover) or its loss was reported; otherwise asks Redis (HEXISTS), so a
 * deleted lock shows as 0.
 *
 * Arguments:  lock  the handle.
 * Returns:    1 if the calling thread holds the lock, 0 if not, or a
 *             negative error.
 * Blocks:     at most a round trip.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_is_held_by_current_thread(rlock *lock);

/*
 * rlock_is_held_by - rlock_is_held_by_current_thread() for any owner.
 *
 * Arguments:  lock   the handle.
 *             owner  any id: a thread's too (rlock_thread_owner()).
 * Returns:    1, 0, or a negative error (RLOCK_EINVAL for owner 0).
 * Blocks:     asks Redis unless the client already knows the hold is over.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_is_held_by(rlock *lock, uint64_t owner);

/*
 * rlock_hold_count - the calling thread's hold count.
 *
 * As rlock_is_held_by_current_thread(): 0 without a round trip once the
 * client knows the hold is over (its lease ran out by the client's clock, or
 * its loss was reported), otherwise asks Redis.
 *
 * Arguments:  lock  the handle.
 * Returns:    the count (0 if it does not hold it), or < 0 (an error).
 * Blocks:     at most a round trip.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_hold_count(rlock *lock);

/*
 * rlock_hold_count_as - rlock_hold_count() for any owner.
 *
 * Arguments:  lock   the handle.
 *             owner  any id.
 * Returns:    the count (0 if it holds nothing), or < 0.
 * Blocks:     asks Redis unless the client already knows the hold is over.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_hold_count_as(rlock *lock, uint64_t owner);

/*
 * rlock_remain_ttl - the lock's remaining time to live.
 *
 * Arguments:  lock    the handle.
 *             ttl_ms  set to the remaining time in ms, -1 if it has no
 *                     expiry, -2 if it is not locked.
 * Returns:    RLOCK_OK or a negative error.
 * Blocks:     a round trip.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_remain_ttl(rlock *lock, long long *ttl_ms);

/*
 * rlock_name - the lock's name.
 *
 * Arguments:  lock  the handle.
 * Returns:    a NUL-terminated copy owned by the handle, or NULL.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN const char *rlock_name(const rlock *lock);

/*
 * rlock_client_id - the client's UUID, the first half of its owner fields.
 *
 * Arguments:  client  the client.
 * Returns:    lower-case, 36 characters; owned by the client, valid until
 *             the client's last handle is freed and the client closed. NULL
 *             if client is NULL.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN const char *rlock_client_id(const rlock_client *client);

/* ==========================================================================
 * 9. Events and statistics
 * ==========================================================================
 *
 * Events: rlock_event_kind and rlock_event are declared in section 1 (before
 * rlock_config, which uses them); they are delivered to
 * rlock_config.on_event. Log lines: rlock_config.log, at the levels below.
 */

/* rlock_config.log_level and the level passed to rlock_config.log */
enum {
    RLOCK_LOG_ERROR = 1, /* a lock was lost */
    RLOCK_LOG_WARN = 2,  /* something failed and rlock works around it (renewal, connection, ACL) */
    RLOCK_LOG_INFO = 3,  /* the client opened or closed; a connection works again; resubscribed */
    RLOCK_LOG_DEBUG = 4  /* each new connection */
};

/*
 * Histograms of durations, in microseconds, over fixed buckets: buckets[i]
 * counts the observations d with bound(i - 1) < d <= bound(i), where
 * bound(i) = rlock_stats_bucket_us(i), a 1-2-5 series: 10, 20, 50, 100,
 * 200, 500 us, 1, 2, 5 ... ms, ... 50 s, 100 s; the last bucket
 * (RLOCK_STATS_BUCKETS - 1) counts everything above 100 s. The buckets are
 * not cumulative (Prometheus's "le" buckets are their running sums); count
 * is their sum, sum_us the sum of the observations. The bounds never change.
 */
#define RLOCK_STATS_BUCKETS 23

typedef struct rlock_histogram {
    unsigned long long count;
    unsigned long long sum_us;
    unsigned long long buckets[RLOCK_STATS_BUCKETS];
} rlock_histogram;

/* rlock_stats.errors has one slot per status down to -(RLOCK_STATS_ERROR_SLOTS - 1). */
#define RLOCK_STATS_ERROR_SLOTS 32

/*
 * A client's statistics since it opened. Counters only grow; gauges are the
 * value now. Each field is read on its own (relaxed atomics): a snapshot
 * taken while other threads work may show, say, a hand-off counted before
 * the acquisition it ends. Fields may be appended in later versions (never
 * reordered): set struct_size = sizeof(rlock_stats) before the call, and a
 * binary built against an older, smaller struct keeps working.
 */
typedef struct rlock_stats {
    size_t struct_size;        /* set by the caller: sizeof(rlock_stats) */

    /* lock / try_lock / unlock calls of this client's threads; a multi-lock's
     * and a Redlock's members count as the single locks they are (one
     * acquisition, one unlock each, on the member's client) */
    unsigned long long acquisitions;         /* returned RLOCK_OK (re-entries too) */
    unsigned long long acquired_immediately; /* ... at the first attempt, without waiting */
    unsigned long long acquired_after_wait;  /* ... after waiting (the lock was busy, or
                                                threads of this client were waiting) */
    unsigned long long busy;                 /* try_lock returned RLOCK_BUSY (a multi-lock's
                                                or Redlock's: once per client it involves) */
    unsigned long long unlocks;              /* unlock returned RLOCK_OK */
    /*
     * errors[i]: calls on the client's handles (lock, try_lock, unlock and
     * their _as and fenced forms, force_unlock, the queries) that returned
     * status -i (errors[3]: RLOCK_EIO, errors[7]: RLOCK_ELOST, ...);
     * errors[0]: a status below -(RLOCK_STATS_ERROR_SLOTS - 1). A
     * multi-lock's or Redlock's call counts once on each client it involves.
     * Not counted: an argument refused before the call reaches a client (a
     * NULL or freed handle, a bad lease_ms, owner 0).
     */
    unsigned long long errors[RLOCK_STATS_ERROR_SLOTS];
    /* Acquisitions after a wait, by how the lock came: handed over by a thread
     * of this client (rlock_config.local_handoffs: no Redis wake-up), or
     * through Redis (an unlock in any process that published, a lease that ran
     * out). handoffs_local + handoffs_remote == acquired_after_wait. */
    unsigned long long handoffs_local;
    unsigned long long handoffs_remote;

    /* the watchdog */
    unsigned long long renewals;             /* lock leases renewed (one per lock per round) */
    unsigned long long renewal_failures;     /* lock renewals that failed (one per lock per
                                                failed round; RLOCK_EVENT_RENEWAL_FAILED) */
    unsigned long long losses;               /* holds lost (RLOCK_EVENT_LOCK_LOST) */

    /* connections */
    unsigned long long connections;          /* connections opened (pool, subscriber,
                                                Sentinel, Cluster) */
    unsigned long long connection_failures;  /* RLOCK_EVENT_CONNECTION_LOST */
    unsigned long long reconnects;           /* RLOCK_EVENT_RECONNECTED */
    unsigned long long resubscriptions;      /* channels subscribed again after their
                                                connection dropped or their node changed */
    unsigned long long master_switches;      /* RLOCK_EVENT_MASTER_SWITCHED */
    unsigned long long subscribe_refusals;   /* RLOCK_EVENT_SUBSCRIBE_REFUSED */
    unsigned long long name_refusals;        /* connections whose CLIENT SETNAME was refused */
    unsigned long long registration_failures; /* failed writes of the registration hash */

    /* gauges */
    unsigned long long held_locks;           /* holds this client's owners have now, as the
                                                client sees them (a lease lock counts until
                                                a call of its owner notices it ran out) */
    unsigned long long waiting_threads;      /* threads waiting in lock / try_lock */
    unsigned long long pool_in_use;          /* pooled connections taken for a command now */

    /* waits: from the moment an acquisition had to wait (its first attempt
     * found the lock busy, or it queued behind threads of this client) until
     * it got the lock; acquisitions that waited and got it only */
    rlock_histogram wait_time;
    /* holds: from an acquisition (hold count 0 -> 1) to the unlock that
     * released the last hold (or handed the lock over); not for holds lost */
    rlock_histogram hold_time;
} rlock_stats;

/*
 * rlock_client_stats - a client's statistics since it opened.
 *
 * Never talks to Redis; costs a few hundred ns (the held_locks gauge takes
 * the holds table's mutex for a moment). Meant to be called every few
 * seconds by an exporter (examples/prometheus.c).
 *
 * Arguments:  client  the client.
 *             out     filled; out->struct_size must be set first
 *                     (sizeof(rlock_stats), or an older header's size: only
 *                     the fields that fit whole are written; on return
 *                     struct_size is the number of bytes written, smaller
 *                     than asked when the library is older than the header
 *                     or the size ends inside a field).
 * Returns:    RLOCK_OK; RLOCK_EINVAL (NULL argument, struct_size smaller
 *             than the first counter); RLOCK_ECLOSED (closed, or inherited
 *             across fork()).
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN int rlock_client_stats(rlock_client *client, rlock_stats *out);

/*
 * rlock_stats_bucket_us - the upper bound of histogram bucket i.
 *
 * Arguments:  i  the bucket (see rlock_histogram).
 * Returns:    the bound in microseconds; -1 for the last bucket (no bound:
 *             +Inf) and for i out of range.
 * Blocks:     no; pure.
 * Threads:    safe.
 */
RLOCK_EXTERN long long rlock_stats_bucket_us(int i);

/* ==========================================================================
 * 10. Errors: status codes, their text, the calling thread's last error
 * ==========================================================================
 *
 * New codes may be added in later versions; rlock_strerror() and
 * rlock_status_name() accept any int.
 *
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
 *             READONLY, ...); rlock_last_error() has Redis's text (a
 *             script's: without Lua's "script: <sha>, on @user_script:N",
 *             after the command and the lock's name: "ACQUIRE on 'seat:42'
 *             at host:port: WRONGTYPE ..."; redis_error keeps the whole reply)
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
 *             field not of the form "<owner id>:<decimal thread id>"):
 *             acquire, unlock and force_unlock touch nothing
 *   EAUTH     Redis refused the credentials (WRONGPASS, NOAUTH, or a
 *             password sent to a server that has none)
 *   ENOPERM   an ACL refused a command, key or channel (NOPERM); nothing
 *             was changed in Redis. A first acquisition (not a re-entry) is
 *             also refused when the ACL would refuse its unlock or renewal
 *             (e.g. no PUBLISH on the lock's channel, no DEL on its key;
 *             Redis >= 7.0): the message names the command and the key or
 *             channel, nothing is held
 *   ENOREPL   replica_acks is set and fewer replicas acknowledged the write
 *             (WAIT) within replica_ack_timeout_ms (or a re-send after a lost
 *             reply left it unknown), or the master refused it with
 *             NOREPLICAS (min-replicas-to-write: nothing changed). An
 *             acquisition is given back (the caller holds nothing); an
 *             acknowledged-too-few unlock or force unlock did apply on the
 *             master, but a failover now may undo it.
 *   EDEADLK   lock/try_lock: the calling owner (thread, or explicit owner)
 *             would wait for a hold of its own, e.g. asking for a read-write
 *             lock's write lock while it holds its read lock (an upgrade;
 *             Redisson would wait for ever). Nothing was acquired or changed;
 *             the holds it has stay.
 *   ESTALE    rlock_fenced_set: the write carried a fencing token lower than
 *             the highest the resource has seen (a holder whose lock was
 *             taken over meanwhile); nothing was written
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
    XX(ENOREPL, -11, "fewer replicas acknowledged the write than replica_acks") \
    XX(EDEADLK, -12, "the calling owner would wait for a hold of its own")        \
    XX(ESTALE, -13, "fencing token lower than the highest the resource has seen; nothing written")

/* RLOCK_OK, RLOCK_BUSY, RLOCK_EINVAL, ...: one enumerator per table row. */
enum rlock_status {
#define RLOCK__STATUS_ENUM(name, value, message) RLOCK_##name = (value),
    RLOCK_STATUS_MAP(RLOCK__STATUS_ENUM)
#undef RLOCK__STATUS_ENUM
};


/*
 * rlock_strerror - static English text for any status.
 *
 * Arguments:  status  any int.
 * Returns:    the text; never NULL, never allocates. Unknown values give
 *             "unknown rlock status".
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN const char *rlock_strerror(int status);

/*
 * rlock_status_name - the enumerator's name of a status.
 *
 * Arguments:  status  any int.
 * Returns:    "RLOCK_OK", "RLOCK_EIO", ...; "RLOCK_UNKNOWN" for unknown
 *             values. Static.
 * Blocks:     no.
 * Threads:    safe.
 */
RLOCK_EXTERN const char *rlock_status_name(int status);

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
    const char *message;    /* one line: what failed, where (host:port), why; "" if none.
                               A reply that did not come on an open connection says
                               "<command> at host:port: no reply in time (...)" with
                               sys_errno ETIMEDOUT; an answer that is not Redis's
                               protocol (an HTTP port) adds "not a Redis server?" */
} rlock_error_info;

/*
 * rlock_last_error_info - the calling thread's last error detail.
 *
 * Arguments:  out  filled; NULL: no-op. The strings stay valid until the
 *                  thread's next failing rlock call.
 * Returns:    nothing.
 * Blocks:     no.
 * Threads:    per thread; no locking needed.
 */
RLOCK_EXTERN void rlock_last_error_info(rlock_error_info *out);

/*
 * rlock_last_error - the calling thread's last error message.
 *
 * Returns:    rlock_error_info's message (as above); never NULL.
 * Blocks:     no.
 * Threads:    per thread.
 */
RLOCK_EXTERN const char *rlock_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* RLOCK_H */
