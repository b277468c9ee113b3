/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * registration.c - the hash a client keeps in Redis while it is open, so an
 * owner field ("<client id>:<thread>") can be tied to a host and a process:
 * written at open, rewritten by the watchdog thread every third of its TTL,
 * deleted at close. The api layer chooses the key and the fields
 * (api/identity.c; docs/operations.md shows the layout); this file keeps
 * them alive.
 *
 * Each write is HSET of every field then PEXPIRE, pipelined in one round
 * trip on the key's node (a Cluster slot's master, the Sentinel master):
 * plain commands, no script, so INFO commandstats' script counts stay the
 * locks' own. Rewriting every field each time brings the hash back after a
 * restart or a failover lost it. Best effort: a failure (an ACL without the
 * key, OOM, Redis unreachable) is counted, logged when writes start failing,
 * and never reaches a lock call. Should PEXPIRE be refused or unanswered
 * after HSET worked (an ACL granting one and not the other; after a slot
 * move, each runs alone where it went), the hash is deleted again: a
 * registration must never outlive its client for ever. (A process killed
 * between those two lone commands leaves it without a TTL: the one hole.)
 *
 * The watchdog's writes are bounded by the time to its next round (a write
 * never delays a renewal) and happen only after a round that worked (Redis
 * answers). Close stops the writes first, waits a moment for one in flight,
 * then deletes the hash on an idle pooled connection: a quarter of a second
 * at most, and skipped while Redis is known unreachable (it then expires by
 * its TTL). Close never connects nor queues for the DEL.
 *
 * Threads: the opening thread (start), the watchdog thread (refresh), the
 * closing thread (stop). Locking: the registration's mutex guards its
 * state; no mutex is held during a round trip.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A registration lives at least this long without a rewrite. */
#define MIN_TTL_MS 1000
/* Close waits at most this long for a write in flight, and as long for the DEL's reply. */
#define CLOSE_WAIT_MS 250

int rlock__registration_init(rlock__registration *r) {
    memset(r, 0, sizeof(*r));
    if (pthread_mutex_init(&r->mutex, NULL) != 0)
        return RLOCK_ENOMEM;
    if (rlock__cond_init(&r->idle) != 0) {
        pthread_mutex_destroy(&r->mutex);
        return RLOCK_ENOMEM;
    }
    r->initialised = 1;
    return RLOCK_OK;
}

void rlock__registration_destroy(rlock__registration *r) {
    if (!r->initialised)
        return;
    rlock__free(r->text);
    rlock__free(r->argv);
    pthread_cond_destroy(&r->idle);
    pthread_mutex_destroy(&r->mutex);
    r->initialised = 0;
}

/* Copies key and the field/value pairs into one owned block (argv, lengths, text). */
static int copy_layout(rlock__registration *r, const char *key, const char *const *fields,
                       int nfields) {
    int argc = 2 + 2 * nfields;
    size_t bytes = strlen(key) + 1;
    for (int i = 0; i < 2 * nfields; i++)
        bytes += strlen(fields[i]) + 1;
    const char **argv = rlock__malloc((size_t)argc * (sizeof(*r->argv) + sizeof(*r->argvlen)));
    char *text = rlock__malloc(bytes);
    if (argv == NULL || text == NULL) {
        /* argv stays NULL: the watchdog must never write a half-made layout */
        rlock__free(argv);
        rlock__free(text);
        return RLOCK_ENOMEM;
    }
    r->argv = argv;
    r->text = text;
    r->argvlen = (size_t *)(r->argv + argc);
    r->argc = argc;
    r->argv[0] = "HSET";
    for (int i = 1; i < argc; i++) {
        const char *s = i == 1 ? key : fields[i - 2];
        size_t len = strlen(s);
        memcpy(text, s, len + 1);
        r->argv[i] = text;
        r->argvlen[i] = len;
        text += len + 1;
    }
    r->argvlen[0] = 4;
    return RLOCK_OK;
}

/*
 * Runs n plain commands on the key's node in one round trip by by_ms (one
 * redirected -- a slot that moved -- runs again where it went, alone); the
 * replies are freed. Returns the first failure (an error reply recorded
 * with whats[i]); *worked: how many commands, from the first, were answered
 * without an error.
 */
static int run(rlock__engine *e, const rlock__cmd *cmds, int n, int64_t by_ms,
               const char *const *whats, int *worked) {
    redisReply *replies[2] = {NULL, NULL};
    int acks = -1;
    int status = rlock__exec_pipeline(e->net, cmds, n, by_ms, replies, &acks);
    *worked = 0;
    for (int i = 0; i < n; i++) {
        int refused = replies[i] != NULL && replies[i]->type == REDIS_REPLY_ERROR;
        if (replies[i] != NULL && !refused && *worked == i)
            (*worked)++;
        if (refused && status == RLOCK_OK)
            status = rlock__fail_reply(replies[i], whats[i]);
        if (replies[i] != NULL)
            freeReplyObject(replies[i]);
    }
    return status;
}

/* DEL of the hash (argv and argvlen: the caller's two entries). */
static rlock__cmd del_command(const rlock__registration *r, const char **argv, size_t *argvlen) {
    argv[0] = "DEL";
    argv[1] = r->argv[1];
    argvlen[0] = 3;
    argvlen[1] = r->argvlen[1];
    return (rlock__cmd){.script = -1, .argc = 2, .argv = argv, .argvlen = argvlen};
}

/* DEL of the hash, by by_ms. */
static int delete_hash(rlock__engine *e, int64_t by_ms) {
    static const char *const what[] = {"DEL of the registration"};
    const char *argv[2];
    size_t argvlen[2];
    rlock__cmd del = del_command(&e->registration, argv, argvlen);
    int worked;
    return run(e, &del, 1, by_ms, what, &worked);
}

/*
 * Close's DEL: written on an idle, connected pooled connection (it never
 * waits for the pool nor connects: close must not hang on a stopped Redis),
 * its reply awaited until by_ms. Unsent (no idle connection) or unanswered,
 * the hash expires by its TTL; a DEL written and not answered still runs
 * when Redis reads it (the connection closes after it).
 */
static int delete_at_close(rlock__engine *e, int64_t by_ms) {
    const char *argv[2];
    size_t argvlen[2];
    rlock__cmd del = del_command(&e->registration, argv, argvlen);
    redisReply *reply = NULL;
    rlock__conn *conn = rlock__send_ahead(e->net, &del);
    if (conn == NULL)
        return rlock__fail(RLOCK_EIO, 0, "no idle connection to send DEL on");
    int status = rlock__read_ahead(conn, by_ms, &reply);
    if (status != RLOCK_OK)
        status = rlock__fail(RLOCK_EIO, ETIMEDOUT, "DEL of the registration: no reply");
    else if (reply->type == REDIS_REPLY_ERROR)
        status = rlock__fail_reply(reply, "DEL of the registration");
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}

/*
 * HSET of every field and PEXPIRE in one round trip; the hash deleted again
 * if only HSET worked -- PEXPIRE refused, or unanswered (after a slot move
 * each runs alone: the HSET can land and the PEXPIRE not).
 */
static int write_hash(rlock__engine *e, int64_t by_ms) {
    rlock__registration *r = &e->registration;
    static const char *const whats[] = {"HSET of the registration", "PEXPIRE of the registration"};
    const char *pexpire[] = {"PEXPIRE", r->argv[1], r->ttl};
    size_t pexpire_len[] = {7, r->argvlen[1], strlen(r->ttl)};
    rlock__cmd cmds[2] = {
        {.script = -1, .argc = r->argc, .argv = r->argv, .argvlen = r->argvlen},
        {.script = -1, .argc = 3, .argv = pexpire, .argvlen = pexpire_len}};
    int worked;
    int status = run(e, cmds, 2, by_ms, whats, &worked);
    if (worked == 1) {
        rlock__error_detail refused;
        rlock__error_save(&refused);
        delete_hash(e, by_ms);
        rlock__error_restore(&refused);
    }
    return status;
}

/* Counts and tells (once per run of failures) a write's outcome; registration mutex not held. */
static void told(rlock__engine *e, int status, int was_failing) {
    rlock__registration *r = &e->registration;
    if (status == RLOCK_OK) {
        if (was_failing || !r->logged_ok)
            rlock__log(e->events, RLOCK_LOG_INFO, "REGISTERED", " key=%s ttl_ms=%s", r->argv[1],
                       r->ttl);
        r->logged_ok = 1;
        return;
    }
    rlock__count(&e->events->stats, RLOCK__COUNT_REGISTRATION_FAILURES, 1);
    if (!was_failing)
        rlock__log(e->events, RLOCK_LOG_WARN, "REGISTER_FAILED",
                   " key=%s status=%s: %s (tried again every %lld ms; locks are not affected)",
                   r->argv[1], rlock_status_name(status), rlock__last_message(),
                   r->ttl_ms / 3);
}

/*
 * One write by by_ms unless one is in flight or close began; the calling
 * thread's error detail is left as it was.
 */
static void write_now(rlock__engine *e, int64_t by_ms) {
    rlock__registration *r = &e->registration;
    rlock__error_detail saved;
    pthread_mutex_lock(&r->mutex);
    if (r->stopped || r->busy || r->argv == NULL) {
        pthread_mutex_unlock(&r->mutex);
        return;
    }
    r->busy = 1;
    int was_failing = r->failing;
    pthread_mutex_unlock(&r->mutex);
    rlock__error_save(&saved);
    int status = write_hash(e, by_ms);
    told(e, status, was_failing);
    rlock__error_restore(&saved);
    pthread_mutex_lock(&r->mutex);
    r->busy = 0;
    r->failing = status != RLOCK_OK;
    r->written |= status == RLOCK_OK;
    r->next_ms = rlock__now_ms() + r->ttl_ms / 3;
    pthread_cond_broadcast(&r->idle);
    pthread_mutex_unlock(&r->mutex);
}

int rlock__registration_start(rlock__engine *e, const char *key, const char *const *fields,
                              int nfields) {
    rlock__registration *r = &e->registration;
    long long ttl = e->settings->watchdog_timeout_ms;
    /* Under the mutex: the watchdog thread already runs and reads them. */
    pthread_mutex_lock(&r->mutex);
    r->ttl_ms = ttl > MIN_TTL_MS ? ttl : MIN_TTL_MS;
    snprintf(r->ttl, sizeof(r->ttl), "%lld", r->ttl_ms);
    int status = copy_layout(r, key, fields, nfields);
    pthread_mutex_unlock(&r->mutex);
    if (status != RLOCK_OK)
        return status;
    write_now(e, rlock__deadline_after(e->settings->command_timeout_ms));
    return RLOCK_OK;
}

void rlock__registration_refresh(rlock__engine *e, int64_t by_ms) {
    rlock__registration *r = &e->registration;
    int64_t now = rlock__now_ms(), own = now + e->settings->command_timeout_ms;
    /*
     * Less than a quarter of the TTL's third left before the next round (a
     * slow round): no write now -- one cut short would time out and cost a
     * healthy connection. The TTL leaves two more rounds to try.
     */
    pthread_mutex_lock(&r->mutex);
    int due = r->argv != NULL && now >= r->next_ms && by_ms - now >= r->ttl_ms / 12;
    pthread_mutex_unlock(&r->mutex);
    if (due)
        write_now(e, own < by_ms ? own : by_ms);
}

void rlock__registration_stop(rlock__engine *e) {
    rlock__registration *r = &e->registration;
    if (!r->initialised)
        return;
    int64_t by = rlock__deadline_after(CLOSE_WAIT_MS);
    pthread_mutex_lock(&r->mutex);
    r->stopped = 1;
    while (r->busy && rlock__cond_wait_until(&r->idle, &r->mutex, by) == 0)
        ;
    /* A write still in flight (Redis slow to answer) could land after a DEL: left to its TTL. */
    int deletable = r->written && !r->busy;
    pthread_mutex_unlock(&r->mutex);
    if (!deletable || atomic_load(&e->events->link_down))
        return; /* nothing to delete, or Redis unreachable: it expires by its TTL */
    rlock__error_detail saved;
    rlock__error_save(&saved);
    if (delete_at_close(e, rlock__deadline_after(CLOSE_WAIT_MS)) != RLOCK_OK)
        rlock__log(e->events, RLOCK_LOG_WARN, "REGISTER_FAILED",
                   " key=%s: DEL at close: %s (it expires by its TTL, %lld ms)", r->argv[1],
                   rlock__last_message(), r->ttl_ms);
    rlock__error_restore(&saved);
}
