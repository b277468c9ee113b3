/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rw.c - the read-write lock (Redisson's getReadWriteLock): two lock kinds
 * over one hash, the read lock (rlock__rw_read: shared) and the write lock
 * (rlock__rw_write: exclusive). rlock_get_rw gives a handle of each. The
 * Lua is in lua/rw_*.lua; waiting, re-basing a stale count and telling losses
 * are acquire.c's and release.c's, as for every kind.
 *
 *   lock key  <name>  HASH  mode, "<uuid>:<thread>" -> read holds,
 *                           "<uuid>:<thread>:write" -> write holds
 *   per hold  {<name>}:<uuid>:<thread>:rwlock_timeout:<k>  its lease (read holds)
 *   writers   rlock_rwlock_writers:{<name>}  SET  rlock writers waiting (ours)
 *   channel   redisson_rwlock:{<name>}  "0" read unlock frees it, "1" write unlock
 *
 * The two kinds' holds of one thread are two holds in the holds table (their
 * renewers differ, in the owner field: a writer's ends in ":write"): the
 * watchdog renews both with RW_RENEW, one script entry re-arming each lock
 * once for all the client's holds of it (never shortening its TTL), and each
 * reader's own keys. What the generic code must not do, the table says with NULLs: no
 * in-process hand-off (transfer: the lock is shared by readers and moved
 * by mode, a one-waiter hand-over does not fit it; every unlock releases,
 * as Redisson does).
 *
 * Threads: application threads; send_ahead on the subscriber thread (with
 * the waiters' mutex held: it only writes on an idle connection).
 */
#include <string.h>

#include "internal.h"

/*
 * How long the set of waiting writers lives without an attempt of one of
 * them (a writer's attempts come at least every third of it): readers that
 * a dead writer holds back wait at most this long.
 */
#define WRITERS_TTL_MS 1000

static int is_write(const rlock *lock) {
    return lock->kind == &rlock__rw_write;
}

/* "<uuid>:<thread>:write", Redisson's writer field (getWriteLockName). */
static size_t write_field(const void *client_id, uint64_t owner, char *buf) {
    size_t len = rlock__owner_field(client_id, owner, buf);
    memcpy(buf + len, ":write", 6);
    return len + 6;
}

/* "{<name>}", or the name itself if it has a '{' (lua/prelude/rw_keys.lua's hold_key rule). */
static size_t family(const char *name, size_t len, char *buf) {
    if (memchr(name, '{', len) != NULL) {
        memcpy(buf, name, len);
        return len;
    }
    buf[0] = '{';
    memcpy(buf + 1, name, len);
    buf[len + 1] = '}';
    return len + 2;
}

static const rlock__renewer read_renewer = {.script = RLOCK__SCRIPT_RW_RENEW,
                                            .node_script = RLOCK__SCRIPT_RW_RENEW_NODE,
                                            .owner_field = rlock__owner_field_of,
                                            .by_lock = 1,
                                            .family = family};

/*
 * A write hold too is renewed by RW_RENEW (not RENEW, which sets the hash's
 * TTL to the lease): the writer's own read holds (a downgrade) may have
 * longer leases, which the hash must outlive.
 */
static const rlock__renewer write_renewer = {.script = RLOCK__SCRIPT_RW_RENEW,
                                             .node_script = RLOCK__SCRIPT_RW_RENEW_NODE,
                                             .owner_field = write_field,
                                             .by_lock = 1, .kept_by = &read_renewer,
                                             .family = family};

/* An RW_READ_ACQUIRE or RW_WRITE_ACQUIRE command with its argument strings. */
typedef struct acquire_cmd {
    char lease[24], reader[RLOCK__OWNER_MAX], expected[24], ttl[24];
    const char *argv[9];
    size_t argvlen[9];
    rlock__cmd cmd;
} acquire_cmd;

static void put(acquire_cmd *a, int i, const char *arg, size_t len) {
    a->argv[i] = arg;
    a->argvlen[i] = len;
}

/* waits: a writer that waits joins the writers' set while the lock is busy. */
static void acquire_cmd_init(acquire_cmd *a, const rlock *lock, uint64_t owner,
                             long long lease_ms, long long expected, int waits) {
    int write = is_write(lock);
    put(a, 0, lock->name, lock->name_len);
    put(a, 1, lock->keys.writers, lock->keys.writers_len);
    put(a, 2, a->lease, rlock__fmt_i64(a->lease, lease_ms));
    put(a, 3, a->reader, rlock__owner_field(lock->client_id, owner, a->reader));
    put(a, 4, a->expected, rlock__fmt_i64(a->expected, expected));
    put(a, 5, waits ? "1" : "0", 1); /* RW_WRITE_ACQUIRE only, as the next */
    put(a, 6, a->ttl, rlock__fmt_i64(a->ttl, WRITERS_TTL_MS));
    put(a, 7, lock->channel, lock->channel_len); /* what the release will need, asked first */
    put(a, 8, lock->publish_verb, strlen(lock->publish_verb));
    a->cmd = (rlock__cmd){.script = write ? RLOCK__SCRIPT_RW_WRITE_ACQUIRE
                                          : RLOCK__SCRIPT_RW_READ_ACQUIRE,
                          .flags = RLOCK__CMD_WRITE, .argc = 9, .nkeys = 2,
                          .argv = a->argv, .argvlen = a->argvlen,
                          .family = lock->keys.family, .family_len = lock->keys.family_len};
}

/* An attempt's reply: the generic answers, and the write lock's "it would wait for itself". */
typedef struct attempt_reply {
    const rlock *lock;
    const rlock__owner *owner;
    rlock__attempt *answer;
} attempt_reply;

enum { ACQUIRE_SELF_DEADLOCK = 3 };

static int read_attempt(const redisReply *reply, void *arg) {
    attempt_reply *r = arg;
    char words[32];
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_INTEGER &&
        reply->element[0]->integer == ACQUIRE_SELF_DEADLOCK)
        return rlock__fail(RLOCK_EDEADLK, 0, "read-write lock '%.200s': %s holds its read lock "
                                             "(Redis shows %lld read holds) and asks for its "
                                             "write lock: it would wait for itself",
                           r->lock->name, rlock__owner_words(r->owner, words),
                           (long long)reply->element[1]->integer);
    return rlock__read_attempt(reply, r->answer);
}

static int attempt(const rlock *lock, const rlock__owner *owner, long long lease_ms,
                   long long expected, long long wait_ms, int64_t deadline_ms,
                   rlock__attempt *answer) {
    acquire_cmd a;
    attempt_reply r = {lock, owner, answer};
    acquire_cmd_init(&a, lock, owner->id, lease_ms, expected, wait_ms != 0);
    rlock__exec_info info = {0};
    answer->outcome = RLOCK__ATTEMPT_NONE;
    int status = rlock__exec_read(lock->engine->net, &a.cmd, deadline_ms, &info, read_attempt, &r);
    answer->sent_ms = info.sent_ms; /* reentrant.c's attempt explains */
    return status;
}

/* A sleeping waiter's next attempt, sent ahead (reentrant.c's send_ahead explains). */
static rlock__conn *send_ahead(const rlock__waiter *w) {
    const rlock *lock = w->lock;
    acquire_cmd a;
    acquire_cmd_init(&a, lock, w->owner.id, rlock__lease_ttl(lock, w->lease_ms),
                     rlock__waiter_expected(w), 1);
    return rlock__send_ahead(lock->engine->net, &a.cmd);
}

/* RW_READ_RELEASE or RW_WRITE_RELEASE: RELEASE's arguments and answers. */
static int release(const rlock *lock, const rlock__owner *owner, long long expected,
                   int64_t deadline_ms, rlock__released *out) {
    if (is_write(lock))
        return rlock__hash_release_with(lock, RLOCK__SCRIPT_RW_WRITE_RELEASE, "1", owner,
                                        expected, deadline_ms, out);
    return rlock__hash_release_with(lock, RLOCK__SCRIPT_RW_READ_RELEASE, "0", owner, expected,
                                    deadline_ms, out);
}

/* Redisson's forceUnlock of each handle: deletes the lock only in its own mode. */
static int force_unlock(const rlock *lock) {
    const char *mode = is_write(lock) ? "write" : "read", *message = is_write(lock) ? "1" : "0";
    const char *argv[] = {lock->name, mode, lock->channel, lock->publish_verb, message};
    size_t argvlen[] = {lock->name_len, strlen(mode), lock->channel_len,
                        strlen(lock->publish_verb), 1};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_RW_FORCE_UNLOCK, .flags = RLOCK__CMD_WRITE,
                      .argc = 5, .nkeys = 1, .argv = argv, .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    rlock__exec_info info = {0};
    int status = rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, &info,
                                  rlock__read_forced, (void *)"RW_FORCE_UNLOCK");
    if (status == 1)
        rlock__republish_if_asked(lock, &info, message, RLOCK__NO_DEADLINE);
    return status;
}

/* RW_LOCKED's and RW_READ_HOLDS's integer reply. */
static int read_locked(const redisReply *reply, void *arg) {
    long long *value = arg;
    if (reply->type != REDIS_REPLY_INTEGER)
        return rlock__fail_reply(reply, "RW_LOCKED or RW_READ_HOLDS");
    *value = reply->integer;
    return RLOCK_OK;
}

/*
 * The read lock's hold count (RW_READ_HOLDS): its field's count if a key of
 * its holds lives, else 0 (a field whose leases all ran out while other
 * readers kept the hash is no hold).
 */
static int read_holds(const rlock *lock, const rlock__owner *owner, long long *value) {
    char field[RLOCK__OWNER_MAX];
    const char *argv[] = {lock->name, field};
    size_t argvlen[] = {lock->name_len, rlock__owner_field(lock->client_id, owner->id, field)};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_RW_READ_HOLDS, .argc = 2, .nkeys = 1, .argv = argv,
                      .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    return rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, NULL, read_locked,
                            value);
}

/*
 * Redisson's isLocked() of each handle (RW_LOCKED); a reader's hold count and
 * "held" by its keys (read_holds); the rest as every hash lock, with our field.
 */
static int ask(const rlock *lock, int question, const rlock__owner *owner, long long *value) {
    if (!is_write(lock) && (question == RLOCK__ASK_HELD || question == RLOCK__ASK_COUNT))
        return read_holds(lock, owner, value);
    if (question != RLOCK__ASK_LOCKED)
        return rlock__hash_ask(lock, question, owner, value);
    const char *mode = is_write(lock) ? "write" : "read";
    const char *argv[] = {lock->name, mode};
    size_t argvlen[] = {lock->name_len, strlen(mode)};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_RW_LOCKED, .argc = 2, .nkeys = 1, .argv = argv,
                      .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    return rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, NULL, read_locked,
                            value);
}

static int read_left(const redisReply *reply, void *arg) {
    (void)arg;
    if (reply->type != REDIS_REPLY_INTEGER)
        return rlock__fail_reply(reply, "RW_WRITE_LEAVE");
    return RLOCK_OK;
}

/* A writer that waited and gives up leaves the writers' set (lua/rw_write_leave.lua). Best
 * effort. */
static void give_up(const rlock *lock, const rlock__owner *owner, long long wait_ms) {
    char field[RLOCK__OWNER_MAX];
    const char *argv[] = {lock->name, lock->keys.writers, field, lock->channel, lock->publish_verb};
    size_t argvlen[] = {lock->name_len, lock->keys.writers_len,
                        write_field(lock->client_id, owner->id, field), lock->channel_len,
                        strlen(lock->publish_verb)};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_RW_WRITE_LEAVE, .flags = RLOCK__CMD_WRITE,
                      .argc = 5, .nkeys = 2, .argv = argv, .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    rlock__error_detail saved;
    (void)wait_ms;
    rlock__error_save(&saved);
    int64_t deadline_ms = rlock__deadline_after(lock->engine->settings->command_timeout_ms);
    rlock__exec_read(lock->engine->net, &cmd, deadline_ms, NULL, read_left, NULL);
    rlock__error_restore(&saved); /* the caller's status stands; the set dies by its TTL */
}

/*
 * An owner that holds the read lock and asks for the write lock would wait
 * for itself: Redisson's write lock waits for every reader to leave, this
 * one included, for ever. Told at once from the holds table (a writer
 * that took read holds -- a downgrade -- and asks again re-enters its write
 * hold: no deadlock); an upgrade the table does not know of is answered by
 * the script ({3, count}).
 */
static int self_deadlock(rlock *lock, const rlock__owner *owner) {
    rlock__hold_key writer = rlock__hold_of(lock, owner);
    char words[32];
    if (rlock__known_hold(lock, lock->kind->sibling, owner) != RLOCK__HOLD_HELD ||
        rlock__holds_expected(&lock->engine->holds, &writer) > 0)
        return RLOCK_OK;
    return rlock__fail(RLOCK_EDEADLK, 0, "read-write lock '%.200s': %s holds its read lock and "
                                         "asks for its write lock: it would wait for itself (an "
                                         "upgrade; unlock the read holds first)",
                       lock->name, rlock__owner_words(owner, words));
}

static const rlock__wait_ops read_wait = {.send_ahead = send_ahead};
/* An unlock message that frees the lock goes to a waiting writer first. */
static const rlock__wait_ops write_wait = {.send_ahead = send_ahead, .woken_first = 1};

/*
 * The two kinds share their wire operations (each looks at which kind the
 * handle is); they differ in renewal, wake-up order, and what only a
 * writer does: leave the writers' set, refuse an upgrade. No transfer, no
 * waiter channel of their own (NULL: see the top of this file).
 */
const rlock__kind rlock__rw_read = {.name = "read", .attempt = attempt,
                                    .read_ahead = rlock__hash_read_ahead, .release = release,
                                    .force_unlock = force_unlock, .ask = ask, .wait = &read_wait,
                                    .renewer = &read_renewer, .channel_prefix = "redisson_rwlock",
                                    .sibling = &rlock__rw_write, .local_queue = 1,
                                    .release_expired = 1};

const rlock__kind rlock__rw_write = {.name = "write", .attempt = attempt,
                                     .read_ahead = rlock__hash_read_ahead, .release = release,
                                     .force_unlock = force_unlock, .ask = ask, .wait = &write_wait,
                                     .renewer = &write_renewer, .channel_prefix = "redisson_rwlock",
                                     .give_up = give_up, .self_deadlock = self_deadlock,
                                     .sibling = &rlock__rw_read, .local_queue = 1,
                                     .release_expired = 1};
