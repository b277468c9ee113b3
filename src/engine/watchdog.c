/*
 * watchdog.c - the renewal thread: one per client.
 *
 * Every watchdog_timeout/3 it snapshots the renewed entries of the holds
 * table and resets their TTL to watchdog_timeout in one pipelined round trip
 * per node (RENEW scripts of up to RENEW_BATCH keys each). On a Cluster the
 * names are sorted by slot and no script spans two slots (a script's keys
 * must share one); the net sends each node its part at once, and re-runs
 * alone a script that was redirected (a slot moved); a script answered
 * TRYAGAIN (its keys split by a migration) is renewed key by key. A node
 * that fails fails only its own entries. The script only extends a field
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
#include <string.h>

#include "engine.h"

#define RENEW_BATCH 500

/*
 * Scratch memory of the renewal rounds, owned by the watchdog thread and
 * reused from round to round (100k locks would otherwise cost megabytes of
 * fresh, page-faulting memory every round).
 */
typedef struct round_buffers {
    rlock__buf entries;  /* rlock__renewal[n], the snapshot (the holds table's order) */
    rlock__buf sorted;   /* on a Cluster: the same in slot order */
    rlock__buf counts;   /* on a Cluster: size_t per slot, for the counting sort */
    rlock__buf outcomes; /* signed char[n] by snapshot place: what the round found */
    rlock__buf names;    /* the snapshot's names */
    rlock__buf owners;   /* one "<uuid>:<tid>" per distinct owning thread */
    rlock__buf argv;     /* per batch: k names, lease, k owners */
    rlock__buf argvlen;
    rlock__buf cmds;
    rlock__buf firsts;   /* per command: the index of its first entry */
    rlock__buf replies;
    rlock__buf failed;   /* rlock__renewal[]: the entries whose renewal failed */
} round_buffers;

static void free_buffers(round_buffers *b) {
    rlock__buf_free(&b->entries);
    rlock__buf_free(&b->sorted);
    rlock__buf_free(&b->counts);
    rlock__buf_free(&b->outcomes);
    rlock__buf_free(&b->names);
    rlock__buf_free(&b->owners);
    rlock__buf_free(&b->argv);
    rlock__buf_free(&b->argvlen);
    rlock__buf_free(&b->cmds);
    rlock__buf_free(&b->firsts);
    rlock__buf_free(&b->replies);
    rlock__buf_free(&b->failed);
}

/* What a round found of an entry (round_buffers.outcomes). */
enum { OUTCOME_NONE, OUTCOME_RENEWED, OUTCOME_GONE };

/* Most locks are held by few owners: format each owner field once per round. */
#define OWNER_CACHE 64

typedef struct owner_cache {
    uint64_t owner[OWNER_CACHE];
    const char *str[OWNER_CACHE];
    size_t len[OWNER_CACHE];
    size_t used;                /* owner strings written to the owners buffer */
} owner_cache;

static const char *owner_of(const rlock__renewer *rn, owner_cache *oc, char *owners,
                            uint64_t owner, size_t *len) {
    size_t slot = owner % OWNER_CACHE;
    if (oc->owner[slot] != owner || oc->str[slot] == NULL) {
        char *field = owners + oc->used++ * RLOCK__OWNER_MAX;
        oc->owner[slot] = owner;
        oc->str[slot] = field;
        oc->len[slot] = rn->owner_field(rn->arg, owner, field);
    }
    *len = oc->len[slot];
    return oc->str[slot];
}

/*
 * The entries in the order the scripts take them: on a Cluster by slot (a
 * counting sort into b->sorted: O(n) and stable), elsewhere the snapshot
 * itself. Each keeps its place in the snapshot, so that the replies are
 * applied in the holds table's own order (settle_round), which keeps its
 * lookups in cache; applied in slot order they cost more than the sort.
 */
static rlock__renewal *in_script_order(const rlock__engine *e, round_buffers *b, size_t n) {
    rlock__renewal *r = b->entries.data;
    for (size_t i = 0; i < n; i++) {
        r[i].index = i;
        r[i].slot = rlock__net_slot_of(e->net, r[i].name, r[i].name_len);
    }
    if (n == 0 || r[0].slot < 0)
        return r;
    if (rlock__buf_reserve(&b->sorted, n * sizeof(*r)) != RLOCK_OK ||
        rlock__buf_reserve(&b->counts, (RLOCK__CLUSTER_SLOTS + 1) * sizeof(size_t)) != RLOCK_OK)
        return NULL;
    size_t *start = b->counts.data;
    rlock__renewal *sorted = b->sorted.data;
    memset(start, 0, (RLOCK__CLUSTER_SLOTS + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        start[r[i].slot + 1]++;
    for (int slot = 0; slot < RLOCK__CLUSTER_SLOTS; slot++)
        start[slot + 1] += start[slot];
    for (size_t i = 0; i < n; i++)
        sorted[start[r[i].slot]++] = r[i];
    return sorted;
}

/* The number of entries from first on that one script renews: same slot, <= RENEW_BATCH. */
static size_t batch_size(const rlock__renewal *r, size_t first, size_t n) {
    size_t k = 1;
    while (first + k < n && k < RENEW_BATCH && r[first + k].slot == r[first].slot)
        k++;
    return k;
}

static int reserve_round(round_buffers *b, size_t n) {
    size_t nargs = 3 * n; /* at most 2 per entry + 1 per command, one command per entry */
    if (rlock__buf_reserve(&b->outcomes, n) != RLOCK_OK ||
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

/* Builds the round's RENEW commands over r (script order); returns how many, or < 0 on ENOMEM. */
static int build_round(const rlock__renewer *rn, round_buffers *b, const rlock__renewal *r,
                       size_t n, const char *lease, size_t lease_len) {
    owner_cache oc;
    if (reserve_round(b, n) != RLOCK_OK)
        return RLOCK_ENOMEM;
    memset(&oc, 0, sizeof(oc));
    const char **argv = b->argv.data;
    size_t *argvlen = b->argvlen.data, *firsts = b->firsts.data;
    rlock__cmd *cmds = b->cmds.data;
    int ncmds = 0;
    for (size_t first = 0, k; first < n; first += k) {
        k = batch_size(r, first, n);
        firsts[ncmds] = first;
        rlock__cmd *cmd = &cmds[ncmds++];
        cmd->script = rn->script;
        cmd->flags = RLOCK__CMD_WRITE;
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
        for (size_t i = 0; i < k; i++)
            argv[k + 1 + i] = owner_of(rn, &oc, b->owners.data, r[first + i].owner,
                                       &argvlen[k + 1 + i]);
        argv += cmd->argc;
        argvlen += cmd->argc;
    }
    return ncmds;
}

static void report_lost(rlock__engine *e, const rlock__renewal *r, int64_t now_ms, int status,
                        const char *detail) {
    rlock__event_post(e->events, RLOCK_EVENT_LOCK_LOST, r->name, r->name_len, r->expires_ms - now_ms,
                      status, detail);
}

/*
 * Notes what one batch's reply says of each entry (by its snapshot place):
 * 1 renewed -- if the replicas acknowledged it, when replica_acks asks for
 * that (else a failover could undo it); 0 gone. An error reply keeps the
 * entries (RLOCK_EREDIS: try again soon).
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
        if (answer->integer != 1)
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
    for (size_t i = 0; i < n; i++) {
        if (outcomes[i] == OUTCOME_RENEWED)
            rlock__holds_renewed(&e->holds, &r[i], expires_ms);
        else if (outcomes[i] == OUTCOME_GONE && rlock__holds_drop_lost(&e->holds, &r[i]))
            report_lost(e, &r[i], now, RLOCK_ELOST, "the lock's field is gone from Redis");
    }
}

/* Most callers want a name per failed renewal; a huge round gets one event. */
#define RENEWAL_EVENTS_MAX 64

static void report_failed_round(rlock__engine *e, const rlock__renewal *r, size_t n, int status) {
    int64_t now = rlock__now_ms();
    const char *detail = rlock__last_message();
    if (n <= RENEWAL_EVENTS_MAX) {
        for (size_t i = 0; i < n; i++)
            if (r[i].expires_ms > now) /* else lost, and the sweep says so now */
                rlock__event_post(e->events, RLOCK_EVENT_RENEWAL_FAILED, r[i].name, r[i].name_len,
                                  r[i].expires_ms - now, status, detail);
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
 * A script whose keys a slot migration has split between two nodes (some
 * moved, some not yet) is answered TRYAGAIN until the migration ends: its
 * keys are renewed one by one instead (each follows its own ASK), reusing
 * the script's arguments. Returns the first failure's status (the entries
 * not renewed are kept in failed), else RLOCK_OK.
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
        cmd.nkeys = 1;
        cmd.argc = 3;
        cmd.argv = argv;
        cmd.argvlen = argvlen;
        int status = rlock__exec(e->net, &cmd, deadline_ms, &reply, &info);
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
 * Applies each command's reply; a command without one (its node failed) or
 * with an error reply keeps its entries, which are reported as failed.
 */
static int apply_round(rlock__engine *e, round_buffers *b, const rlock__renewal *r, int ncmds,
                       size_t n, int status, int64_t sent_ms, int64_t deadline_ms, int acks) {
    int acknowledged = acks < 0 || acks >= e->settings->replica_acks;
    const rlock__cmd *cmds = b->cmds.data;
    const size_t *firsts = b->firsts.data;
    redisReply **replies = b->replies.data;
    size_t nfailed = 0;
    for (int i = 0; i < ncmds; i++) {
        const rlock__renewal *batch = r + firsts[i];
        size_t k = (size_t)cmds[i].nkeys;
        if (replies[i] == NULL) {
            if (status == RLOCK_OK) /* cannot happen: no reply comes with a failure */
                status = rlock__fail(RLOCK_EIO, 0, "renewal: no answer");
            keep_failed(b, &nfailed, batch, k);
        } else if (rlock__is_tryagain(replies[i])) {
            int singly = renew_singly(e, b, &nfailed, &cmds[i], batch, deadline_ms);
            if (status == RLOCK_OK)
                status = singly;
        } else if (note_reply(b, replies[i], batch, k, acknowledged) != RLOCK_OK) {
            if (status == RLOCK_OK)
                status = rlock__fail_reply(replies[i], "renewal (RENEW script)");
            keep_failed(b, &nfailed, batch, k);
        }
    }
    settle_round(e, b, n, sent_ms);
    if (!acknowledged) { /* nothing extended: every entry's renewal is in doubt */
        if (status == RLOCK_OK)
            status = rlock__fail(RLOCK_ENOREPL, 0, "renewal: WAIT: %d of %d replicas "
                                                   "acknowledged within %d ms", acks,
                                 e->settings->replica_acks, e->settings->replica_ack_timeout_ms);
        memcpy(b->failed.data, r, n * sizeof(*r));
        nfailed = n;
    }
    if (status != RLOCK_OK && status != RLOCK_ECLOSED)
        report_failed_round(e, b->failed.data, nfailed, status);
    return status;
}

/* One renewal round; RLOCK_OK when every batch got its answer. */
static int renew_round(rlock__engine *e, round_buffers *b) {
    char lease[24];
    size_t n = 0, lease_len = rlock__fmt_i64(lease, e->settings->watchdog_timeout_ms);

    int status = rlock__holds_snapshot(&e->holds, &b->entries, &b->names, &n);
    if (status != RLOCK_OK || n == 0)
        goto out;
    const rlock__renewal *r = in_script_order(e, b, n);
    int ncmds = r == NULL ? RLOCK_ENOMEM : build_round(&e->watchdog.renewer, b, r, n, lease, lease_len);
    if (ncmds < 0) {
        status = ncmds;
        goto out;
    }
    redisReply **replies = b->replies.data;
    memset(replies, 0, (size_t)ncmds * sizeof(*replies)); /* reused: no stale pointers */
    int64_t sent_ms = rlock__now_ms();
    int acks = -1;
    int64_t deadline_ms = round_deadline(e, r, n);
    status = rlock__exec_pipeline(e->net, b->cmds.data, ncmds, deadline_ms, replies, &acks);
    status = apply_round(e, b, r, ncmds, n, status, sent_ms, deadline_ms, acks);
    for (int i = 0; i < ncmds; i++)
        if (replies[i] != NULL)
            freeReplyObject(replies[i]);
out:
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
        pthread_mutex_lock(&wd->mutex);
        next_round = status == RLOCK_OK ? now + interval : rlock__now_ms() + retry_after;
    }
    pthread_mutex_unlock(&wd->mutex);
    free_buffers(&buffers);
    return NULL;
}

int rlock__watchdog_start(rlock__engine *e, const rlock__renewer *renewer) {
    e->watchdog.renewer = *renewer;
    return rlock__worker_start(&e->watchdog.worker, watchdog_main, e);
}

void rlock__watchdog_stop(rlock__engine *e) {
    rlock__worker_stop(&e->watchdog.worker);
    rlock__worker_destroy(&e->watchdog.worker);
}
