/*
 * internal.h - what the files of librlock share. PRIVATE: not installed, not
 * API, may change at any time. Public names live in include/rlock.h.
 *
 * Map of the sources (each file's opening comment says which threads enter
 * it and which mutex guards what):
 *   status.c     status table, version, config defaults
 *   error.c      the per-thread error detail (rlock_last_error)
 *   events.c     the event thread: on_event / on_lock_lost, link up/down
 *   worker.c     starting and stopping the library's threads
 *   util.c       monotonic time, condition variables, number formatting
 *   alloc.c      allocation wrappers with a failure hook for tests
 *   thread_id.c  per-thread owner ids, thread-exit notification, fork generation
 *   conn.c       url parsing, connecting, the connection pool, running commands
 *   scripts.c    the Lua scripts and EVALSHA/NOSCRIPT handling
 *   holds.c      the client's table of locks it holds (hold counts, renewal set)
 *   watchdog.c   the renewal thread
 *   pubsub.c     the subscriber thread and waiters' channels
 *   lock.c       the lock operations (public rlock_* lock functions)
 *   client.c     client open/close, handles, the call guard, the client registry
 *
 * Naming: non-static internal functions are rlock__name; static helpers need
 * no prefix.
 */
#ifndef RLOCK_INTERNAL_H
#define RLOCK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "rlock.h"

/* ---- alloc.c ------------------------------------------------------------- */

/*
 * Every allocation of rlock's own goes through these, so that tests can make
 * them fail (hiredis 0.14 aborts on OOM by itself; that we cannot change).
 */
void *rlock__malloc(size_t size);
void *rlock__calloc(size_t count, size_t size);
void rlock__free(void *ptr);
char *rlock__memdup0(const void *src, size_t len); /* copy + NUL terminator */
/* A grow-only scratch buffer reused across rounds (contents not kept on growth). */
typedef struct rlock__buf {
    void *data; /* owned */
    size_t cap;
} rlock__buf;
int rlock__buf_reserve(rlock__buf *b, size_t bytes);
void rlock__buf_free(rlock__buf *b);
/* Test hook: the n-th allocation from now fails (n >= 1); 0 disables. */
void rlock__alloc_fail_after(long n);

/* ---- time (CLOCK_MONOTONIC everywhere) ----------------------------------- */

#define RLOCK__NO_DEADLINE INT64_MAX

int64_t rlock__now_ms(void);
/* now + ms, saturating at RLOCK__NO_DEADLINE; ms < 0 means no deadline. */
int64_t rlock__deadline_after(long long ms);
/* Initialises a condition variable that waits on CLOCK_MONOTONIC. */
int rlock__cond_init(pthread_cond_t *cond);
/*
 * Waits on cond until signalled or the monotonic deadline (ms) passes.
 * Returns 0 or ETIMEDOUT. RLOCK__NO_DEADLINE waits without limit.
 */
int rlock__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ms);

/* ---- error.c: the calling thread's error detail ---------------------------- */

#if defined(__GNUC__)
#define RLOCK__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define RLOCK__PRINTF(fmt, args)
#endif

/*
 * Records the calling thread's error detail (what rlock_last_error_info
 * shows) and returns status, so a failing path reads
 * `return rlock__fail(RLOCK_EIO, errno, "connect to %s:%d", host, port);`.
 * sys_errno 0 = none. The message says what failed and where; the errno text
 * is appended by the function.
 */
int rlock__fail(int status, int sys_errno, const char *fmt, ...) RLOCK__PRINTF(3, 4);
/*
 * For an error reply of Redis: maps its code to a status (NOAUTH, WRONGPASS
 * -> EAUTH; NOPERM -> ENOPERM; NOTALOCK -> ENOTLOCK; else EREDIS), records
 * Redis's text and `where` (e.g. "EVALSHA at 127.0.0.1:6379"), returns the status.
 */
int rlock__fail_reply(const redisReply *reply, const char *where);
/* The status an error reply's text maps to (as above). */
int rlock__reply_status(const char *error_text);
/* Marks the last recorded error as "host could not be resolved". */
void rlock__fail_host_not_found(void);
/* The calling thread's last message (for event details); never NULL. */
const char *rlock__last_message(void);
/* Records status with its rlock_strerror text unless an error of that same
 * status was recorded since rlock__error_mark(); returns status. */
int rlock__fail_default(int status, unsigned mark);
/* A counter bumped by every recorded error, to tell whether a call recorded one. */
unsigned rlock__error_mark(void);

/* ---- thread_id.c ---------------------------------------------------------- */

/* The calling thread's owner id: unique for the life of the process, never 0. */
uint64_t rlock__thread_id(void);
/*
 * Arranges for rlock__registry_thread_exited(tid) to run when the calling
 * thread exits. Idempotent and cheap after the first call on a thread.
 */
int rlock__thread_watch_exit(void);
/* Bumped in a forked child; a client opened under another value is inherited. */
unsigned rlock__fork_generation(void);
/* Registers the fork handlers once. */
void rlock__fork_init(void);
/* ---- worker.c: the library's threads --------------------------------------- */

/* Starts a library thread with every signal blocked. */
int rlock__start_thread(pthread_t *thread, void *(*main_fn)(void *), void *arg);

/* A library thread that sleeps on a condition variable until told to stop. */
typedef struct rlock__worker {
    pthread_mutex_t mutex;      /* guards stop, and what the worker's owner says it guards */
    pthread_cond_t wake;        /* signalled on stop, and by the owner for its own reasons */
    pthread_t thread;           /* joined by rlock__worker_stop */
    int started;                /* written by start/stop only (client open/close) */
    int stop;
} rlock__worker;

int rlock__worker_start(rlock__worker *w, void *(*main_fn)(void *), void *arg);
/* Sets stop, wakes the thread, joins it and releases the mutex and condition. */
void rlock__worker_stop(rlock__worker *w);

/* ---- settings (client.c parses, conn.c uses) ------------------------------ */

typedef struct rlock__endpoint {
    char *host;        /* TCP host, or NULL for a unix socket; owned */
    int port;
    char *unix_path;   /* owned, or NULL */
    char *user;        /* ACL user, or NULL; owned */
    char *password;    /* NULL = no AUTH; owned */
    int db;
} rlock__endpoint;

int rlock__parse_url(const char *url, rlock__endpoint *ep);
void rlock__endpoint_clear(rlock__endpoint *ep);

typedef struct rlock__settings {
    rlock__endpoint endpoint;
    long long watchdog_timeout_ms;
    int connect_timeout_ms;
    int command_timeout_ms;
    int pool_size;
    int retry_attempts;
    int retry_interval_ms;
    void (*on_lock_lost)(const char *name, void *arg);
    void *callback_arg;
    int local_handoffs;         /* in-process hand-offs in a row; 0 = off */
    void (*on_event)(const rlock_event *event, void *arg);
} rlock__settings;

/* ---- conn.c: connections and the pool ------------------------------------ */

/*
 * The one interface the lock code uses to reach Redis: "run this command (or
 * script) for this key". Routing (a single server today; Sentinel discovery
 * and Cluster slots later) hides behind it.
 */
typedef struct rlock__conn {
    redisContext *ctx; /* NULL = not connected; written by the thread holding the slot */
    int busy;          /* guarded by pool.mutex */
    int64_t last_used_ms; /* when last given back: written under pool.mutex, read
                             by the thread that then takes the slot */
} rlock__conn;

typedef struct rlock__pool {
    pthread_mutex_t mutex;     /* guards busy flags, closing, waiters */
    pthread_cond_t available;  /* signalled when a slot is returned or on close */
    pthread_cond_t closed;     /* broadcast on close: ends retry pauses */
    rlock__conn *slots;        /* pool_size entries; owned */
    int size;
    int closing;               /* set once by rlock_client_close */
} rlock__pool;

/* Opens a connection: connect, timeouts, AUTH, SELECT. RLOCK_EIO/EREDIS. */
/*
 * Opens a connection within deadline_ms (and never longer than
 * connect_timeout_ms): resolve, connect, AUTH, SELECT, each bounded by poll()
 * on the socket, so signals cannot stretch it. The context is non-blocking
 * (REDIS_BLOCK cleared): use it only through rlock__io_* below or
 * redisBufferRead/Write after poll(). Records the error detail.
 * RLOCK_EIO / EAUTH / ENOPERM / EREDIS.
 */
int rlock__connect(const rlock__settings *s, int64_t deadline_ms, redisContext **out);
/* Writes ctx's output buffer by deadline_ms (poll + redisBufferWrite). RLOCK_EIO on failure. */
int rlock__io_flush(redisContext *ctx, int64_t deadline_ms);
/* Reads one reply by deadline_ms (poll + redisBufferRead). RLOCK_EIO on failure/timeout. */
int rlock__io_read(redisContext *ctx, int64_t deadline_ms, redisReply **reply);
int rlock__pool_init(rlock__pool *pool, int size);
/* Aborts commands in flight (shutdown of busy sockets) and wakes pool waiters. */
void rlock__pool_abort(rlock__pool *pool);
void rlock__pool_destroy(rlock__pool *pool);

/* A command: argv with lengths, optionally a script (see scripts.c). */
typedef struct rlock__cmd {
    int script;            /* RLOCK__SCRIPT_* or -1 for a plain command */
    int argc;              /* for a script: keys + args, after "EVALSHA sha numkeys" */
    int nkeys;             /* for a script */
    const char **argv;
    const size_t *argvlen;
} rlock__cmd;

/*
 * Runs one command on a pooled connection and stores the reply (caller frees
 * with freeReplyObject). Connection failures and "try again" errors (LOADING,
 * BUSY, TRYAGAIN, MASTERDOWN) are retried up to retry_attempts times with a
 * capped, jittered exponential pause, never past deadline_ms. All rlock
 * commands are safe to re-send (the scripts are idempotent per hold count).
 * *resent, if not NULL, is set when an attempt that may have reached Redis was
 * followed by another. A reply of type error is returned as RLOCK_EREDIS with
 * the reply. Returns RLOCK_OK, RLOCK_EIO, RLOCK_EREDIS, RLOCK_ECLOSED,
 * RLOCK_ENOMEM.
 */
int rlock__exec(rlock_client *c, const rlock__cmd *cmd, int64_t deadline_ms, redisReply **reply,
                int *resent);
/*
 * Deadlines of rlock__exec: re-sends happen while deadline_ms lasts, and the
 * whole call ends by deadline_ms + command_timeout_ms (RLOCK__NO_DEADLINE:
 * each attempt by its start + command_timeout_ms, connecting by its start +
 * connect_timeout_ms). Queueing for a pooled connection, connecting, writing
 * and reading all count. A command that surely never reached Redis (the
 * pooled connection was found closed, or the write failed) is sent again at
 * once on a fresh connection, also past deadline_ms (within the hard bound).
 * An error reply records its detail (rlock__fail_reply) and returns its
 * mapped status (EAUTH, ENOPERM, ENOTLOCK, EREDIS). I/O failures record
 * host:port and errno, and tell events.c (rlock__link_down / _up).
 */

/*
 * Runs n script calls in one pipeline (one round trip) on one connection, no
 * retries (the watchdog retries next round). replies[i] set on success.
 */
int rlock__exec_pipeline(rlock_client *c, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                         redisReply **replies);

/*
 * Sending ahead: a thread that knows a command will be needed sends it on an
 * idle, connected pool slot without waiting (never blocks on the pool or on
 * connecting; NULL if no such slot or the write failed), and hands the slot
 * to the thread that reads the reply with rlock__read_ahead, which gives the
 * slot back. No retries: whoever reads a failure sends the command again
 * through rlock__exec (every rlock command is safe to re-send).
 */
rlock__conn *rlock__send_ahead(rlock_client *c, const rlock__cmd *cmd);
int rlock__read_ahead(rlock_client *c, rlock__conn *conn, int64_t deadline_ms, redisReply **reply);

/* ---- scripts.c ------------------------------------------------------------ */

enum {
    RLOCK__SCRIPT_ACQUIRE,
    RLOCK__SCRIPT_RELEASE,
    RLOCK__SCRIPT_TRANSFER,
    RLOCK__SCRIPT_RENEW,
    RLOCK__SCRIPT_FORCE_UNLOCK,
    RLOCK__SCRIPT_COUNT
};

typedef struct rlock__scripts {
    char sha[RLOCK__SCRIPT_COUNT][41]; /* written once at open, read-only after */
} rlock__scripts;

/* The Lua text of a script (the bench baseline runs the very same). */
const char *rlock__script_body(int script);
/* "ACQUIRE", "RELEASE", ...: the script's name for messages. */
const char *rlock__script_name(int script);
/* SCRIPT LOAD of every script on ctx by deadline_ms; fills the SHA1s. */
int rlock__scripts_load(redisContext *ctx, int64_t deadline_ms, rlock__scripts *scripts);
/* Appends cmd to ctx as EVALSHA (use_body 0) or EVAL (use_body 1). */
int rlock__append_cmd(redisContext *ctx, const rlock__scripts *scripts, const rlock__cmd *cmd,
                      int use_body);
int rlock__is_noscript(const redisReply *reply);

/* ---- holds.c: the locks this client holds --------------------------------- */

typedef struct rlock__hold rlock__hold;

typedef struct rlock__holds {
    pthread_mutex_t mutex;      /* guards everything below and every rlock__hold */
    rlock__hold **buckets;      /* owned; chained hash table by name */
    size_t nbuckets;
    size_t count;               /* entries */
    size_t renewed;             /* entries with renew set */
    uint64_t next_serial;
} rlock__holds;

/* A snapshot of one renewed hold for a watchdog round. */
typedef struct rlock__renewal {
    const char *name;           /* points into the snapshot's arena */
    size_t name_len;
    uint64_t owner_tid;
    uint64_t serial;
    int64_t expires_ms;         /* its lease end by the client's clock */
} rlock__renewal;

/* What the client knows of one thread's hold (rlock__holds_get). */
enum {
    RLOCK__HOLD_NONE,           /* nothing known */
    RLOCK__HOLD_HELD,           /* held, lease not run out by the client's clock */
    RLOCK__HOLD_LOST,           /* lost: reported (or to be reported: info.report) */
    RLOCK__HOLD_EXPIRED         /* a lease lock whose lease ran out: over, dropped */
};

typedef struct rlock__hold_info {
    long long count;            /* HELD, LOST: the hold count (believed, for LOST) */
    long long lease_left_ms;    /* HELD, LOST: lease end - now */
    int unsure;                 /* HELD: an unlock's outcome is unknown */
    int renew;                  /* HELD: renewed by the watchdog */
    int report;                 /* LOST: found by the clock in this call: report it */
} rlock__hold_info;

/* A confirmed acquisition, for rlock__holds_acquired. */
typedef struct rlock__grant {
    long long count;            /* hold count Redis reported */
    int64_t sent_ms;            /* when the acquiring command was sent */
    long long lease_ms;         /* the TTL it set */
    int renew;                  /* watchdog lock */
} rlock__grant;

/* rlock__holds_released's count when the unlock's outcome is unknown. */
#define RLOCK__RELEASE_UNKNOWN -1

int rlock__holds_init(rlock__holds *h);
void rlock__holds_destroy(rlock__holds *h);
/*
 * The calling thread's hold of name as of now_ms (one of RLOCK__HOLD_*).
 * A renewed hold past its lease becomes LOST with info->report set: the
 * caller reports it (exactly once). A lease hold past its lease is dropped.
 */
int rlock__holds_get(rlock__holds *h, const char *name, size_t len, uint64_t tid, int64_t now_ms,
                     rlock__hold_info *info);
/* tid's last known hold count of name (0 = none or lost). */
long long rlock__holds_expected(rlock__holds *h, const char *name, size_t len, uint64_t tid);
/* Drops tid's entry (a tombstone its thread has now learnt of). */
void rlock__holds_forget(rlock__holds *h, const char *name, size_t len, uint64_t tid);
/*
 * A call of tid found its hold gone from Redis: drops the entry and returns 1
 * if the loss was not reported yet (the caller reports it), else 0.
 */
int rlock__holds_found_gone(rlock__holds *h, const char *name, size_t len, uint64_t tid,
                            long long *lease_left_ms, int64_t now_ms);
/*
 * An unlinked entry allocated before the round trip, so that recording the
 * acquisition afterwards cannot fail. Free a leftover one with rlock__free.
 */
rlock__hold *rlock__holds_spare(const char *name, size_t len);
/* Records a confirmed acquisition; may consume *spare (then sets it to NULL). */
void rlock__holds_acquired(rlock__holds *h, const char *name, size_t len, uint64_t tid,
                           const rlock__grant *grant, rlock__hold **spare);
/*
 * Brackets an unlock: begin before sending RELEASE, then released() with the
 * remaining count (0 = fully released, entry dropped; RLOCK__RELEASE_UNKNOWN
 * = outcome unknown, entry kept and marked unsure; other < 0 = unchanged).
 * While an unlock is in flight the watchdog never reports the lock lost: a
 * key missing then may be the unlock's own doing.
 */
void rlock__holds_begin_release(rlock__holds *h, const char *name, size_t len, uint64_t tid);
void rlock__holds_released(rlock__holds *h, const char *name, size_t len, uint64_t tid,
                           long long count);
/* Drops every entry of a thread that exited. */
void rlock__holds_thread_exited(rlock__holds *h, uint64_t tid);
/*
 * Copies the renewed entries into entries (rlock__renewal[]) and their names
 * into names; both buffers belong to the caller and are reused across calls.
 */
int rlock__holds_snapshot(rlock__holds *h, rlock__buf *entries, rlock__buf *names, size_t *n);
/* A renewal of the snapshotted hold r was confirmed: its lease now ends at expires_ms. */
void rlock__holds_renewed(rlock__holds *h, const rlock__renewal *r, int64_t expires_ms);
/* Makes the snapshotted hold a tombstone if it is still that hold; 1 if so (report it). */
int rlock__holds_drop_lost(rlock__holds *h, const rlock__renewal *r);
/*
 * Makes every renewed hold past its lease at now_ms a tombstone and copies
 * them out (to report); *next_expiry_ms receives the earliest lease end left.
 */
int rlock__holds_sweep(rlock__holds *h, int64_t now_ms, rlock__buf *entries, rlock__buf *names,
                       size_t *n, int64_t *next_expiry_ms);

/* ---- watchdog.c ----------------------------------------------------------- */

typedef struct rlock__watchdog {
    rlock__worker worker;       /* its mutex guards only stop */
    atomic_ullong rounds;       /* completed renewal rounds (for tests and bench) */
} rlock__watchdog;

int rlock__watchdog_start(rlock_client *c);
void rlock__watchdog_stop(rlock_client *c);

/* ---- pubsub.c ------------------------------------------------------------- */

typedef struct rlock__channel rlock__channel;

typedef struct rlock__pubsub {
    pthread_mutex_t mutex;      /* guards every field below and every channel */
    rlock__channel *channels;   /* owned list: channels with waiters or unsubscribing */
    int wake_pipe[2];           /* waiters -> subscriber thread; O_NONBLOCK|O_CLOEXEC */
    pthread_t thread;           /* joined by rlock_client_close */
    int started;
    int stop;                   /* set by close: subscriber exits, waiters return ECLOSED */
    int dirty;                  /* the subscription set changed since last sent */
    int connected;              /* the subscriber has a live connection */
} rlock__pubsub;

int rlock__pubsub_start(rlock_client *c);
void rlock__pubsub_stop(rlock_client *c);

enum {
    RLOCK__HANDOFF_NONE,        /* no offer open */
    RLOCK__HANDOFF_OFFERED,     /* a releasing thread is moving the lock to this waiter */
    RLOCK__HANDOFF_GRANTED,     /* moved: the waiter holds the lock in Redis */
    RLOCK__HANDOFF_DECLINED     /* not moved (or outcome unknown): try again */
};

/*
 * A thread waiting for a lock. Lives on the waiting thread's stack from
 * rlock__pubsub_join to rlock__pubsub_leave.
 */
typedef struct rlock__waiter {
    uint64_t tid;               /* set before join; read-only while joined */
    long long lease_ms;         /* its acquire's lease (or RLOCK_LEASE_WATCHDOG); ditto */
    const char *name;           /* the lock's name (the handle's); ditto */
    size_t name_len;
    /* The rest belongs to pubsub.c and is guarded by pubsub.mutex. */
    struct rlock__waiter *next; /* the channel's queue, oldest first */
    rlock__channel *channel;
    pthread_cond_t wakeup;      /* this waiter sleeps here, and only it; initialised by
                                   join, destroyed by leave (with pubsub.mutex) */
    int sleeping;               /* asleep and not yet signalled: may be offered the lock */
    int permit;                 /* an unlock message it has not acted on yet */
    int handoff;                /* RLOCK__HANDOFF_* */
    rlock__conn *ahead;         /* its ACQUIRE, sent ahead by the subscriber thread; the
                                   waiter reads the reply (rlock__acquire_ahead) */
    int64_t sent_ms;            /* when that ACQUIRE, or a granted hand-off's TRANSFER,
                                   was sent: the start of the waiter's lease */
} rlock__waiter;

/* An open offer, held by the releasing thread until it settles it. */
typedef struct rlock__offer {
    rlock__waiter *waiter;      /* stays valid (it cannot leave) until settled */
    uint64_t tid;               /* copies of the waiter's tid and lease_ms */
    long long lease_ms;
} rlock__offer;

/*
 * Registers w (tid and lease_ms filled in) as a waiter on channel and waits
 * (until deadline_ms, and at most about a command timeout) for the
 * subscription to be confirmed, so that no unlock message published after
 * this call returns can be missed. On RLOCK_OK w must later go to
 * rlock__pubsub_leave().
 */
int rlock__pubsub_join(rlock_client *c, const char *channel, size_t len, int64_t deadline_ms,
                       rlock__waiter *w);
/*
 * The channel's epoch: read it before an attempt and pass it to the wait
 * that follows, so a nudge (reconnect, resubscription) that lands during the
 * attempt is not slept through.
 */
unsigned rlock__pubsub_epoch(rlock_client *c, const rlock__waiter *w);
/*
 * Sleeps until an unlock message for the channel (one per waiter), the epoch
 * moving past `epoch`, a settled hand-off, deadline_ms, or close. While a
 * hand-off to w is open it sleeps on regardless of deadline and close. A
 * cancellation point when cancel_state is PTHREAD_CANCEL_ENABLE. Sets
 * *granted when the lock was handed to w (w's thread now holds it in Redis:
 * the caller records the hold). Sets *ahead when the unlock message that woke
 * w came with w's ACQUIRE already sent: the caller reads its reply (always,
 * even on RLOCK_ECLOSED). Returns RLOCK_OK or RLOCK_ECLOSED (never with
 * *granted set).
 */
int rlock__pubsub_wait(rlock_client *c, rlock__waiter *w, unsigned epoch, int64_t deadline_ms,
                       int cancel_state, int *granted, rlock__conn **ahead, int64_t *sent_ms);
/*
 * Unregisters w. If a hand-off to w is still open (w's thread was cancelled
 * while offered), first waits for it to settle. Returns 1 if w was granted a
 * lock it never claimed: the caller must release it. *ahead receives an
 * ACQUIRE sent ahead for w that nobody read (cancelled): the caller reads it.
 */
int rlock__pubsub_leave(rlock_client *c, rlock__waiter *w, rlock__conn **ahead);
/* lock.c: sends w's ACQUIRE ahead (subscriber thread, pubsub.mutex held). */
rlock__conn *rlock__acquire_ahead(rlock_client *c, const rlock__waiter *w);
/* 1 if threads of this client wait for lock (on a confirmed subscription). */
int rlock__pubsub_queued(rlock_client *c, const rlock *lock);
/*
 * Picks the oldest sleeping waiter for lock for a hand-off, unless none
 * sleeps or local_handoffs offers in a row have been made (then this unlock
 * must release to everybody). Returns 1 with *offer filled, else 0.
 */
int rlock__pubsub_offer(rlock_client *c, const rlock *lock, rlock__offer *offer);
/* Tells the offered waiter the outcome and wakes it. */
void rlock__pubsub_settle(rlock_client *c, const rlock__offer *offer, int granted,
                          int64_t sent_ms);
/* Frees the channels and the pipe once the thread is stopped and no call is left. */
void rlock__pubsub_destroy(rlock_client *c);

/* ---- events.c ------------------------------------------------------------- */

typedef struct rlock__event_item rlock__event_item;

typedef struct rlock__events {
    rlock__worker worker;       /* its mutex guards the queue; wake is signalled per event */
    rlock__event_item *head;    /* owned queue, oldest first */
    rlock__event_item *tail;
    atomic_int link_down;       /* a connection failed and none has worked since */
} rlock__events;

int rlock__events_start(rlock_client *c);
/* Delivers what is queued, then stops the thread (close, after the watchdog). */
void rlock__events_stop(rlock_client *c);
/*
 * Queues an event for the event thread (any thread; never blocks on a
 * callback). name may be NULL; name and detail are copied. A LOCK_LOST
 * event also goes to on_lock_lost. Dropped if out of memory.
 */
void rlock__event_post(rlock_client *c, rlock_event_kind kind, const char *name, size_t name_len,
                       long long lease_left_ms, int status, const char *detail);
/* A connection failed: CONNECTION_LOST, once until rlock__link_up. */
void rlock__link_down(rlock_client *c, int status, const char *detail);
/* A connection works: RECONNECTED if the link was down. Cheap when it was not. */
void rlock__link_up(rlock_client *c);

/* ---- client.c ------------------------------------------------------------- */

#define RLOCK__CLIENT_MAGIC 0x726c636bu /* "rlck" */
#define RLOCK__LOCK_MAGIC 0x726c6b68u   /* "rlkh" */

enum { RLOCK__OPEN, RLOCK__CLOSING, RLOCK__CLOSED };

struct rlock_client {
    uint32_t magic;
    unsigned fork_generation;   /* rlock__fork_generation() at open; read-only */
    char id[37];                /* UUID; read-only after open */
    rlock__settings settings;   /* read-only after open */
    rlock__scripts scripts;     /* read-only after open */
    rlock__pool pool;
    rlock__holds holds;
    rlock__watchdog watchdog;
    rlock__pubsub pubsub;
    rlock__events events;

    pthread_mutex_t mutex;      /* guards state, calls, handles */
    pthread_cond_t idle;        /* signalled when calls drops to 0 while closing */
    _Atomic int state;          /* RLOCK__OPEN/CLOSING/CLOSED; written under mutex */
    atomic_int calls;           /* public calls in progress (atomic, no mutex) */
    int handles;                /* live rlock handles */

    rlock_client *registry_next; /* guarded by the registry mutex in client.c */
};

struct rlock {
    uint32_t magic;
    rlock_client *client;       /* kept alive by client->handles */
    char *name;                 /* owned, NUL-terminated copy */
    size_t name_len;
    char *channel;              /* owned: redisson_lock__channel:{name} */
    size_t channel_len;
};

/* Per-call guard: validates the client and counts the call in flight. */
typedef struct rlock__guard {
    rlock_client *client;
    int cancel_state;           /* the caller's cancel state, restored on leave */
    unsigned error_mark;        /* rlock__error_mark() at entry */
} rlock__guard;

int rlock__enter(rlock__guard *g, rlock_client *c);
void rlock__leave(rlock__guard *g);
/* Leaves, and makes sure an error status comes with a recorded message. */
int rlock__leave_status(rlock__guard *g, int status);
/* Validates a handle and enters its client. */
int rlock__enter_lock(rlock__guard *g, rlock *lock);
int rlock__closing(rlock_client *c);
/* Runs rlock__holds_thread_exited on every open client. */
void rlock__registry_thread_exited(uint64_t tid);
/* pthread_atfork handlers for the registry. */
void rlock__registry_fork_prepare(void);
void rlock__registry_fork_parent(void);
void rlock__registry_fork_child(void);

/* "<client id>:<tid>" into buf (at least RLOCK__OWNER_MAX bytes); returns length. */
#define RLOCK__OWNER_MAX 64
size_t rlock__owner(const rlock_client *c, uint64_t tid, char *buf);
/* Decimal of v into buf (at least 21 bytes); returns length. */
size_t rlock__fmt_u64(char *buf, uint64_t v);
size_t rlock__fmt_i64(char *buf, int64_t v);

#endif /* RLOCK_INTERNAL_H */
