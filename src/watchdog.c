/*
 * watchdog.c - the renewal thread: one per client.
 *
 * Every watchdog_timeout/3 it snapshots the renewed entries of the holds
 * table and resets their TTL to watchdog_timeout in one pipelined round trip
 * (RENEW scripts of up to RENEW_BATCH keys each). The script only extends a
 * field that is still ours; it never re-creates a lock. A key reported gone
 * drops its entry and calls on_lock_lost exactly once (holds.c's serials make
 * sure a newer hold of the same name is not dropped by an older result, and
 * an unlock in flight is left to decide for itself). An I/O error keeps every
 * entry and is retried after interval/6: the lease may still be alive, and
 * the next successful round tells.
 *
 * Threads: the watchdog thread runs renew_round and the callback; close
 * stops it (watchdog.stop under watchdog.mutex, then join). Locking:
 * watchdog.mutex guards stop; the holds table has its own mutex. No mutex is
 * held during the round trip or the callback.
 */
#include <signal.h>
#include <string.h>

#include "internal.h"

#define RENEW_BATCH 500

/* The argv of one renewal round: owner strings and argv arrays, one allocation each. */
typedef struct renew_args {
    char *owners;          /* n * RLOCK__OWNER_MAX bytes */
    const char **argv;     /* per batch: k names, lease, k owners */
    size_t *argvlen;
    rlock__cmd *cmds;
    redisReply **replies;
    int ncmds;
} renew_args;

static void free_args(renew_args *a) {
    rlock__free(a->owners);
    rlock__free(a->argv);
    rlock__free(a->argvlen);
    rlock__free(a->cmds);
    rlock__free(a->replies);
}

static int build_args(rlock_client *c, const rlock__renewal *r, size_t n, const char *lease,
                      size_t lease_len, renew_args *a) {
    size_t nbatches = (n + RENEW_BATCH - 1) / RENEW_BATCH;
    size_t nargs = 2 * n + nbatches;
    memset(a, 0, sizeof(*a));
    a->owners = rlock__malloc(n * RLOCK__OWNER_MAX);
    a->argv = rlock__malloc(nargs * sizeof(*a->argv));
    a->argvlen = rlock__malloc(nargs * sizeof(*a->argvlen));
    a->cmds = rlock__calloc(nbatches, sizeof(*a->cmds));
    a->replies = rlock__calloc(nbatches, sizeof(*a->replies));
    if (!a->owners || !a->argv || !a->argvlen || !a->cmds || !a->replies)
        return RLOCK_ENOMEM;
    const char **argv = a->argv;
    size_t *argvlen = a->argvlen;
    for (size_t first = 0; first < n; first += RENEW_BATCH) {
        size_t k = n - first < RENEW_BATCH ? n - first : RENEW_BATCH;
        rlock__cmd *cmd = &a->cmds[a->ncmds++];
        cmd->script = RLOCK__SCRIPT_RENEW;
        cmd->nkeys = (int)k;
        cmd->argc = (int)(2 * k + 1);
        cmd->argv = argv;
        cmd->argvlen = argvlen;
        for (size_t i = 0; i < k; i++) {
            argv[i] = r[first + i].name;
            argvlen[i] = r[first + i].name_len;
        }
        argv[k] = lease;
        argvlen[k] = lease_len;
        for (size_t i = 0; i < k; i++) {
            char *owner = a->owners + (first + i) * RLOCK__OWNER_MAX;
            argv[k + 1 + i] = owner;
            argvlen[k + 1 + i] = rlock__owner(c, r[first + i].owner_tid, owner);
        }
        argv += cmd->argc;
        argvlen += cmd->argc;
    }
    return RLOCK_OK;
}

static void report_lost(rlock_client *c, const rlock__renewal *r) {
    if (!rlock__holds_drop_lost(&c->holds, r) || c->settings.on_lock_lost == NULL)
        return;
    char *name = rlock__memdup0(r->name, r->name_len);
    if (name == NULL)
        return; /* out of memory: the entry is dropped, the callback skipped */
    c->settings.on_lock_lost(name, c->settings.callback_arg);
    rlock__free(name);
}

/*
 * Applies one batch's reply: a 0 for key i means that lock is gone. An error
 * reply keeps the entries (RLOCK_EREDIS: try again soon).
 */
static int apply_reply(rlock_client *c, const redisReply *reply, const rlock__renewal *r,
                       size_t k) {
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != k)
        return RLOCK_EREDIS;
    for (size_t i = 0; i < k; i++) {
        const redisReply *e = reply->element[i];
        if (e->type == REDIS_REPLY_INTEGER && e->integer == 0)
            report_lost(c, &r[i]);
    }
    return RLOCK_OK;
}

/* One renewal round; RLOCK_OK when every batch got its answer. */
static int renew_round(rlock_client *c) {
    rlock__renewal *r = NULL;
    char *arena = NULL, lease[24];
    size_t n = 0, lease_len = rlock__fmt_i64(lease, c->settings.watchdog_timeout_ms);
    renew_args a;

    int status = rlock__holds_snapshot(&c->holds, &r, &n, &arena);
    if (status != RLOCK_OK || n == 0)
        goto out;
    memset(&a, 0, sizeof(a));
    status = build_args(c, r, n, lease, lease_len, &a);
    if (status == RLOCK_OK)
        status = rlock__exec_pipeline(c, a.cmds, a.ncmds, a.replies);
    for (int b = 0; status == RLOCK_OK && b < a.ncmds; b++) {
        const rlock__renewal *batch = r + (size_t)b * RENEW_BATCH;
        int applied = apply_reply(c, a.replies[b], batch, (size_t)a.cmds[b].nkeys);
        if (applied != RLOCK_OK) /* the other batches are still applied */
            status = applied;
    }
    for (int b = 0; b < a.ncmds && a.replies != NULL; b++)
        if (a.replies[b] != NULL)
            freeReplyObject(a.replies[b]);
    free_args(&a);
out:
    rlock__free(r);
    rlock__free(arena);
    atomic_fetch_add(&c->watchdog.rounds, 1);
    return status;
}

static void *watchdog_main(void *arg) {
    rlock_client *c = arg;
    rlock__watchdog *wd = &c->watchdog;
    int64_t interval = c->settings.watchdog_timeout_ms / 3;
    /*
     * After a failed round, try again soon rather than a whole interval later:
     * two missed rounds would otherwise leave the third due just as the lease
     * ends. Six quick tries fit in one interval.
     */
    int64_t retry_after = interval / 6 > 10 ? interval / 6 : 10;

    pthread_setname_np(pthread_self(), "rlock-watchdog");
    pthread_mutex_lock(&wd->mutex);
    int64_t next_round = rlock__now_ms() + interval;
    while (!wd->stop) {
        if (rlock__now_ms() < next_round) {
            rlock__cond_wait_until(&wd->wake, &wd->mutex, next_round);
            continue;
        }
        int64_t started = rlock__now_ms();
        pthread_mutex_unlock(&wd->mutex);
        int status = renew_round(c);
        pthread_mutex_lock(&wd->mutex);
        next_round = status == RLOCK_OK ? started + interval : rlock__now_ms() + retry_after;
    }
    pthread_mutex_unlock(&wd->mutex);
    return NULL;
}

/* Library threads must not take the application's signals. */
int rlock__start_thread(pthread_t *thread, void *(*main_fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(thread, NULL, main_fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc == 0 ? RLOCK_OK : RLOCK_ENOMEM;
}

int rlock__watchdog_start(rlock_client *c) {
    rlock__watchdog *wd = &c->watchdog;
    if (pthread_mutex_init(&wd->mutex, NULL) != 0)
        return RLOCK_ENOMEM;
    if (rlock__cond_init(&wd->wake) != 0) {
        pthread_mutex_destroy(&wd->mutex);
        return RLOCK_ENOMEM;
    }
    if (rlock__start_thread(&wd->thread, watchdog_main, c) != RLOCK_OK) {
        pthread_cond_destroy(&wd->wake);
        pthread_mutex_destroy(&wd->mutex);
        return RLOCK_ENOMEM;
    }
    wd->started = 1;
    return RLOCK_OK;
}

void rlock__watchdog_stop(rlock_client *c) {
    rlock__watchdog *wd = &c->watchdog;
    if (!wd->started)
        return;
    pthread_mutex_lock(&wd->mutex);
    wd->stop = 1;
    pthread_cond_signal(&wd->wake);
    pthread_mutex_unlock(&wd->mutex);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->wake);
    pthread_mutex_destroy(&wd->mutex);
    wd->started = 0;
}
