/*
 * harness.h - shared helpers for rlock's tests, benchmarks and demo.
 *
 * harness.c does not depend on cmocka (the benchmarks and the demo link it
 * without -lcmocka). When the program is linked with cmocka, a harness
 * failure fails the current cmocka test (cmocka's _fail(), found through a
 * weak reference); otherwise it prints the message and aborts. In a forked
 * child a harness failure prints the message and exits with status 99
 * (h_child_exit); on a thread other than the main one it aborts. So: call assertions and
 * the failing h_* helpers from the test's main thread, and report results
 * from helper threads and child processes through variables / exit codes.
 *
 * Every deadline used by the tests goes through h_scaled(), which multiplies
 * by the environment's TEST_TIMEOUT_SCALE (default 1; valgrind uses 10).
 *
 * Tests that count commands (INFO commandstats) assume nobody else uses the
 * test server meanwhile: scripts/with-redis.sh gives each run its own.
 */
#ifndef RLOCK_TEST_HARNESS_H
#define RLOCK_TEST_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "rlock.h"

#if defined(__GNUC__)
#define H_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define H_NORETURN __attribute__((noreturn))
#else
#define H_PRINTF(fmt, args)
#define H_NORETURN
#endif

/* ---- failing -------------------------------------------------------- */

/* Reports "file:line: message" and fails the current test (see above). */
H_NORETURN void h_fail(const char *file, int line, const char *fmt, ...) H_PRINTF(3, 4);
#define H_FAIL(...) h_fail(__FILE__, __LINE__, __VA_ARGS__)

/* Fails unless expr == want (rlock status codes, printed by name). */
#define H_ASSERT_RC(expr, want)                                                \
    do {                                                                       \
        int h_rc_ = (expr), h_want_ = (want);                                  \
        if (h_rc_ != h_want_)                                                  \
            h_fail(__FILE__, __LINE__, "%s = %s (%d), expected %s (%d)",       \
                   #expr, rlock_status_name(h_rc_), h_rc_,                     \
                   rlock_status_name(h_want_), h_want_);                       \
    } while (0)

/* Fails unless lo <= v <= hi. */
#define H_ASSERT_BETWEEN(v, lo, hi)                                            \
    do {                                                                       \
        long long h_v_ = (v), h_lo_ = (lo), h_hi_ = (hi);                      \
        if (h_v_ < h_lo_ || h_v_ > h_hi_)                                      \
            h_fail(__FILE__, __LINE__, "%s = %lld, expected %lld..%lld", #v,   \
                   h_v_, h_lo_, h_hi_);                                        \
    } while (0)

/* Fails unless the lock key holds exactly one field "<id>:<tid>" = count. */
#define H_ASSERT_LOCK_IS(redis, name, client_id, count)                        \
    do {                                                                       \
        const char *h_n_ = (name);                                             \
        if (!h_lock_is((redis), h_n_, strlen(h_n_), (client_id), (count)))     \
            h_fail(__FILE__, __LINE__, "lock %.200s is not held by %s with "   \
                   "count %lld", h_n_, (client_id), (long long)(count));       \
    } while (0)

/* ---- time ----------------------------------------------------------- */

/* CLOCK_MONOTONIC in milliseconds. */
long long h_now_ms(void);
/* CLOCK_MONOTONIC in microseconds. */
long long h_now_us(void);
/* Sleeps ms milliseconds (restarting on EINTR). For pacing only: never use
 * it to wait for a condition, use H_WAIT_FOR. */
void h_sleep_ms(long long ms);
/* TEST_TIMEOUT_SCALE (>= 1; default 1, or 2 under ASan and 4 under TSan). */
double h_scale(void);
/* ms * TEST_TIMEOUT_SCALE, rounded up. */
long long h_scaled(long long ms);
#define H_MS(ms) h_scaled(ms)

/*
 * Polls cond every few ms until it is true; fails the test if it is still
 * false after timeout_ms (scaled by TEST_TIMEOUT_SCALE). cond is evaluated
 * once more after the deadline, so a slow last poll cannot cause a failure.
 */
#define H_POLL_MS 3
#define H_WAIT_FOR(cond, timeout_ms)                                           \
    do {                                                                       \
        long long h_wf_limit_ = h_scaled(timeout_ms);                          \
        long long h_wf_deadline_ = h_now_ms() + h_wf_limit_;                   \
        while (!(cond)) {                                                      \
            if (h_now_ms() >= h_wf_deadline_) {                                \
                if (cond)                                                      \
                    break;                                                     \
                h_fail(__FILE__, __LINE__,                                     \
                       "condition still false after %lld ms: %s",              \
                       h_wf_limit_, #cond);                                    \
            }                                                                  \
            h_sleep_ms(H_POLL_MS);                                             \
        }                                                                      \
    } while (0)

/* As H_WAIT_FOR, but evaluates to 1 if cond became true and 0 on timeout
 * instead of failing. */
#define H_POLL_UNTIL(cond, timeout_ms)                                         \
    __extension__({                                                            \
        long long h_pu_deadline_ = h_now_ms() + h_scaled(timeout_ms);          \
        int h_pu_ok_ = 0;                                                      \
        for (;;) {                                                             \
            if (cond) {                                                        \
                h_pu_ok_ = 1;                                                  \
                break;                                                         \
            }                                                                  \
            if (h_now_ms() >= h_pu_deadline_)                                  \
                break;                                                         \
            h_sleep_ms(H_POLL_MS);                                             \
        }                                                                      \
        h_pu_ok_;                                                              \
    })

/* ---- the test server ------------------------------------------------ */

/* $RLOCK_TEST_URL, else "redis://127.0.0.1:6379". */
const char *h_url(void);
/* A new raw hiredis connection to h_url() (redis:// urls, with optional
 * password and /db; or unix://path). Fails the test if it cannot connect.
 * Free it with redisFree(). */
redisContext *h_redis(void);
/* The same for any url (e.g. h_server_url()). */
redisContext *h_redis_url(const char *url);
/* h_url() with "/db" appended (NULL if h_url() is not a plain
 * redis://host:port url). Static storage. */
const char *h_url_db(int db);

/*
 * Runs a command (hiredis format) and returns its reply; fails the test if
 * the connection broke. The reply may be an error reply. freeReplyObject()
 * it.
 */
redisReply *h_cmd(redisContext *c, const char *fmt, ...);
/* Runs a command that must answer an integer; returns it. */
long long h_cmd_int(redisContext *c, const char *fmt, ...);
/* Runs a command that must not answer an error. */
void h_cmd_ok(redisContext *c, const char *fmt, ...);
/* Runs a command that must answer a bulk string or nil; returns a malloc'd
 * copy or NULL for nil. */
char *h_cmd_str(redisContext *c, const char *fmt, ...);

/* EXISTS name (binary-safe, len bytes). */
int h_exists(redisContext *c, const char *name, size_t len);
/* PTTL name. */
long long h_pttl(redisContext *c, const char *name, size_t len);

/*
 * HGETALL of a lock key: fills field/value (malloc'd, NUL-terminated; pass
 * NULL to skip) with the FIRST field and returns the number of fields
 * (0 if the key does not exist).
 */
int h_lock_fields(redisContext *c, const char *name, size_t len, char **field,
                  long long *value);
/*
 * 1 if the lock key has exactly one field, named "<client_id>:<decimal>",
 * whose value is count; 0 otherwise (with a description on stderr).
 */
int h_lock_is(redisContext *c, const char *name, size_t len,
              const char *client_id, long long count);

/*
 * The wake-up channel of a lock: "redisson_lock__channel:{NAME}", or
 * "redisson_lock__channel:NAME" when NAME contains '{'. malloc'd; *out_len
 * (may be NULL) receives its length (names may contain any byte but NUL).
 */
char *h_channel(const char *name, size_t len, size_t *out_len);
/* PUBSUB NUMSUB of a lock's channel. */
long long h_numsub(redisContext *c, const char *name, size_t len);

/* calls=N of "cmdstat_<cmd>" in INFO commandstats (0 if absent). */
long long h_commandstat_calls(redisContext *c, const char *cmd);
/* Script calls so far (EVALSHA + EVAL). */
long long h_script_calls(redisContext *c);
/*
 * Waits until no script has run for quiet_ms (every waiter has made its
 * attempts and sleeps). Fails the test if that does not happen within
 * timeout_ms (scaled). Returns the script call count.
 */
long long h_scripts_quiet(redisContext *c, long long quiet_ms, long long timeout_ms);

/*
 * A raw subscriber on a lock's channel. h_sub_read() waits up to timeout_ms
 * (scaled) for the next message and returns its payload (malloc'd), or NULL
 * on timeout (the context is unusable afterwards: free it).
 */
redisContext *h_sub_open(const char *url, const char *name, size_t len);
char *h_sub_read(redisContext *sub, long long timeout_ms);

/* ---- names ---------------------------------------------------------- */

/*
 * A lock name no other test (in this run, or earlier runs against the same
 * server) uses: "rlock-test:PREFIX:PID:COUNTER:STAMP". Valid until exit;
 * thread-safe.
 */
const char *h_unique_name(const char *prefix);

/* ---- rlock clients -------------------------------------------------- */

/* rlock_config_init() plus url = h_url() and scaled connect/command timeouts
 * (2000 ms each). */
void h_config(rlock_config *cfg);
/* Opens a client; fails the test on error. */
rlock_client *h_open_config(const rlock_config *cfg);
/* Client on h_url() with the given watchdog timeout and command timeout
 * (both used as given: scale them yourself with H_MS if needed). */
rlock_client *h_open(long long watchdog_timeout_ms, int command_timeout_ms);
/* The same with an on_lock_lost callback. */
rlock_client *h_open_cb(long long watchdog_timeout_ms, int command_timeout_ms,
                        void (*cb)(const char *name, void *arg), void *arg);
/* The same on another url. */
rlock_client *h_open_url(const char *url, long long watchdog_timeout_ms,
                         int command_timeout_ms);
/* rlock_get(); fails the test on error. */
rlock *h_get(rlock_client *client, const char *name);

/* ---- processes and threads ------------------------------------------ */

/*
 * Waits up to timeout_ms (scaled) for child pid. Returns its wait status, or
 * -1 if it did not exit in time (it is then SIGKILLed and reaped).
 */
int h_wait_child(pid_t pid, long long timeout_ms);
/*
 * Ends a forked child with exit status code. Under valgrind it execs
 * "/bin/sh -c 'exit CODE'" instead of _exit(): a child of a multi-threaded
 * parent inherits memory that only the parent's threads referenced (threads
 * a child does not have), and valgrind's exit-time leak check would report
 * it as the child's leak. Memory errors in the child are still printed.
 */
H_NORETURN void h_child_exit(int code);
/* Exit code of a child that exited normally, else 1000 + signal number (or
 * 2000 for a timeout, i.e. status -1). */
int h_child_code(int status);
/* The state letter of /proc/PID/stat ('T' or 't' when stopped), or 0. */
char h_proc_state(pid_t pid);

/*
 * Actors: a helper thread that runs the functions the main thread posts to
 * it, one at a time, and stays alive in between (so it can hold a lock
 * while the main thread checks things). Results come back as long long.
 */
typedef struct h_actor h_actor;
typedef long long (*h_actor_fn)(void *arg);

h_actor *h_actor_start(void);
/* Starts fn(arg) on the actor; it must be idle. Returns at once. */
void h_actor_post(h_actor *a, h_actor_fn fn, void *arg);
/* 1 once the posted call has returned. */
int h_actor_done(h_actor *a);
/* Waits up to timeout_ms (scaled) for the posted call; fails the test if it
 * has not returned by then. Returns its result. */
long long h_actor_wait_at(h_actor *a, long long timeout_ms, const char *file, int line);
#define h_actor_wait(a, timeout_ms) h_actor_wait_at((a), (timeout_ms), __FILE__, __LINE__)
/* h_now_ms() when the last call returned. */
long long h_actor_finished_ms(h_actor *a);
/* post + wait (30 s). */
long long h_actor_call_at(h_actor *a, h_actor_fn fn, void *arg, const char *file, int line);
#define h_actor_call(a, fn, arg) h_actor_call_at((a), (fn), (arg), __FILE__, __LINE__)
/* Waits (without bound) for a posted call, then ends the thread and frees a.
 * NULL is a no-op. */
void h_actor_stop(h_actor *a);

/* Actor functions for common calls (arg is an rlock *). */
long long h_op_lock(void *lock);
long long h_op_unlock(void *lock);
long long h_op_force_unlock(void *lock);
long long h_op_is_locked(void *lock);
long long h_op_is_held(void *lock);
long long h_op_hold_count(void *lock);
/* arg is a struct h_try *. */
struct h_try {
    rlock *lock;
    long long wait_ms;
    long long lease_ms;
};
long long h_op_try_lock(void *h_try);
long long h_op_lock_lease(void *h_try);

/* ---- servers of our own (fault tests) ------------------------------- */

typedef struct h_server h_server;

/*
 * Starts redis-server bound to 127.0.0.1 on a free random port, in a new
 * temporary directory, with no persistence and DEBUG enabled for local
 * connections; it gets SIGKILL if the thread that started it dies (call
 * from the test's main thread). Returns once it answers PING. Fails the
 * test if it cannot be started.
 */
h_server *h_server_start(void);
/* redis://127.0.0.1:PORT (owned by the server object). */
const char *h_server_url(const h_server *s);
int h_server_port(const h_server *s);
/* pid of the running redis-server, 0 if it is not running. */
pid_t h_server_pid(const h_server *s);
/* A raw connection to it (redisFree() it). */
redisContext *h_server_redis(const h_server *s);
/* SIGSTOP, and waits until /proc/PID/stat shows state T. */
void h_server_pause(h_server *s);
/* SIGCONT, and waits until it is no longer stopped. */
void h_server_resume(h_server *s);
/* SIGKILL and reap. */
void h_server_kill(h_server *s);
/* Kills it if running, then starts it again on the same port and data
 * directory (empty: nothing is persisted); waits for PING. */
void h_server_restart(h_server *s);
/* Kills it, removes its directory and frees s. NULL is a no-op. */
void h_server_stop(h_server *s);
/* cmocka per-test fixtures: *state = a fresh server (h_server *), stopped after. */
int h_server_fixture_start(void **state);
int h_server_fixture_stop(void **state);

/* ==== fault-suite helpers ================================================
 * Added for test/fault_*.c (issue 3). Nothing above this line was changed;
 * these only add names (h_child_*, h_line_*, h_lost_*).
 */

/*
 * A forked helper process (another "process" holding or waiting for locks)
 * that talks to the test over two pipes, one text line per message. The child
 * inherits nothing usable from rlock (an inherited client returns
 * RLOCK_ECLOSED by contract): it opens its own client. It gets SIGKILL if the
 * thread that started it dies (start it from the test's main thread).
 */
typedef struct h_child {
    pid_t pid;
    int to;   /* test -> child */
    int from; /* child -> test */
} h_child;
typedef int (*h_child_fn)(void *arg, int in_fd, int out_fd);

/* Forks; the child runs fn(arg, in_fd, out_fd) and _exit()s with its result. */
void h_child_start(h_child *c, h_child_fn fn, void *arg);
/* Writes one line ("\n" appended). 0, or -1 if the reader is gone. Safe in children. */
int h_line_send(int fd, const char *fmt, ...) H_PRINTF(2, 3);
/* Reads one line (the "\n" removed) within timeout_ms (scaled); its length,
 * or -1 on EOF or timeout. Safe in children. */
int h_line_recv(int fd, char *buf, size_t size, long long timeout_ms);
/* In the test: send a line to the child; read one, failing the test on EOF
 * or timeout. */
void h_child_send(h_child *c, const char *fmt, ...) H_PRINTF(2, 3);
void h_child_recv(h_child *c, char *buf, size_t size, long long timeout_ms);
/* Closes the pipes, waits up to timeout_ms (scaled) for the child (SIGKILL
 * after that) and returns h_child_code() of its status. */
int h_child_finish(h_child *c, long long timeout_ms);
/* SIGKILL and reap (kill -9). Returns h_child_code() (1009). */
int h_child_kill(h_child *c);

/*
 * An on_lock_lost callback that counts its calls: pass h_lost_cb and a
 * struct h_lost * as callback_arg. Reads are atomic (h_lost_count).
 */
struct h_lost {
    int count;            /* use h_lost_count() */
    long long last_ms;    /* h_now_ms() of the last call */
    char last_name[256];  /* the last name reported (truncated) */
};
void h_lost_cb(const char *name, void *arg);
int h_lost_count(struct h_lost *l);

/*
 * Closes c on an actor so that a hang fails the test instead of blocking it
 * (fails after timeout_ms, scaled); returns how long close took in ms.
 */
long long h_timed_close(rlock_client *c, long long timeout_ms);

#endif /* RLOCK_TEST_HARNESS_H */
