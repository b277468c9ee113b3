/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.h - librlock clients as the tests open them: unique lock names,
 * configs with scaled timeouts, opening that fails the test (or reports why
 * not), an on_lock_lost recorder, and calls timed on threads of their own.
 */
#ifndef RLOCK_TEST_HARNESS_CLIENT_H
#define RLOCK_TEST_HARNESS_CLIENT_H

#include <pthread.h>

#include "rlock.h"

/*
 * A lock name no other test (in this run, or earlier runs against the same
 * server) uses: "rlock-test:PREFIX:PID:COUNTER:STAMP". Valid until exit;
 * thread-safe.
 */
const char *h_unique_name(const char *prefix);

/* rlock_config_init() plus url = h_url(), scaled connect/command timeouts
 * (2000 ms each) and register_client = h_register_clients. */
void h_config(rlock_config *cfg);
/*
 * register_client of every client the harness opens: 1 (the library's
 * default) unless a test that needs no background writes but renewals (a
 * proxy dropping "the next reply", whoever it is for) sets it to 0.
 */
extern int h_register_clients;
/* Opens a client; fails the test on error. */
rlock_client *h_open_config(const rlock_config *cfg);
/* Client on h_url() with the given watchdog timeout and command timeout
 * (both used as given: scale them yourself with H_MS if needed). */
rlock_client *h_open(long long watchdog_timeout_ms, int command_timeout_ms);
/* The same with an on_lock_lost callback. */
rlock_client *h_open_cb(long long watchdog_timeout_ms, int command_timeout_ms,
                        void (*cb)(const char *name, void *arg), void *arg);
/* The same on another url. */
rlock_client *h_open_url(const char *url, long long watchdog_timeout_ms, int command_timeout_ms);
/* Client on h_url() with the given watchdog timeout and local_handoffs (the
 * in-process hand-off bound; both used as given). */
rlock_client *h_open_handoffs(long long watchdog_timeout_ms, int local_handoffs);
struct h_lost; /* below */
/* Client on url with watchdog timeout wd; command_timeout_ms cmd if > 0,
 * retry_attempts and retry_interval_ms if >= 0 (else h_config()'s); and lost
 * (h_lost_init'ed here) as its on_lock_lost recorder unless NULL. */
rlock_client *h_open_retries(const char *url, long long wd, long long cmd, int retries,
                             int retry_interval, struct h_lost *lost);
/* rlock_get(); fails the test on error. */
rlock *h_get(rlock_client *client, const char *name);
/*
 * Tries to open a client on url (h_config(), and connect_timeout_ms if > 0)
 * and closes it again. Returns rlock_client_open's status; *info receives
 * rlock_last_error_info(). Prints the url and the outcome.
 */
int h_open_status(const char *url, int connect_timeout_ms, rlock_error_info *info);

/*
 * An on_lock_lost callback that records its calls: pass h_lost_cb and a
 * struct h_lost * (h_lost_init'ed) as callback_arg. The count is atomic
 * (h_lost_count); the other fields are written before it is incremented, so
 * they may be read once h_lost_count() shows the call.
 */
#define H_LOST_NO_PROBE 12345
struct h_lost {
    int count;           /* use h_lost_count() */
    long long last_ms;   /* h_now_ms() of the last call */
    char last_name[256]; /* the last name reported (truncated) */
    pthread_t thread;    /* the thread of the last call */
    /* Optional: the callback calls rlock_is_locked(probe) (other rlock calls
     * are allowed there) and stores its result in probe_rc, which stays
     * H_LOST_NO_PROBE until then. */
    rlock *probe;
    int probe_rc;
};
void h_lost_init(struct h_lost *l);
void h_lost_cb(const char *name, void *arg);
int h_lost_count(struct h_lost *l);

/* rlock_client_stats() of c (the whole struct); fails the test on error. */
rlock_stats h_stats(rlock_client *c);

/*
 * Closes c on an actor so that a hang fails the test instead of blocking it
 * (fails after timeout_ms, scaled); returns how long close took in ms.
 */
long long h_timed_close(rlock_client *c, long long timeout_ms);

/*
 * rlock_try_lock(lock, wait_ms, lease_ms) timed on a plain thread of the
 * test's own: pthread_create(&th, NULL, h_timed_try_main, &t). rc and
 * elapsed_ms are set when it returns; h_timed_try_done() tells whether it has.
 */
struct h_timed_try {
    rlock *lock;
    long long wait_ms;  /* used as given */
    long long lease_ms; /* used as given */
    int rc;
    long long elapsed_ms;
    int done; /* use h_timed_try_done() */
};
void *h_timed_try_main(void *timed_try);
int h_timed_try_done(struct h_timed_try *t);

#endif /* RLOCK_TEST_HARNESS_CLIENT_H */
