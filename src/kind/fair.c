/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fair.c - the fair lock (Redisson's RedissonFairLock, getFairLock): the
 * wire side of its operations. Waiters queue in Redis in arrival order,
 * whatever their process or language; an unlock wakes the head of the
 * queue only, on that waiter's own channel. The Lua is in lua/fair_*.lua; the
 * hash, its questions and its release are the reentrant lock's
 * (reentrant.c), with the fair script for the release.
 *
 *   lock key   <name>                          HASH  as the reentrant lock
 *   queue      redisson_lock_queue:{<name>}    LIST  waiting owner fields
 *   timeouts   redisson_lock_timeout:{<name>}  ZSET  owner field -> deadline (wall ms)
 *   channel    redisson_lock__channel:{<name>}:<owner field>   one per waiter
 *
 * What the generic code must not do for this kind, it is told by NULLs in
 * the table: no transfer (an in-process hand-off would let a thread of this
 * client overtake waiters queued before it in other processes), no attempt
 * sent ahead (the head's own attempt follows its message at once).
 *
 * Threads: application threads only.
 */
#include <string.h>

#include "internal.h"

/*
 * Redisson's threadWaitTime: how long a waiter may stay at the head of the
 * queue without taking the lock before it counts as dead. A try_lock waiter
 * uses its own wait, a lock() waiter fair_wait_timeout_ms (Redisson's
 * fairLockWaitTimeout), as Redisson does.
 */
static long long thread_wait_ms(const rlock *lock, long long wait_ms) {
    return wait_ms > 0 ? wait_ms : lock->engine->settings->fair_wait_timeout_ms;
}

static int attempt(const rlock *lock, const rlock__owner *owner, long long lease_ms,
                   long long expected, long long wait_ms, int64_t deadline_ms,
                   rlock__attempt *answer) {
    char lease[24], field[RLOCK__OWNER_MAX], expected_str[24], wait[24], now[24];
    const char *argv[] = {lock->name, lock->keys.queue, lock->keys.timeouts, lease, field,
                          expected_str, wait, now, wait_ms != 0 ? "1" : "0", lock->channel,
                          lock->publish_verb};
    size_t argvlen[] = {lock->name_len,
                        lock->keys.queue_len,
                        lock->keys.timeouts_len,
                        rlock__fmt_i64(lease, lease_ms),
                        rlock__owner_field(lock->client_id, owner->id, field),
                        rlock__fmt_i64(expected_str, expected),
                        rlock__fmt_i64(wait, thread_wait_ms(lock, wait_ms)),
                        rlock__fmt_i64(now, rlock__wall_ms()),
                        1,
                        lock->channel_len,
                        strlen(lock->publish_verb)};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_FAIR_ACQUIRE, .flags = RLOCK__CMD_WRITE,
                      .argc = 11, .nkeys = 3, .argv = argv, .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    rlock__exec_info info = {0};
    answer->outcome = RLOCK__ATTEMPT_NONE;
    int status = rlock__exec_read(lock->engine->net, &cmd, deadline_ms, &info,
                                  rlock__read_attempt, answer);
    answer->sent_ms = info.sent_ms; /* reentrant.c's attempt explains */
    return status;
}

static int read_left(const redisReply *reply, void *arg) {
    (void)arg;
    if (reply->type != REDIS_REPLY_INTEGER)
        return rlock__fail_reply(reply, "FAIR_LEAVE");
    return RLOCK_OK;
}

/* Redisson's acquireFailed, plus a word to the next head (lua/fair_leave.lua). */
static void give_up(const rlock *lock, const rlock__owner *owner, long long wait_ms) {
    char field[RLOCK__OWNER_MAX], wait[24], now[24];
    const char *publish = lock->publish_verb;
    const char *argv[] = {lock->name, lock->keys.queue, lock->keys.timeouts, field, wait, lock->channel,
                          publish, now};
    size_t argvlen[] = {lock->name_len,
                        lock->keys.queue_len,
                        lock->keys.timeouts_len,
                        rlock__owner_field(lock->client_id, owner->id, field),
                        rlock__fmt_i64(wait, thread_wait_ms(lock, wait_ms)),
                        lock->channel_len,
                        strlen(publish),
                        rlock__fmt_i64(now, rlock__wall_ms())};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_FAIR_LEAVE, .flags = RLOCK__CMD_WRITE, .argc = 8,
                      .nkeys = 3, .argv = argv, .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    /* Best effort: the caller's status stands; a queue entry left behind dies by its deadline. */
    rlock__error_detail saved;
    rlock__error_save(&saved);
    int64_t deadline_ms = rlock__deadline_after(lock->engine->settings->command_timeout_ms);
    rlock__exec_read(lock->engine->net, &cmd, deadline_ms, NULL, read_left, NULL);
    rlock__error_restore(&saved);
}

int rlock__fair_dequeue(const rlock *lock, const char *field, size_t field_len,
                        long long wait_ms) {
    char wait[24], now[24];
    const char *publish = lock->publish_verb;
    const char *argv[] = {lock->name, lock->keys.queue, lock->keys.timeouts, field, wait, lock->channel,
                          publish, now};
    size_t argvlen[] = {lock->name_len,      lock->keys.queue_len,
                        lock->keys.timeouts_len,  field_len,
                        rlock__fmt_i64(wait, wait_ms), lock->channel_len,
                        strlen(publish),     rlock__fmt_i64(now, rlock__wall_ms())};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_FAIR_LEAVE, .flags = RLOCK__CMD_WRITE, .argc = 8,
                      .nkeys = 3, .argv = argv, .argvlen = argvlen};
    if (lock->keys.queue == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "dequeue: \"%s\" is not a fair lock's handle",
                           lock->name);
    return rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, NULL, rlock__read_forced,
                            (void *)"FAIR_LEAVE");
}

static int force_unlock(const rlock *lock) {
    char now[24];
    const char *publish = lock->publish_verb;
    const char *argv[] = {lock->name, lock->keys.queue, lock->keys.timeouts, lock->channel, publish, now};
    size_t argvlen[] = {lock->name_len, lock->keys.queue_len, lock->keys.timeouts_len, lock->channel_len,
                        strlen(publish), rlock__fmt_i64(now, rlock__wall_ms())};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_FAIR_FORCE_UNLOCK, .flags = RLOCK__CMD_WRITE,
                      .argc = 6, .nkeys = 3, .argv = argv, .argvlen = argvlen,
                      .family = lock->keys.family, .family_len = lock->keys.family_len};
    return rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, NULL, rlock__read_forced,
                            (void *)"FAIR_FORCE_UNLOCK");
}

/* "redisson_lock__channel:{<name>}:<uuid>:<owner>": where the unlocker finds this waiter. */
static char *waiter_channel(const rlock *lock, const rlock__owner *owner, size_t *len) {
    char field[RLOCK__OWNER_MAX];
    size_t field_len = rlock__owner_field(lock->client_id, owner->id, field);
    char *channel = rlock__malloc(lock->channel_len + 1 + field_len + 1);
    if (channel == NULL)
        return NULL;
    memcpy(channel, lock->channel, lock->channel_len);
    channel[lock->channel_len] = ':';
    memcpy(channel + lock->channel_len + 1, field, field_len);
    *len = lock->channel_len + 1 + field_len;
    channel[*len] = '\0';
    return channel;
}

static const rlock__wait_ops fair_wait = {.send_ahead = NULL};

const rlock__kind rlock__fair = {
    .name = "fair",
    .attempt = attempt,
    .read_ahead = rlock__hash_read_ahead,
    .release = rlock__hash_release,
    .transfer = NULL,
    .force_unlock = force_unlock,
    .ask = rlock__hash_ask,
    .wait = &fair_wait,
    .renewer = &rlock__hash_renewer,
    .channel_prefix = "redisson_lock__channel",
    .waiter_channel = waiter_channel,
    .give_up = give_up,
};
