/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fence.c - the fenced lock's counter, read (rlock_fence_token), and the
 * resource helper (rlock_fenced_set), which applies a write to a Redis key
 * only for a token at least as high as every earlier write's. The lock
 * itself is the reentrant kind plus the counter (reentrant.c); the Lua of
 * the helper is in lua/fenced_set.lua.
 *
 *   counter   redisson_lock_token:{<name>}   STRING  the last token handed out
 *   resource  <key>                          STRING  the application's value
 *   fence     rlock_fence:{<key>}            STRING  the highest token a write carried
 *
 * Threads: application threads only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int rlock__read_token(const redisReply *reply, long long *token) {
    char *end = NULL;
    *token = 0;
    if (reply->type == REDIS_REPLY_NIL)
        return RLOCK_OK;
    if (reply->type == REDIS_REPLY_INTEGER) {
        *token = reply->integer;
        return RLOCK_OK;
    }
    if (reply->type != REDIS_REPLY_STRING || reply->len == 0)
        return RLOCK_EREDIS;
    errno = 0;
    *token = strtoll(reply->str, &end, 10);
    return errno == 0 && end == reply->str + reply->len ? RLOCK_OK : RLOCK_EREDIS;
}

typedef struct token_read {
    const char *key;
    long long *token;
} token_read;

static int read_counter(const redisReply *reply, void *arg) {
    token_read *t = arg;
    long long token = 0;
    if (rlock__read_token(reply, &token) != RLOCK_OK || token < 0)
        return rlock__fail(RLOCK_EREDIS, 0, "'%.200s' holds no fencing token counter", t->key);
    *t->token = token;
    return RLOCK_OK;
}

int rlock__fence_token(const rlock *lock, long long *token) {
    const char *argv[] = {"GET", lock->keys.token_key};
    size_t argvlen[] = {3, lock->keys.token_key_len};
    rlock__cmd cmd = {.script = -1, .argc = 2, .argv = argv, .argvlen = argvlen};
    token_read t = {lock->keys.token_key, token};
    return rlock__exec_read(lock->engine->net, &cmd, RLOCK__NO_DEADLINE, NULL, read_counter, &t);
}

/* What FENCED_SET answered, for the message of a refusal. */
typedef struct set_answer {
    const char *key;
    long long token;
} set_answer;

static int read_set(const redisReply *reply, void *arg) {
    set_answer *a = arg;
    long long highest = 0;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        rlock__read_token(reply->element[1], &highest) != RLOCK_OK)
        return rlock__fail_reply(reply, "FENCED_SET");
    if (reply->element[0]->integer == 1)
        return RLOCK_OK;
    return rlock__fail(RLOCK_ESTALE, 0, "'%.200s': fencing token %lld is below %lld, the highest "
                                        "this resource has seen (a later holder wrote): nothing "
                                        "written", a->key, a->token, highest);
}

int rlock__fenced_set(rlock__net *net, const char *key, size_t key_len, const char *fence_key,
                      size_t fence_key_len, long long token, const char *value, size_t len) {
    char token_str[24];
    const char *argv[] = {key, fence_key, token_str, value != NULL ? value : ""};
    size_t argvlen[] = {key_len, fence_key_len, rlock__fmt_i64(token_str, token), len};
    rlock__cmd cmd = {.script = RLOCK__SCRIPT_FENCED_SET, .flags = RLOCK__CMD_WRITE, .argc = 4,
                      .nkeys = 2, .argv = argv, .argvlen = argvlen};
    const char *colon = memchr(fence_key, ':', fence_key_len); /* "rlock_fence:{<key>}" */
    if (colon != NULL) { /* the part both keys name: a migration moves them together */
        cmd.family = colon + 1;
        cmd.family_len = fence_key_len - (size_t)(colon + 1 - fence_key);
    }
    set_answer a = {key, token};
    return rlock__exec_read(net, &cmd, RLOCK__NO_DEADLINE, NULL, read_set, &a);
}
