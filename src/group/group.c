/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * group.c - one attempt on several locks at once, for one owner: every
 * ACQUIRE is written to its server before any reply is read (the net's
 * fan-out), so n servers cost about one round trip, not n; giving back what
 * such an attempt took, again at once; and setting the TTL of several held
 * locks at once. A Redlock (redlock.c) makes every attempt this way, a
 * multi-lock (multi.c) its first, and its last step for a fixed lease.
 *
 * Only locks of the reentrant kind (Redisson's RLock hash) go out in a
 * fan-out: a member's attempt is the very ACQUIRE of reentrant.c, with the
 * count its owner believes it has, so the scripts' idempotence covers a lost
 * reply as it does for a single lock (acquire.c's steps, rlock__try_*).
 *
 * Threads: application threads, inside the API layer's call guards.
 */
#include <stdio.h>

#include "group.h"

long long rlock__fan_timeout(rlock *const *locks, size_t n) {
    long long ms = locks[0]->engine->settings->command_timeout_ms;
    for (size_t i = 1; i < n; i++)
        if (locks[i]->engine->settings->command_timeout_ms < ms)
            ms = locks[i]->engine->settings->command_timeout_ms;
    return ms;
}

int rlock__is_refusal(int status) {
    return status != RLOCK_OK && status != RLOCK_BUSY && status != RLOCK_ELOST &&
           status != RLOCK_EIO && status != RLOCK_ECLOSED && status != RLOCK_ENOMEM;
}

/* What one ACQUIRE reply says: RLOCK_OK / RLOCK_ENOREPL with *answer, or a failure. */
static int read_answer(rlock *lock, int status, const redisReply *reply,
                       rlock__attempt *answer) {
    char at[RLOCK__WHERE_MAX], what[RLOCK__WHERE_MAX + 240];
    if (status != RLOCK_OK && status != RLOCK_ENOREPL)
        return status; /* EIO (unknown whether it ran), ECLOSED */
    if (reply->type == REDIS_REPLY_ERROR && rlock__is_redirect_or_retry(reply))
        return rlock__fail(RLOCK_EIO, 0, "lock '%.200s': ACQUIRE not run: %.200s", lock->name,
                           reply->str); /* "try again": nothing ran, nothing to undo */
    if (reply->type == REDIS_REPLY_ERROR) {
        /* Named with its server: the members of a fan-out are on several. */
        snprintf(what, sizeof(what), "lock '%.200s': ACQUIRE at %s", lock->name,
                 rlock__net_server(lock->engine->net, lock->name, lock->name_len, at,
                                   sizeof(at)));
        return rlock__fail_reply(reply, what);
    }
    if (rlock__read_attempt(reply, answer) != RLOCK_OK)
        return rlock__fail(RLOCK_EREDIS, 0, "lock '%.200s': ACQUIRE answered an unexpected "
                                            "reply", lock->name);
    return status;
}

/* The arrays one fan-out needs: one allocation. */
typedef struct fan {
    rlock__lock_cmd *cmds;
    rlock__cmd *plain;
    rlock__net **nets;
    redisReply **replies;
    size_t *member;             /* which member each command is for */
    int *statuses;
    int k;                      /* commands */
} fan;

static void fan_free(fan *f) {
    for (int j = 0; f->replies != NULL && j < f->k; j++)
        if (f->replies[j] != NULL)
            freeReplyObject(f->replies[j]);
    rlock__free(f->cmds);
    *f = (fan){.k = 0};
}

static int fan_alloc(fan *f, size_t n) {
    size_t each = sizeof(*f->cmds) + sizeof(*f->plain) + sizeof(*f->nets) +
                  sizeof(*f->replies) + sizeof(*f->member) + sizeof(*f->statuses);
    *f = (fan){.cmds = rlock__malloc(n * each)};
    if (f->cmds == NULL)
        return RLOCK_ENOMEM;
    f->plain = (rlock__cmd *)(f->cmds + n);
    f->nets = (rlock__net **)(f->plain + n);
    f->replies = (redisReply **)(f->nets + n);
    f->member = (size_t *)(f->replies + n);
    f->statuses = (int *)(f->member + n);
    return RLOCK_OK;
}

/* Adds f->cmds[f->k] (filled by the caller) for member i, on lock's net. */
static void fan_add(fan *f, const rlock *lock, size_t i) {
    f->plain[f->k] = f->cmds[f->k].cmd;
    f->nets[f->k] = lock->engine->net;
    f->member[f->k] = i;
    f->k++;
}

static int fan_run(fan *f, int64_t deadline_ms, const rlock__fan_enough *enough) {
    return rlock__exec_fanout(f->nets, f->plain, f->k, deadline_ms, f->replies, f->statuses,
                              enough);
}

/* Counts the ACQUIREs answered "held" as they arrive: enough at `need`. */
typedef struct held_count {
    size_t held, need;
} held_count;

static int held_enough(void *arg, int i, int status, const redisReply *reply) {
    held_count *c = arg;
    rlock__attempt answer;
    (void)i;
    if (status == RLOCK_OK && reply->type != REDIS_REPLY_ERROR &&
        rlock__read_attempt(reply, &answer) == RLOCK_OK &&
        answer.outcome == RLOCK__ATTEMPT_HELD)
        c->held++;
    return c->held >= c->need;
}

int rlock__fan_acquire(rlock__fanned *m, size_t n, const rlock__owner *owner, long long lease_ms,
                       size_t need, int64_t deadline_ms, rlock__error_detail *first_refusal) {
    held_count counted = {.held = 0, .need = need};
    rlock__fan_enough enough = {.enough = held_enough, .arg = &counted};
    fan f;
    int status = fan_alloc(&f, n);
    int64_t sent_ms = rlock__now_ms();
    if (first_refusal != NULL)
        first_refusal->status = RLOCK_OK;
    for (size_t i = 0; i < n; i++) {
        rlock *lock = m[i].lock;
        m[i].answer = (rlock__attempt){.outcome = RLOCK__ATTEMPT_NONE, .value = -1};
        m[i].status = rlock__try_begin(lock, owner, &m[i].t);
        if (status != RLOCK_OK && m[i].status == RLOCK_OK)
            m[i].status = status; /* no room for the fan-out: nothing is sent */
        if (m[i].status != RLOCK_OK)
            continue;
        m[i].t.sent_ms = sent_ms;
        rlock__acquire_cmd(&f.cmds[f.k], lock, owner->id, rlock__lease_ttl(lock, lease_ms),
                           m[i].t.expected);
        fan_add(&f, lock, i);
    }
    if (status != RLOCK_OK)
        return status;
    status = fan_run(&f, deadline_ms, need > 0 ? &enough : NULL);
    for (int j = 0; j < f.k; j++) {
        rlock__fanned *x = &m[f.member[j]];
        x->status = status != RLOCK_OK
                        ? status
                        : read_answer(x->lock, f.statuses[j], f.replies[j], &x->answer);
        /* A stale count (rare) is settled here with attempts of its own. */
        x->status = rlock__try_settle(x->lock, owner, lease_ms, 0, deadline_ms, &x->t, x->status,
                                      &x->answer);
        if (first_refusal != NULL && first_refusal->status == RLOCK_OK &&
            rlock__is_refusal(x->status))
            rlock__error_save(first_refusal); /* its detail, before the next member's */
    }
    fan_free(&f);
    return status;
}

void rlock__fan_keep(rlock__fanned *m, size_t n, const rlock__owner *owner, long long lease_ms,
                     int64_t wait_start_us) {
    for (size_t i = 0; i < n; i++) {
        if (m[i].status == RLOCK_OK)
            rlock__try_record(m[i].lock, owner, lease_ms, &m[i].t, m[i].answer.value, 0);
        else if (m[i].status == RLOCK_EIO)
            rlock__try_record(m[i].lock, owner, lease_ms, &m[i].t, m[i].t.expected + 1, 1);
        /* a hold booked unsure counts too: its unlock does, whatever Redis then says */
        if (m[i].status == RLOCK_OK || m[i].status == RLOCK_EIO)
            rlock__count_acquired(m[i].lock, wait_start_us, 0);
        rlock__try_end(&m[i].t);
    }
}

void rlock__fan_undo(rlock__fanned *m, size_t n, const rlock__owner *owner, int64_t deadline_ms) {
    fan f;
    rlock__error_detail saved;
    rlock__error_save(&saved); /* best effort: the caller's error stands */
    int status = fan_alloc(&f, n);
    for (size_t i = 0; i < n && status == RLOCK_OK; i++) {
        rlock__fanned *x = &m[i];
        /* Held: its count; unknown: it may have taken one more than it had. */
        if (x->status != RLOCK_OK && x->status != RLOCK_EIO)
            continue;
        rlock__release_cmd(&f.cmds[f.k], x->lock, owner->id,
                           x->status == RLOCK_OK ? x->answer.value : x->t.expected + 1);
        fan_add(&f, x->lock, i);
    }
    if (status == RLOCK_OK && f.k > 0)
        fan_run(&f, deadline_ms, NULL); /* a release that fails leaves a hold its lease ends */
    fan_free(&f);
    for (size_t i = 0; i < n; i++)
        rlock__try_end(&m[i].t);
    rlock__error_restore(&saved);
}

/* RENEW's answer for its one key: RLOCK_OK (set), RLOCK_ELOST (owner's field is gone). */
static int read_relet(const redisReply *reply, void *arg) {
    const rlock *lock = arg;
    if (reply->type == REDIS_REPLY_ERROR)
        return rlock__fail_reply(reply, "RENEW");
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER)
        return rlock__fail(RLOCK_EREDIS, 0, "lock '%.200s': RENEW answered an unexpected reply",
                           lock->name);
    if (reply->element[0]->integer != 1)
        return rlock__fail(RLOCK_ELOST, 0, "lock '%.200s': its hold was gone before its lease "
                                           "could be set", lock->name);
    return RLOCK_OK;
}

int rlock__fan_relet(rlock *const *locks, size_t n, const rlock__owner *owner,
                     long long lease_ms, int64_t deadline_ms) {
    fan f;
    int status = fan_alloc(&f, n);
    int64_t sent_ms = rlock__now_ms();
    for (size_t i = 0; i < n && status == RLOCK_OK; i++) {
        rlock__renew_cmd(&f.cmds[f.k], locks[i], owner->id, lease_ms);
        fan_add(&f, locks[i], i);
    }
    if (status == RLOCK_OK)
        status = fan_run(&f, deadline_ms, NULL);
    for (int j = 0; j < f.k && status == RLOCK_OK; j++) {
        rlock *lock = locks[f.member[j]];
        int64_t set_ms = sent_ms;
        int one = f.statuses[j] == RLOCK_OK ? read_relet(f.replies[j], lock) : f.statuses[j];
        if (one == RLOCK_EIO || one == RLOCK_ENOREPL) { /* again alone, with exec's retries */
            set_ms = rlock__now_ms();
            one = rlock__exec_read(lock->engine->net, &f.plain[j], deadline_ms, NULL, read_relet,
                                   lock);
        }
        rlock__hold_key key = rlock__hold_of(lock, owner);
        if (one == RLOCK_OK)
            rlock__holds_relet(&lock->engine->holds, &key, set_ms, lease_ms);
        status = one;
    }
    fan_free(&f);
    return status;
}
