/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reentrant.c - the reentrant lock (Redisson's RLock): the wire side of
 * each operation of the kind table -- which script with which arguments,
 * and what its answer means. The Lua is in lua/ (acquire.lua, release.lua,
 * transfer.lua, renew*.lua, force_unlock.lua); the generic logic around
 * these (waiting, re-basing, telling losses) in acquire.c and release.c.
 *
 *   lock key   <name>  HASH  "<client uuid>:<owner>" -> hold count; PEXPIRE = lease
 *   channel    redisson_lock__channel:{<name>}   "0" published when freed
 *   counter    redisson_lock_token:{<name>}      fenced lock only: INCR per acquisition
 *
 * The fenced lock (Redisson's RedissonFencedLock) is this kind plus the
 * counter: the same functions, which pass lock->keys.token_key to ACQUIRE and
 * TRANSFER when it is set and read the token they answer.
 *
 * Threads: application threads; send_ahead on the subscriber thread (with
 * the waiters' mutex held: it only writes on an idle connection).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ACQUIRE's answers: {1, count}, {0, pttl} or {2, true count}; fenced: {1, count, token}. */
enum { ACQUIRE_BUSY = 0, ACQUIRE_HELD = 1, ACQUIRE_STALE = 2 };

int rlock__read_attempt(const redisReply *reply, void *arg) {
    rlock__attempt *answer = arg;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || reply->elements > 3 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER)
        return RLOCK_EREDIS;
    answer->token = 0;
    if (reply->elements == 3 && rlock__read_token(reply->element[2], &answer->token) != RLOCK_OK)
        return RLOCK_EREDIS;
    switch (reply->element[0]->integer) {
    case ACQUIRE_BUSY: answer->outcome = RLOCK__ATTEMPT_BUSY; break;
    case ACQUIRE_HELD: answer->outcome = RLOCK__ATTEMPT_HELD; break;
    case ACQUIRE_STALE: answer->outcome = RLOCK__ATTEMPT_STALE; break;
    default: return RLOCK_EREDIS;
    }
    answer->value = reply->element[1]->integer;
    return RLOCK_OK;
}

/* The keys of ACQUIRE and TRANSFER: the name, and a fenced lock's counter. */
static int lock_keys(const rlock *lock, const char **argv, size_t *argvlen) {
    argv[0] = lock->name;
    argvlen[0] = lock->name_len;
    if (lock->keys.token_key == NULL)
        return 1;
    argv[1] = lock->keys.token_key;
    argvlen[1] = lock->keys.token_key_len;
    return 2;
}

/* The arguments ACQUIRE starts with after its k keys: the lease, the owner field. */
static void lease_owner(rlock__lock_cmd *a, int k, const rlock *lock, uint64_t owner,
                        long long lease_ms) {
    a->argv[k] = a->number[0];
    a->argvlen[k] = rlock__fmt_i64(a->number[0], lease_ms);
    a->argv[k + 1] = a->owner;
    a->argvlen[k + 1] = rlock__owner_field(lock->client_id, owner, a->owner);
}

void rlock__renew_cmd(rlock__lock_cmd *a, const rlock *lock, uint64_t owner,
                      long long lease_ms) {
    const rlock__renewer *rn = lock->kind->renewer; /* its script, its kind's field */
    a->argv[0] = lock->name;
    a->argvlen[0] = lock->name_len;
    a->argv[1] = a->number[0];
    a->argvlen[1] = rlock__fmt_i64(a->number[0], lease_ms);
    a->argv[2] = a->owner;
    a->argvlen[2] = rn->owner_field(lock->client_id, owner, a->owner);
    a->cmd = (rlock__cmd){.script = rn->script, .flags = RLOCK__CMD_WRITE, .argc = 3, .nkeys = 1,
                          .argv = a->argv, .argvlen = a->argvlen,
                          .family = lock->keys.family, .family_len = lock->keys.family_len};
}

void rlock__acquire_cmd(rlock__lock_cmd *a, const rlock *lock, uint64_t owner,
                        long long lease_ms, long long expected) {
    int k = lock_keys(lock, a->argv, a->argvlen);
    lease_owner(a, k, lock, owner, lease_ms);
    a->argv[k + 2] = a->number[1];
    a->argvlen[k + 2] = rlock__fmt_i64(a->number[1], expected);
    a->argv[k + 3] = lock->channel; /* what the release will need, asked first */
    a->argvlen[k + 3] = lock->channel_len;
    a->argv[k + 4] = lock->publish_verb;
    a->argvlen[k + 4] = strlen(lock->publish_verb);
    a->cmd = (rlock__cmd){.script = RLOCK__SCRIPT_ACQUIRE, .flags = RLOCK__CMD_WRITE,
                          .argc = k + 5, .nkeys = k, .argv = a->argv, .argvlen = a->argvlen,
                          .family = lock->keys.family, .family_len = lock->keys.family_len};
}

static int attempt(const rlock *lock, const rlock__owner *owner, long long lease_ms,
                   long long expected, long long wait_ms, int64_t deadline_ms,
                   rlock__attempt *answer) {
    rlock__lock_cmd a;
    (void)wait_ms; /* no queue: every waiter tries alike */
    rlock__exec_info info = {0};
    rlock__acquire_cmd(&a, lock, owner->id, lease_ms, expected);
    answer->outcome = RLOCK__ATTEMPT_NONE;
    int status = rlock__exec_read(lock->engine->net, &a.cmd, deadline_ms, &info,
                                  rlock__read_attempt, answer);
    answer->sent_ms = info.sent_ms; /* the lease runs from the send Redis answered */
    return status;
}

/*
 * Sends a sleeping waiter's ACQUIRE ahead of its wake-up (the subscriber
 * thread, on an unlock message), with the same expected count the waiter's
 * own attempt would send, so that attempt is a safe re-send of this one.
 */
static rlock__conn *send_ahead(const rlock__waiter *w) {
    const rlock *lock = w->lock;
    rlock__lock_cmd a;
    rlock__acquire_cmd(&a, lock, w->owner.id, rlock__lease_ttl(lock, w->lease_ms),
                       rlock__waiter_expected(w));
    return rlock__send_ahead(lock->engine->net, &a.cmd);
}

int rlock__hash_read_ahead(const rlock *lock, rlock__conn *ahead, rlock__attempt *answer) {
    redisReply *reply = NULL;
    int64_t deadline_ms = rlock__deadline_after(lock->engine->settings->command_timeout_ms);
    int status = rlock__read_ahead(ahead, deadline_ms, &reply);
    if (status == RLOCK_OK && reply->type == REDIS_REPLY_ERROR)
        status = RLOCK_EREDIS; /* NOSCRIPT and the like: an ordinary attempt follows */
    if (status == RLOCK_OK)
        status = rlock__read_attempt(reply, answer);
    if (status == RLOCK_OK && answer->outcome == RLOCK__ATTEMPT_STALE)
        status = RLOCK_EREDIS;
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}

/* A stale expected count is re-based at most this often in one release. */
#define MAX_REBASES 3

int rlock__read_release(const redisReply *reply, void *arg) {
    rlock__release_answer *r = arg;
    r->read = 1;
    r->stale = r->gone = 0;
    if (reply->type == REDIS_REPLY_INTEGER) {
        r->count = reply->integer;
    } else if (reply->type == REDIS_REPLY_NIL) {
        r->gone = 1;
    } else if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
               reply->element[0]->type == REDIS_REPLY_INTEGER) {
        r->stale = 1;
        r->count = reply->element[0]->integer;
    } else {
        return rlock__fail_reply(reply, "RELEASE");
    }
    return RLOCK_OK;
}

void rlock__release_cmd(rlock__lock_cmd *a, const rlock *lock, uint64_t owner,
                        long long expected) {
    const char *publish = lock->publish_verb;
    a->argv[0] = lock->name;
    a->argvlen[0] = lock->name_len;
    a->argv[1] = a->owner;
    a->argvlen[1] = lock->kind->renewer->owner_field(lock->client_id, owner, a->owner);
    a->argv[2] = a->number[0];
    a->argvlen[2] = rlock__fmt_i64(a->number[0], expected);
    a->argv[3] = lock->channel;
    a->argvlen[3] = lock->channel_len;
    a->argv[4] = publish;
    a->argvlen[4] = strlen(publish);
    a->cmd = (rlock__cmd){.script = RLOCK__SCRIPT_RELEASE, .flags = RLOCK__CMD_WRITE, .argc = 5,
                          .nkeys = 1, .argv = a->argv, .argvlen = a->argvlen,
                          .family = lock->keys.family, .family_len = lock->keys.family_len};
}

/*
 * script (RELEASE, or another with its arguments and answers), or for a
 * fair lock (lock->keys.queue set)
 * FAIR_RELEASE: RELEASE's arguments plus its queue keys and the wall clock
 * (lua/fair_release.lua), the same answers.
 */
static int send_release(const rlock *lock, int script, const rlock__owner *owner,
                        long long expected, int64_t deadline_ms, rlock__exec_info *info,
                        rlock__release_answer *answer) {
    rlock__lock_cmd plain;
    char now[24];
    rlock__release_cmd(&plain, lock, owner->id, expected);
    plain.cmd.script = script;
    const char *fair[] = {lock->name, lock->keys.queue, lock->keys.timeouts, plain.argv[1], plain.argv[2],
                          lock->channel, plain.argv[4], now};
    size_t fair_len[] = {lock->name_len, lock->keys.queue_len, lock->keys.timeouts_len, plain.argvlen[1],
                         plain.argvlen[2], lock->channel_len, plain.argvlen[4], 0};
    rlock__cmd cmd = plain.cmd;
    if (lock->keys.queue != NULL) {
        fair_len[7] = rlock__fmt_i64(now, rlock__wall_ms());
        cmd = (rlock__cmd){.script = RLOCK__SCRIPT_FAIR_RELEASE, .flags = RLOCK__CMD_WRITE,
                           .argc = 8, .nkeys = 3, .argv = fair, .argvlen = fair_len,
                           .family = lock->keys.family, .family_len = lock->keys.family_len};
    }
    answer->read = 0;
    return rlock__exec_read(lock->engine->net, &cmd, deadline_ms, info, rlock__read_release,
                            answer);
}

/*
 * A fair lock's unlock message goes to the head of its queue only, on
 * "<channel>:<head's field>" (lua/fair_release.lua): the head is read (LINDEX, where
 * the queue is now) and told again. Best effort.
 */
static void republish_to_head(const rlock *lock, const char *message, int64_t deadline_ms) {
    const char *argv[] = {"LINDEX", lock->keys.queue, "0"};
    size_t argvlen[] = {6, lock->keys.queue_len, 1};
    rlock__cmd cmd = {.script = -1, .argc = 3, .argv = argv, .argvlen = argvlen};
    redisReply *head = NULL;
    if (rlock__exec(lock->engine->net, &cmd, deadline_ms, &head, NULL) == RLOCK_OK &&
        head->type == REDIS_REPLY_STRING) {
        size_t len = lock->channel_len + 1 + head->len;
        char *channel = rlock__malloc(len + 1);
        if (channel != NULL) {
            memcpy(channel, lock->channel, lock->channel_len);
            channel[lock->channel_len] = ':';
            memcpy(channel + lock->channel_len + 1, head->str, head->len);
            channel[len] = '\0';
            rlock__net_publish(lock->engine->net, lock->publish_verb, channel, len, message,
                               deadline_ms);
            rlock__free(channel);
        }
    }
    if (head != NULL)
        freeReplyObject(head);
}

/*
 * An unlock that ran at a node importing the lock's slot (after ASKING)
 * published there, where no sharded subscriber listens until the migration
 * ends: publish once more at the slot's owner (a fair lock's: to its head).
 * Best effort (the waiters'
 * sleeps are bounded by the TTL); the unlock's own outcome stands.
 */
void rlock__republish_if_asked(const rlock *lock, const rlock__exec_info *info,
                               const char *message, int64_t deadline_ms) {
    if (!info->asked || !rlock__net_sharded(lock->engine->net))
        return;
    rlock__error_detail saved;
    rlock__error_save(&saved);
    if (lock->keys.queue != NULL)
        republish_to_head(lock, message, deadline_ms);
    else
        rlock__net_publish(lock->engine->net, lock->publish_verb, lock->channel,
                           lock->channel_len, message, deadline_ms);
    rlock__error_restore(&saved);
}

int rlock__hash_release(const rlock *lock, const rlock__owner *owner, long long expected,
                        int64_t deadline_ms, rlock__released *out) {
    return rlock__hash_release_with(lock, RLOCK__SCRIPT_RELEASE, "0", owner, expected, deadline_ms,
                                    out);
}

int rlock__hash_release_with(const rlock *lock, int script, const char *message,
                             const rlock__owner *owner, long long expected, int64_t deadline_ms,
                             rlock__released *out) {
    rlock__release_answer answer = {.stale = 1};
    rlock__exec_info info = {0};
    int resent = 0, status = RLOCK_EREDIS;
    *out = (rlock__released){.remaining = -2};
    for (int i = 0; i < MAX_REBASES && answer.stale; i++) {
        status = send_release(lock, script, owner, expected, deadline_ms, &info, &answer);
        resent |= info.resent;
        if ((status != RLOCK_OK && status != RLOCK_ENOREPL) || !answer.read)
            break; /* refused (NOREPLICAS too): Redis is unchanged */
        if (answer.stale)
            expected = answer.count;
    }
    /* ENOREPL with an answer: applied on the master, not acknowledged: book it as applied. */
    if (status == RLOCK_EIO) {
        out->remaining = RLOCK__RELEASE_UNKNOWN; /* the entry stays, marked unsure */
    } else if ((status != RLOCK_OK && status != RLOCK_ENOREPL) || !answer.read) {
        /* Refused (an error reply): Redis is unchanged, the hold stays as it was. */
    } else if (answer.stale) {
        status = rlock__fail(RLOCK_EREDIS, 0, "lock '%.200s': RELEASE kept finding a stale count",
                             lock->name);
    } else if (answer.gone) {
        /* Gone: lost, or (on a re-send of our last hold) released by the first send. */
        out->remaining = 0;
        out->gone = !(resent && expected == 1);
    } else {
        out->remaining = answer.count;
        if (answer.count == 0)
            rlock__republish_if_asked(lock, &info, message, deadline_ms);
    }
    return status;
}

/* TRANSFER's answers: 1 or (fenced) {1, token} moved, 0 not ours. */
static int read_transfer(const redisReply *reply, void *arg) {
    rlock__released *out = arg;
    int fenced = reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
                 reply->element[0]->type == REDIS_REPLY_INTEGER;
    if (reply->type != REDIS_REPLY_INTEGER && !fenced)
        return rlock__fail_reply(reply, "TRANSFER");
    out->remaining = 0;
    out->granted = (fenced ? reply->element[0]->integer : reply->integer) == 1;
    out->gone = !out->granted;
    if (fenced && rlock__read_token(reply->element[1], &out->token) != RLOCK_OK)
        return rlock__fail_reply(reply, "TRANSFER");
    return RLOCK_OK;
}

/*
 * The keys are the receiving waiter's handle's, not the releaser's: the two
 * may be a plain and a fenced handle of one name (one hash, one channel),
 * and a waiter in rlock_try_lock_fenced must draw its token (the counter's
 * INCR) however the holder before it held the lock; a plain waiter draws
 * none. The waiter's handle is in its call until the offer is settled.
 */
static int transfer(const rlock *lock, const rlock__owner *owner, const rlock__offer *offer,
                    rlock__released *out) {
    char from[RLOCK__OWNER_MAX], to[RLOCK__OWNER_MAX], lease[24];
    const char *argv[5];
    size_t argvlen[5];
    const rlock *receiver = offer->waiter->lock;
    int k = lock_keys(receiver, argv, argvlen);
    argv[k] = from;
    argvlen[k] = rlock__owner_field(lock->client_id, owner->id, from);
    argv[k + 1] = to;
    argvlen[k + 1] = rlock__owner_field(lock->client_id, offer->owner.id, to);
    argv[k + 2] = lease;
    argvlen[k + 2] = rlock__fmt_i64(lease, rlock__lease_ttl(lock, offer->lease_ms));
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_TRANSFER, .flags = RLOCK__CMD_WRITE, .argc = k + 3,
                      .nkeys = k, .argv = argv, .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    *out = (rlock__released){.remaining = -2, .sent_ms = rlock__now_ms()};
    int status =
        rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, NULL, read_transfer, out);
    if (status == RLOCK_EIO)
        out->remaining = RLOCK__RELEASE_UNKNOWN;
    return status;
}

int rlock__read_forced(const redisReply *reply, void *script_name) {
    if (reply->type != REDIS_REPLY_INTEGER)
        return rlock__fail_reply(reply, script_name);
    return reply->integer != 0;
}

static int force_unlock(const rlock *lock) {
    const char *publish = lock->publish_verb;
    const char *argv[] = {lock->name, lock->channel, publish};
    size_t argvlen[] = {lock->name_len, lock->channel_len, strlen(publish)};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_FORCE_UNLOCK, .flags = RLOCK__CMD_WRITE,
                      .argc = 3, .nkeys = 1, .argv = argv, .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    rlock__exec_info info = {0};
    int status =
        rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, &info, rlock__read_forced,
                         (void *)"FORCE_UNLOCK");
    if (status == 1) /* deleted, and "0" published */
        rlock__republish_if_asked(lock, &info, "0", RLOCK__NO_DEADLINE);
    return status;
}

typedef struct query {
    const char *verb;
    long long *value;
} query;

/* An integer reply; a bulk reply parsed as a decimal; nil as 0. */
static int read_number(const redisReply *reply, void *arg) {
    query *q = arg;
    if (reply->type == REDIS_REPLY_INTEGER)
        *q->value = reply->integer;
    else if (reply->type == REDIS_REPLY_NIL)
        *q->value = 0;
    else if (reply->type == REDIS_REPLY_STRING)
        *q->value = strtoll(reply->str, NULL, 10);
    else
        return rlock__fail_reply(reply, q->verb);
    return RLOCK_OK;
}

/* HLEN (WRONGTYPE for a key that is not a hash), HEXISTS, HGET, PTTL, as asked. */
static int ask_redis(const rlock *lock, const char *verb, const char *field, size_t field_len,
                     long long *value) {
    query q = {verb, value};
    const char *argv[] = {verb, lock->name, field};
    size_t argvlen[] = {strlen(verb), lock->name_len, field_len};
    rlock__cmd cmd = {.script = -1, .argc = field != NULL ? 3 : 2, .argv = argv,
                      .argvlen = argvlen};
    return rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, NULL, read_number, &q);
}

/*
 * The read-only questions; the owner's field is the kind's. For the hash
 * kinds (plain, fenced, fair) a field found in a hash that has "mode" is a
 * read-write lock's reader (the same string), no hold of theirs: 0. Plain
 * commands the least-privilege ACL has (docs/failure-modes.md), the second
 * only when the field is there.
 */
int rlock__hash_ask(const rlock *lock, int question, const rlock__owner *owner, long long *value) {
    static const char *const verbs[] = {[RLOCK__ASK_LOCKED] = "HLEN", [RLOCK__ASK_HELD] = "HEXISTS",
                                        [RLOCK__ASK_COUNT] = "HGET", [RLOCK__ASK_TTL] = "PTTL"};
    char field[RLOCK__OWNER_MAX];
    if (question != RLOCK__ASK_HELD && question != RLOCK__ASK_COUNT)
        return ask_redis(lock, verbs[question], NULL, 0, value);
    size_t len = lock->kind->renewer->owner_field(lock->client_id, owner->id, field);
    int status = ask_redis(lock, verbs[question], field, len, value);
    long long rw = 0;
    if (status != RLOCK_OK || *value == 0 || lock->kind->renewer != &rlock__hash_renewer)
        return status;
    status = ask_redis(lock, "HEXISTS", "mode", 4, &rw);
    if (status == RLOCK_OK && rw)
        *value = 0;
    return status;
}

static const rlock__wait_ops reentrant_wait = {.send_ahead = send_ahead};

const rlock__renewer rlock__hash_renewer = {.script = RLOCK__SCRIPT_RENEW,
                                            .node_script = RLOCK__SCRIPT_RENEW_NODE,
                                            .owner_field = rlock__owner_field_of};

/* The table of both kinds: the functions above pass lock->keys.token_key, which a fenced handle has. */
#define HASH_LOCK_OPS                                                                             \
    .attempt = attempt, .read_ahead = rlock__hash_read_ahead, .release = rlock__hash_release,     \
    .transfer = transfer, .force_unlock = force_unlock, .ask = rlock__hash_ask,                   \
    .wait = &reentrant_wait, .renewer = &rlock__hash_renewer,                                     \
    .channel_prefix = "redisson_lock__channel", .local_queue = 1

const rlock__kind rlock__reentrant = {.name = "reentrant", HASH_LOCK_OPS};

const rlock__kind rlock__fenced = {.name = "fenced", HASH_LOCK_OPS};
