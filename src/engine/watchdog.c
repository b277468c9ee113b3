/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watchdog.c - the renewal thread: one per client. The order of a round's
 * scripts and their batches are renew_order.c's (watchdog.h: what they share).
 *
 * Every watchdog_timeout/3 it snapshots the renewed entries of the holds
 * table and resets their TTL to watchdog_timeout in one pipelined round trip
 * per node (RENEW scripts of up to RENEW_BATCH keys each). Each hold names
 * its renewer (its kind's scripts and owner field): a batch takes the holds
 * of one script, and the holds of a renewer that renews by lock (a
 * read-write lock's readers) are kept next to each other, sorted by name, so
 * that one script re-arms each such lock once for all its holds. On a Cluster the
 * names are grouped by node, and a RENEW_NODE script takes up to RENEW_BATCH
 * locks of the slots of one node (only its first key is declared: the
 * command's keys must share a slot, the keys a script touches need only be
 * on its node); the net sends each node its part at once, and re-runs alone
 * a script that was redirected. The locks a node answers are not its own
 * (a slot moved or migrating) get a second pass, by slot, whose RENEW
 * scripts follow their redirects; one answered TRYAGAIN (its keys split by
 * a migration) is renewed key by key. A node that fails fails only its own
 * entries. The script only extends a field
 * that is still ours; it never re-creates a lock. A confirmed renewal
 * moves the hold's lease end (client clock) to the round's send time +
 * timeout. A key reported gone makes its entry a tombstone and posts one
 * LOCK_LOST event (holds.c's serials make sure a newer hold is not touched
 * by an older result, and an unlock in flight is left to decide for
 * itself). A failed round posts RENEWAL_FAILED, keeps every entry and is
 * retried after interval/6: the lease may still be alive.
 *
 * The lease end by the client's clock is a hard limit: the thread wakes at
 * the earliest one, and a hold past it with no renewal confirmed is reported
 * lost then, even if Redis never answers again; a round's round trip never
 * outlasts the earliest lease end either.
 *
 * Callbacks never run here (events.c has its own thread), so a slow
 * callback cannot delay a renewal.
 *
 * Threads: the watchdog thread runs renew_round and sweep_expired; close
 * stops it (core/worker.c). Locking: the worker's mutex guards only stop; the
 * holds table has its own mutex. No mutex is
 * held during the round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "watchdog.h"

static void free_buffers(round_buffers *b) {
    rlock__buf_free(&b->entries);
    rlock__buf_free(&b->sorted);
    rlock__buf_free(&b->counts);
    rlock__buf_free(&b->slot_node);
    rlock__buf_free(&b->nodes);
    rlock__buf_free(&b->outcomes);
    rlock__buf_free(&b->names);
    rlock__buf_free(&b->owners);
    rlock__buf_free(&b->argv);
    rlock__buf_free(&b->argvlen);
    rlock__buf_free(&b->cmds);
    rlock__buf_free(&b->firsts);
    rlock__buf_free(&b->replies);
    rlock__buf_free(&b->failed);
    rlock__buf_free(&b->again);
}

/* Most locks are held by few owners: format each owner field once per round. */
#define OWNER_CACHE 64

typedef struct owner_cache {
    const void *arg;            /* the renewers' owner_field argument */
    uint64_t owner[OWNER_CACHE];
    const rlock__renewer *renewer[OWNER_CACHE]; /* whose field format */
    const char *str[OWNER_CACHE];
    size_t len[OWNER_CACHE];
    size_t used;                /* owner strings written to the owners buffer */
} owner_cache;

static const char *owner_of(const rlock__renewal *r, owner_cache *oc, char *owners, size_t *len) {
    size_t slot = r->owner % OWNER_CACHE;
    if (oc->owner[slot] != r->owner || oc->renewer[slot] != r->renewer || oc->str[slot] == NULL) {
        char *field = owners + oc->used++ * RLOCK__OWNER_MAX;
        oc->owner[slot] = r->owner;
        oc->renewer[slot] = r->renewer;
        oc->str[slot] = field;
        oc->len[slot] = r->renewer->owner_field(oc->arg, r->owner, field);
    }
    *len = oc->len[slot];
    return oc->str[slot];
}

/* The round's buffers for n entries, and no outcome yet. */
static int reserve_round(round_buffers *b, size_t n) {
    size_t nargs = 3 * n; /* at most 2 per entry + 1 per command, one command per entry */
    if (rlock__buf_reserve(&b->outcomes, n) != RLOCK_OK ||
        rlock__buf_reserve(&b->again, n * sizeof(rlock__renewal)) != RLOCK_OK ||
        rlock__buf_reserve(&b->owners, n * RLOCK__OWNER_MAX) != RLOCK_OK ||
        rlock__buf_reserve(&b->argv, nargs * sizeof(const char *)) != RLOCK_OK ||
        rlock__buf_reserve(&b->argvlen, nargs * sizeof(size_t)) != RLOCK_OK ||
        rlock__buf_reserve(&b->cmds, n * sizeof(rlock__cmd)) != RLOCK_OK ||
        rlock__buf_reserve(&b->firsts, n * sizeof(size_t)) != RLOCK_OK ||
        rlock__buf_reserve(&b->replies, n * sizeof(redisReply *)) != RLOCK_OK ||
        rlock__buf_reserve(&b->failed, n * sizeof(rlock__renewal)) != RLOCK_OK)
        return RLOCK_ENOMEM;
    memset(b->outcomes.data, OUTCOME_NONE, n);
    return RLOCK_OK;
}

/* One script's arguments: RENEW's (names, lease, fields) or RENEW_NODE's (see engine.h). */
static void fill_args(owner_cache *oc, char *owners, int by_node, const rlock__renewal *r,
                      size_t k, const char *lease, size_t lease_len, const char **argv,
                      size_t *argvlen) {
    const char **names = by_node ? argv + 3 : argv, **fields = by_node ? argv + 4 : argv + k + 1;
    size_t *names_len = by_node ? argvlen + 3 : argvlen;
    size_t *fields_len = by_node ? argvlen + 4 : argvlen + k + 1;
    size_t step = by_node ? 2 : 1, lease_at = by_node ? 1 : k;
    if (by_node) { /* the first lock's name is the one key, its field the second arg */
        argv[0] = r[0].name;
        argvlen[0] = r[0].name_len;
        argv[2] = owner_of(&r[0], oc, owners, &argvlen[2]);
        r++, k--;
    }
    argv[lease_at] = lease;
    argvlen[lease_at] = lease_len;
    for (size_t i = 0; i < k; i++) {
        names[i * step] = r[i].name;
        names_len[i * step] = r[i].name_len;
        fields[i * step] = owner_of(&r[i], oc, owners, &fields_len[i * step]);
    }
}

/*
 * Builds one pass's scripts over r (in script order): the node scripts per
 * node (by_node) or the plain ones per slot, each batch of one renewer's
 * script. Returns how many.
 */
static int build_pass(rlock__engine *e, round_buffers *b, const rlock__renewal *r, size_t n,
                      int by_node, const char *lease, size_t lease_len) {
    owner_cache oc;
    memset(&oc, 0, sizeof(oc));
    oc.arg = e->watchdog.owner_arg;
    const char **argv = b->argv.data;
    size_t *argvlen = b->argvlen.data, *firsts = b->firsts.data;
    rlock__cmd *cmds = b->cmds.data;
    int ncmds = 0;
    for (size_t first = 0, k; first < n; first += k) {
        k = by_node ? rlock__renew_node_batch(r, first, n) : rlock__renew_slot_batch(r, first, n);
        firsts[ncmds] = first;
        const rlock__renewer *rn = r[first].renewer;
        rlock__cmd *cmd = &cmds[ncmds++];
        /* every field set (routed by key: no node), the buffer is reused */
        *cmd = (rlock__cmd){.script = by_node ? rn->node_script : rn->script,
                            .flags = RLOCK__CMD_WRITE |
                                     (by_node || rn->family != NULL ? RLOCK__CMD_NO_ASK : 0),
                            .nkeys = by_node ? 1 : (int)k, .argc = (int)(2 * k + 1),
                            .argv = argv, .argvlen = argvlen};
        fill_args(&oc, b->owners.data, by_node, r + first, k, lease, lease_len, argv, argvlen);
        argv += cmd->argc;
        argvlen += cmd->argc;
    }
    return ncmds;
}

static void report_lost(rlock__engine *e, const rlock__renewal *r, int64_t now_ms, int status,
                        const char *detail) {
    rlock__event_post_owner(e->events, RLOCK_EVENT_LOCK_LOST, r->name, r->name_len, r->owner,
                            r->expires_ms - now_ms, status, detail);
}

/*
 * Notes what one script's reply says of each of its k entries (by snapshot
 * place): 1 renewed -- if the replicas acknowledged it, when replica_acks
 * asks for that (else a failover could undo it); 0 gone; -1 (RENEW_NODE)
 * served elsewhere. An error reply keeps the entries (RLOCK_EREDIS: try
 * again soon).
 */
static int note_reply(round_buffers *b, const redisReply *reply, const rlock__renewal *r,
                      size_t k, int acknowledged) {
    signed char *outcomes = b->outcomes.data;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != k)
        return RLOCK_EREDIS;
    for (size_t i = 0; i < k; i++) {
        const redisReply *answer = reply->element[i];
        if (answer->type != REDIS_REPLY_INTEGER)
            continue;
        if (answer->integer == -1)
            outcomes[r[i].index] = OUTCOME_ELSEWHERE;
        else if (answer->integer != 1)
            outcomes[r[i].index] = OUTCOME_GONE;
        else if (acknowledged)
            outcomes[r[i].index] = OUTCOME_RENEWED;
    }
    return RLOCK_OK;
}

/*
 * Applies the round's outcomes in snapshot order: a renewed hold's lease
 * ends (client clock) a timeout after the round was sent; a gone one is
 * dropped and reported lost, once.
 */
static void settle_round(rlock__engine *e, round_buffers *b, size_t n, int64_t sent_ms) {
    const rlock__renewal *r = b->entries.data;
    const signed char *outcomes = b->outcomes.data;
    int64_t now = rlock__now_ms(), expires_ms = sent_ms + e->settings->watchdog_timeout_ms;
    unsigned long long renewed = 0;
    for (size_t i = 0; i < n; i++) {
        if (outcomes[i] == OUTCOME_RENEWED) {
            rlock__holds_renewed(&e->holds, &r[i], expires_ms);
            renewed++;
        } else if (outcomes[i] == OUTCOME_GONE && rlock__holds_drop_lost(&e->holds, &r[i])) {
            report_lost(e, &r[i], now, RLOCK_ELOST, "the lock's field is gone from Redis");
        }
    }
    rlock__count(&e->events->stats, RLOCK__COUNT_RENEWALS, renewed);
}

/* Most callers want a name per failed renewal; a huge round gets one event. */
#define RENEWAL_EVENTS_MAX 64

static void report_failed_round(rlock__engine *e, const rlock__renewal *r, size_t n, int status) {
    int64_t now = rlock__now_ms();
    const char *detail = rlock__last_message();
    rlock__count(&e->events->stats, RLOCK__COUNT_RENEWAL_FAILURES, n);
    if (n <= RENEWAL_EVENTS_MAX) {
        for (size_t i = 0; i < n; i++)
            if (r[i].expires_ms > now) /* else lost, and the sweep says so now */
                rlock__event_post_owner(e->events, RLOCK_EVENT_RENEWAL_FAILED, r[i].name,
                                        r[i].name_len, r[i].owner, r[i].expires_ms - now, status,
                                        detail);
        return;
    }
    int64_t earliest = r[0].expires_ms;
    for (size_t i = 1; i < n; i++)
        if (r[i].expires_ms < earliest)
            earliest = r[i].expires_ms;
    rlock__event_post(e->events, RLOCK_EVENT_RENEWAL_FAILED, NULL, 0, earliest - now, status, detail);
}

/* The round's deadline: a reply after the first lease ends can save nothing for it. */
static int64_t round_deadline(const rlock__engine *e, const rlock__renewal *r, size_t n) {
    const rlock__settings *s = e->settings;
    int64_t deadline = rlock__deadline_after(
        s->command_timeout_ms + (s->replica_acks > 0 ? s->replica_ack_timeout_ms : 0));
    for (size_t i = 0; i < n; i++)
        if (r[i].expires_ms < deadline)
            deadline = r[i].expires_ms;
    return deadline;
}

/*
 * A RENEW script whose keys a slot migration has split between two nodes
 * (some moved, some not yet) is answered TRYAGAIN until the migration ends:
 * its keys are renewed one by one instead (each follows its own ASK),
 * reusing the script's arguments. So is one of a lock of several keys
 * answered ASK (sent with RLOCK__CMD_NO_ASK: after ASKING the importing node
 * would read its keys still on the source as gone) or TRYAGAIN by its
 * script (one of its keys is elsewhere): alone, with its family, the net
 * moves its keys together first (net.h, rlock__cmd.family). Returns the first failure's status (the
 * entries not renewed are kept in failed), else RLOCK_OK.
 */
static int renew_singly(rlock__engine *e, round_buffers *b, size_t *nfailed,
                        const rlock__cmd *batch_cmd, const rlock__renewal *batch,
                        int64_t deadline_ms) {
    size_t k = (size_t)batch_cmd->nkeys;
    int first_failure = RLOCK_OK;
    for (size_t i = 0; i < k; i++) {
        const char *argv[] = {batch_cmd->argv[i], batch_cmd->argv[k], batch_cmd->argv[k + 1 + i]};
        size_t argvlen[] = {batch_cmd->argvlen[i], batch_cmd->argvlen[k],
                            batch_cmd->argvlen[k + 1 + i]};
        rlock__cmd cmd = *batch_cmd;
        rlock__exec_info info;
        redisReply *reply = NULL;
        char *family = NULL;
        cmd.nkeys = 1;
        cmd.argc = 3;
        cmd.argv = argv;
        cmd.argvlen = argvlen;
        cmd.flags &= ~RLOCK__CMD_NO_ASK;
        if (batch[i].renewer->family != NULL &&
            (family = rlock__malloc(batch[i].name_len + 2)) != NULL) {
            cmd.family = family;
            cmd.family_len = batch[i].renewer->family(batch[i].name, batch[i].name_len, family);
        }
        int status = rlock__exec(e->net, &cmd, deadline_ms, &reply, &info);
        rlock__free(family);
        int acknowledged = info.acks < 0 || info.acks >= e->settings->replica_acks;
        if (status == RLOCK_OK && note_reply(b, reply, &batch[i], 1, acknowledged) != RLOCK_OK)
            status = rlock__fail_reply(reply, "renewal (RENEW script)");
        if (status != RLOCK_OK) {
            memcpy((rlock__renewal *)b->failed.data + (*nfailed)++, &batch[i], sizeof(*batch));
            if (first_failure == RLOCK_OK)
                first_failure = status;
        }
        if (reply != NULL)
            freeReplyObject(reply);
    }
    return first_failure;
}

/* Keeps a batch whose renewal failed, to report it. */
static void keep_failed(round_buffers *b, size_t *nfailed, const rlock__renewal *batch, size_t k) {
    memcpy((rlock__renewal *)b->failed.data + *nfailed, batch, k * sizeof(*batch));
    *nfailed += k;
}

/*
 * Marks a RENEW_NODE batch to be renewed slot by slot: its first key's slot
 * is migrating (ASK: after ASKING the importing node would count the keys
 * of that slot still on the source as gone), or it was answered TRYAGAIN.
 */
static void send_elsewhere(round_buffers *b, const rlock__renewal *batch, size_t k) {
    signed char *outcomes = b->outcomes.data;
    for (size_t i = 0; i < k; i++)
        outcomes[batch[i].index] = OUTCOME_ELSEWHERE;
}

/*
 * Notes each script's reply; a script without one (its node failed) or with
 * an error reply keeps its entries, which are reported as failed.
 */
static int note_pass(rlock__engine *e, round_buffers *b, const rlock__renewal *r, size_t n,
                     int by_node, int ncmds, int status, int64_t deadline_ms, int acks,
                     size_t *nfailed) {
    int acknowledged = acks < 0 || acks >= e->settings->replica_acks;
    const rlock__cmd *cmds = b->cmds.data;
    const size_t *firsts = b->firsts.data;
    redisReply **replies = b->replies.data;
    size_t failed_before = *nfailed;
    for (int i = 0; i < ncmds; i++) {
        const rlock__renewal *batch = r + firsts[i];
        size_t k = by_node ? (size_t)(cmds[i].argc - 1) / 2 : (size_t)cmds[i].nkeys;
        if (replies[i] == NULL) {
            if (status == RLOCK_OK) /* cannot happen: no reply comes with a failure */
                status = rlock__fail(RLOCK_EIO, 0, "renewal: no answer");
            keep_failed(b, nfailed, batch, k);
        } else if (by_node && (rlock__is_tryagain(replies[i]) || rlock__is_redirect(replies[i]))) {
            send_elsewhere(b, batch, k);
        } else if (rlock__is_tryagain(replies[i]) || rlock__is_redirect(replies[i])) {
            int singly = renew_singly(e, b, nfailed, &cmds[i], batch, deadline_ms);
            if (status == RLOCK_OK)
                status = singly;
        } else if (note_reply(b, replies[i], batch, k, acknowledged) != RLOCK_OK) {
            if (status == RLOCK_OK)
                status = rlock__fail_reply(replies[i], "renewal (RENEW script)");
            keep_failed(b, nfailed, batch, k);
        }
    }
    if (!acknowledged) { /* nothing extended: every entry's renewal is in doubt */
        if (status == RLOCK_OK)
            status = rlock__fail(RLOCK_ENOREPL, 0, "renewal: WAIT: %d of %d replicas "
                                                   "acknowledged within %d ms", acks,
                                 e->settings->replica_acks, e->settings->replica_ack_timeout_ms);
        *nfailed = failed_before;
        keep_failed(b, nfailed, r, n);
    }
    return status;
}

/* One pass over r[0..n): its scripts, one pipeline per node, the replies noted. */
static int run_pass(rlock__engine *e, round_buffers *b, const rlock__renewal *r, size_t n,
                    int by_node, const char *lease, size_t lease_len, int64_t deadline_ms,
                    size_t *nfailed) {
    int ncmds = build_pass(e, b, r, n, by_node, lease, lease_len), acks = -1;
    redisReply **replies = b->replies.data;
    memset(replies, 0, (size_t)ncmds * sizeof(*replies)); /* reused: no stale pointers */
    int status = rlock__exec_pipeline(e->net, b->cmds.data, ncmds, deadline_ms, replies, &acks);
    status = note_pass(e, b, r, n, by_node, ncmds, status, deadline_ms, acks, nfailed);
    for (int i = 0; i < ncmds; i++)
        if (replies[i] != NULL)
            freeReplyObject(replies[i]);
    return status;
}

/*
 * One renewal round; RLOCK_OK when every script got its answer. On a
 * Cluster, a first pass renews each node's locks in RENEW_NODE scripts of
 * up to RENEW_BATCH (about as few as on one server); the locks it found
 * served elsewhere (a slot moved or moving) go in a second pass, by slot,
 * where each script follows its redirect.
 */
static int renew_round(rlock__engine *e, round_buffers *b) {
    char lease[24];
    size_t n = 0, nfailed = 0, lease_len = rlock__fmt_i64(lease, e->settings->watchdog_timeout_ms);
    int status = rlock__holds_snapshot(&e->holds, &b->entries, &b->names, &n);
    if (status != RLOCK_OK || n == 0)
        goto out;
    const rlock__renewal *r = rlock__renew_in_script_order(e, b, n);
    if (r == NULL || reserve_round(b, n) != RLOCK_OK) {
        status = RLOCK_ENOMEM;
        goto out;
    }
    int sharded = r[0].slot >= 0;
    int64_t sent_ms = rlock__now_ms(), deadline_ms = round_deadline(e, r, n);
    status = run_pass(e, b, r, n, sharded, lease, lease_len, deadline_ms, &nfailed);
    size_t m = sharded ? rlock__renew_served_elsewhere(b, r, n) : 0;
    if (m > 0) {
        int again = run_pass(e, b, b->again.data, m, 0, lease, lease_len, deadline_ms, &nfailed);
        if (status == RLOCK_OK)
            status = again;
    }
    settle_round(e, b, n, sent_ms);
    if (status != RLOCK_OK && status != RLOCK_ECLOSED)
        report_failed_round(e, b->failed.data, nfailed, status);
out:
    rlock__holds_round_end(&e->holds);
    atomic_fetch_add(&e->watchdog.rounds, 1);
    return status;
}

/*
 * Reports every renewed hold whose lease has run out by the client's clock
 * (no renewal confirmed in time: Redis may be paused or unreachable, and the
 * lock may already belong to someone else). Returns the earliest lease end
 * of the holds left.
 */
static int64_t sweep_expired(rlock__engine *e, round_buffers *b) {
    size_t n = 0;
    int64_t now = rlock__now_ms(), next_expiry;
    rlock__holds_sweep(&e->holds, now, &b->entries, &b->names, &n, &next_expiry);
    const rlock__renewal *r = b->entries.data;
    for (size_t i = 0; i < n; i++)
        report_lost(e, &r[i], now, RLOCK_ELOST,
                    "lease ran out by the client's clock with no renewal confirmed");
    return next_expiry;
}

static void *watchdog_main(void *arg) {
    rlock__engine *e = arg;
    rlock__worker *wd = &e->watchdog.worker;
    round_buffers buffers;
    int64_t interval = e->settings->watchdog_timeout_ms / 3;
    /*
     * After a failed round, try again soon rather than a whole interval later:
     * two missed rounds would otherwise leave the third due just as the lease
     * ends. Six quick tries fit in one interval.
     */
    int64_t retry_after = interval / 6 > 10 ? interval / 6 : 10;

    memset(&buffers, 0, sizeof(buffers));
    pthread_setname_np(pthread_self(), "rlock-watchdog");
    pthread_mutex_lock(&wd->mutex);
    int64_t next_round = rlock__now_ms() + interval;
    while (!wd->stop) {
        pthread_mutex_unlock(&wd->mutex);
        int64_t next_expiry = sweep_expired(e, &buffers);
        pthread_mutex_lock(&wd->mutex);
        int64_t now = rlock__now_ms();
        if (now < next_round && !e->watchdog.renew_now) {
            int64_t until = next_expiry < next_round ? next_expiry : next_round;
            if (until > now)
                rlock__cond_wait_until(&wd->wake, &wd->mutex, until);
            continue;
        }
        e->watchdog.renew_now = 0;
        pthread_mutex_unlock(&wd->mutex);
        int status = renew_round(e, &buffers);
        if (status == RLOCK_OK) /* Redis answers: keep the registration alive, never past a round */
            rlock__registration_refresh(e, now + interval);
        pthread_mutex_lock(&wd->mutex);
        next_round = status == RLOCK_OK ? now + interval : rlock__now_ms() + retry_after;
    }
    pthread_mutex_unlock(&wd->mutex);
    free_buffers(&buffers);
    return NULL;
}

int rlock__watchdog_start(rlock__engine *e, const void *owner_arg) {
    e->watchdog.owner_arg = owner_arg;
    return rlock__worker_start(&e->watchdog.worker, watchdog_main, e);
}

void rlock__watchdog_stop(rlock__engine *e) {
    rlock__worker_stop(&e->watchdog.worker);
    rlock__worker_destroy(&e->watchdog.worker);
}
