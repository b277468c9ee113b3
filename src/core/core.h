/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * core.h - the bottom layer: allocation, time, error detail, thread
 * identity, the library's thread lifecycle, the settings every layer reads,
 * and the event queue. PRIVATE: not installed, not API.
 *
 * Nothing here calls up into another layer. Where core must tell an upper
 * layer something (a thread exited), it calls a function that layer gave it.
 *
 *   alloc.c    allocation wrappers with a failure hook for tests
 *   time.c     monotonic time, condition variables on that clock, formatting
 *   status.c   the status table, the version, config defaults (public)
 *   error.c    the per-thread error detail (rlock_last_error, public)
 *   thread.c   per-thread owner ids and the thread-exit hook
 *   worker.c   starting and stopping the library's threads
 *   events.c   the event thread: on_event / on_lock_lost / log, link up/down
 *   log.c      log lines: an event's, and log-only ones (rlock_config.log)
 *   stats.c    counters, gauges and histograms (rlock_client_stats)
 *
 * Naming: non-static internal functions are rlock__name; static helpers need
 * no prefix.
 */
#ifndef RLOCK_CORE_H
#define RLOCK_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "rlock.h"

/* ---- alloc.c -------------------------------------------------------------- */

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

/* ---- time.c (CLOCK_MONOTONIC everywhere) ---------------------------------- */

#define RLOCK__NO_DEADLINE INT64_MAX

int64_t rlock__now_ms(void);
/* The same clock in microseconds (durations for the statistics' histograms). */
int64_t rlock__now_us(void);
/* The wall clock (CLOCK_REALTIME) in ms since the epoch, for deadlines shared with
 * other processes (the fair lock's queue, as Redisson's System.currentTimeMillis()). */
int64_t rlock__wall_ms(void);
/* now + ms, saturating at RLOCK__NO_DEADLINE; ms < 0 means no deadline. */
int64_t rlock__deadline_after(long long ms);
/* Initialises a condition variable that waits on CLOCK_MONOTONIC. */
int rlock__cond_init(pthread_cond_t *cond);
/*
 * Waits on cond until signalled or the monotonic deadline (ms) passes.
 * Returns 0 or ETIMEDOUT. RLOCK__NO_DEADLINE waits without limit.
 */
int rlock__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ms);
/* Decimal of v into buf (at least 21 bytes); returns length. */
size_t rlock__fmt_u64(char *buf, uint64_t v);
size_t rlock__fmt_i64(char *buf, int64_t v);

/* ---- error.c: the calling thread's error detail --------------------------- */

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
 * As rlock__fail, but the message is left as formatted: it tells the cause in
 * its own words where strerror's would mislead ("Connection timed out" for a
 * reply that never came on an open connection).
 */
int rlock__fail_errno(int status, int sys_errno, const char *fmt, ...) RLOCK__PRINTF(3, 4);
/*
 * For an error reply of Redis: maps its code to a status (NOAUTH, WRONGPASS
 * -> EAUTH; NOPERM -> ENOPERM; NOTALOCK -> ENOTLOCK; else EREDIS), records
 * Redis's text and `where` (e.g. "EVALSHA at 127.0.0.1:6379"), returns the status.
 */
int rlock__fail_reply(const redisReply *reply, const char *where);
/* The same, with `otherwise` for a code that maps to EREDIS: a caller that knows what any
 * refusal of its command means (every refusal of AUTH is about the credentials). */
int rlock__fail_reply_as(const redisReply *reply, const char *where, int otherwise);
/*
 * Records status with Redis's own text as rlock_error_info.redis_error, not
 * appended to the message (which already tells it): a summary of several
 * servers' answers that keeps one refusal's text.
 */
int rlock__fail_redis(int status, const char *redis_text, const char *fmt, ...)
    RLOCK__PRINTF(3, 4);
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

#define RLOCK__MESSAGE_MAX 512

/* The detail a thread keeps (error.c's); saved around a best-effort step whose
 * own failure must not replace the call's. */
typedef struct rlock__error_detail {
    int status;
    int sys_errno;
    int host_not_found;
    unsigned mark;                /* bumped by every record */
    char redis_error[RLOCK__MESSAGE_MAX];
    char message[RLOCK__MESSAGE_MAX];
} rlock__error_detail;

void rlock__error_save(rlock__error_detail *saved);
void rlock__error_restore(const rlock__error_detail *saved);

/* ---- thread.c: thread identity --------------------------------------------- */

/* The calling thread's id: unique for the life of the process, never 0. */
uint64_t rlock__thread_id(void);
/* An id for an explicit owner, from the same counter: never a thread's, never repeated. */
uint64_t rlock__owner_id_new(void);
/*
 * Arranges for the exit hook (below) to run with the calling thread's id
 * when it exits. Idempotent and cheap after the first call on a thread.
 */
int rlock__thread_watch_exit(void);
/* The function a watched thread's exit calls; set once, before any watch. */
void rlock__thread_set_exit_hook(void (*hook)(uint64_t thread_id));

/* ---- worker.c: the library's threads --------------------------------------- */

/*
 * A library thread that runs until told to stop. Lifecycle: init, start,
 * stop (flag, wake, join), destroy -- stop and destroy apart, so threads
 * that share the mutex with the worker can still use it between the two.
 */
typedef struct rlock__worker {
    pthread_mutex_t mutex;      /* guards stop, and what the worker's owner says it guards */
    pthread_cond_t wake;        /* signalled on stop, and by the owner for its own reasons */
    pthread_t thread;           /* joined by rlock__worker_stop */
    /* Called by stop with the mutex held, after setting stop: wakes a thread
     * that sleeps elsewhere than on `wake` (NULL: none). */
    void (*on_stop)(void *arg);
    void *arg;                  /* main_fn's argument, and on_stop's */
    int initialised;            /* written by init/destroy only (client open/close) */
    int started;                /* written by start/stop only (client open/close) */
    int stop;
} rlock__worker;

int rlock__worker_init(rlock__worker *w);
int rlock__worker_start(rlock__worker *w, void *(*main_fn)(void *), void *arg);
/* Sets stop, wakes the thread (on_stop too) and joins it. No-op if not started. */
void rlock__worker_stop(rlock__worker *w);
/* Releases the mutex and condition (after stop). No-op if not initialised. */
void rlock__worker_destroy(rlock__worker *w);

/* ---- settings: what the application configured (read-only after open) ------ */

#define RLOCK__CONN_NAME_MAX 128
#define RLOCK__TLS_PATH_MAX 1024
#define RLOCK__TLS_NAME_MAX 256

/* TLS options: rlock_config's tls_* fields, overridden by a rediss url's parameters. */
typedef struct rlock__tls_settings {
    int on;                               /* a rediss scheme: every connection is TLS */
    int verify;                           /* RLOCK_TLS_VERIFY_* */
    char ca[RLOCK__TLS_PATH_MAX];         /* "" = the system's trust store */
    char cert[RLOCK__TLS_PATH_MAX];       /* "" = no client certificate */
    char key[RLOCK__TLS_PATH_MAX];
    char server_name[RLOCK__TLS_NAME_MAX]; /* "" = the host connected to */
} rlock__tls_settings;

typedef struct rlock__settings {
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
    int replica_acks;           /* WAIT after every write; 0 = off */
    int replica_ack_timeout_ms;
    int pubsub_mode;            /* RLOCK_PUBSUB_*, as configured (the net resolves AUTO) */
    long long fair_wait_timeout_ms; /* a fair lock() waiter's wait, for its queue deadline */
    int register_client;        /* keep the registration hash (engine/registration.c) */
    void (*log)(int level, const char *message, void *arg); /* NULL: nothing logged */
    void *log_arg;
    int log_level;              /* RLOCK_LOG_*: the least important level logged */
    int shared_reads_ms;        /* rlock_config's: ignored, only logged at open */
    rlock__tls_settings tls;    /* the config's, then the url's parameters (client open) */
    int (*credentials)(void *arg, char *user, size_t user_size, char *password,
                       size_t password_size); /* NULL: the url's */
    void *credentials_arg;
    /* Who the client is, set by client open before any connection: */
    char client_id[37];         /* its UUID */
    char conn_name[RLOCK__CONN_NAME_MAX]; /* every connection's CLIENT SETNAME:
                                             "rlock:<host>:<pid>:<id8>" */
} rlock__settings;

/* ---- stats.c: what rlock_client_stats reports ---------------------------------- */

/* The counters (rlock_stats has one field for each, of the same meaning). */
typedef enum rlock__counter {
    RLOCK__COUNT_ACQUIRED_IMMEDIATELY,
    RLOCK__COUNT_ACQUIRED_AFTER_WAIT,
    RLOCK__COUNT_BUSY,
    RLOCK__COUNT_UNLOCKS,
    RLOCK__COUNT_HANDOFFS_LOCAL,
    RLOCK__COUNT_HANDOFFS_REMOTE,
    RLOCK__COUNT_RENEWALS,
    RLOCK__COUNT_RENEWAL_FAILURES,
    RLOCK__COUNT_LOSSES,
    RLOCK__COUNT_CONNECTIONS,
    RLOCK__COUNT_CONNECTION_FAILURES,
    RLOCK__COUNT_RECONNECTS,
    RLOCK__COUNT_RESUBSCRIPTIONS,
    RLOCK__COUNT_MASTER_SWITCHES,
    RLOCK__COUNT_SUBSCRIBE_REFUSALS,
    RLOCK__COUNT_NAME_REFUSALS,
    RLOCK__COUNT_REGISTRATION_FAILURES,
    RLOCK__COUNTERS
} rlock__counter;

typedef struct rlock__histogram {
    atomic_ullong buckets[RLOCK_STATS_BUCKETS];
    atomic_ullong sum_us;
} rlock__histogram;

/*
 * Every field is a relaxed atomic, written by whichever thread sees the
 * happening (application threads, the watchdog, the subscriber, connects):
 * one uncontended atomic add each, no mutex, nothing on the hot path but
 * that (docs/operations.md: the cost, measured).
 */
typedef struct rlock__stats {
    atomic_ullong counters[RLOCK__COUNTERS];
    atomic_ullong errors[RLOCK_STATS_ERROR_SLOTS];
    atomic_llong waiting_threads;
    atomic_llong pool_in_use;
    rlock__histogram wait_time;
    rlock__histogram hold_time;
    atomic_int name_refusal_told; /* the first refused CLIENT SETNAME was logged */
} rlock__stats;

static inline void rlock__count(rlock__stats *st, rlock__counter counter, unsigned long long n) {
    atomic_fetch_add_explicit(&st->counters[counter], n, memory_order_relaxed);
}

static inline void rlock__gauge_add(atomic_llong *gauge, long long delta) {
    atomic_fetch_add_explicit(gauge, delta, memory_order_relaxed);
}

/* A call returned status: an error (< 0) is counted in errors. */
static inline void rlock__count_status(rlock__stats *st, int status) {
    if (status < 0) {
        int slot = -status < RLOCK_STATS_ERROR_SLOTS ? -status : 0;
        atomic_fetch_add_explicit(&st->errors[slot], 1, memory_order_relaxed);
    }
}

/* An acquisition call (a whole lock, multi-lock or Redlock call) returned status. */
static inline void rlock__count_busy(rlock__stats *st, int status) {
    if (status == RLOCK_BUSY)
        rlock__count(st, RLOCK__COUNT_BUSY, 1);
}

/* A duration (us; below 0 counts as 0) into a histogram. */
void rlock__observe_us(rlock__histogram *h, int64_t us);
/* Fills every field of *out (a whole rlock_stats) but held_locks, which is the holds table's. */
void rlock__stats_read(rlock__stats *st, rlock_stats *out);

/* ---- events.c ---------------------------------------------------------------- */

typedef struct rlock__event_item rlock__event_item;

typedef struct rlock__events {
    rlock__worker worker;       /* its mutex guards the queue; wake is signalled per event */
    const rlock__settings *settings; /* the callbacks and the log; read-only */
    rlock__event_item *head;    /* owned queue, oldest first */
    rlock__event_item *tail;
    atomic_int link_down;       /* a connection failed and none has worked since */
    rlock__stats stats;         /* fed by every layer (each through its events pointer) */
} rlock__events;

int rlock__events_start(rlock__events *ev, const rlock__settings *settings);
/* Delivers what is queued, then stops the thread (close, after the watchdog). */
void rlock__events_stop(rlock__events *ev);
/*
 * Queues an event for the event thread (any thread; never blocks on a
 * callback). name may be NULL; name and detail are copied. A LOCK_LOST
 * event also goes to on_lock_lost. Dropped if out of memory.
 */
void rlock__event_post(rlock__events *ev, rlock_event_kind kind, const char *name,
                       size_t name_len, long long lease_left_ms, int status, const char *detail);
/* The same for an event about one owner's hold (LOCK_LOST, RENEWAL_FAILED): event.owner. */
void rlock__event_post_owner(rlock__events *ev, rlock_event_kind kind, const char *name,
                             size_t name_len, uint64_t owner, long long lease_left_ms, int status,
                             const char *detail);
/* A connection failed: CONNECTION_LOST, once until rlock__link_up. */
void rlock__link_down(rlock__events *ev, int status, const char *detail);
/* A connection works: RECONNECTED if the link was down. Cheap when it was not. */
void rlock__link_up(rlock__events *ev);

/* ---- log.c --------------------------------------------------------------------- */

/* Whether a line of level would be logged (a log callback is set, level is wanted). */
int rlock__log_wanted(const rlock__settings *s, int level);
/*
 * Queues a log-only line for the event thread: "rlock <id8> <word> <fmt...>"
 * (any thread; formatted here, only when wanted; control characters
 * escaped). Dropped if out of memory.
 */
void rlock__log(rlock__events *ev, int level, const char *word, const char *fmt, ...)
    RLOCK__PRINTF(4, 5);

#define RLOCK__LOG_LINE_MAX 1024

#endif /* RLOCK_CORE_H */
