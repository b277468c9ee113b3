/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fenced.c - the fenced lock's public calls that return or read a token
 * (rlock_try_lock_fenced and its forms, rlock_fence_token), and the
 * resource helper rlock_fenced_set. A fenced handle (rlock_get_fenced,
 * handle.c) also works with every plain lock call (lock.c).
 *
 * Threads: any application thread.
 */
#include <string.h>

#include "api.h"

/* A token call needs a fenced handle (the magic is checked by the guard after this). */
static int check_fenced(const rlock *lock, const long long *token) {
    if (lock != NULL && lock->magic == RLOCK__LOCK_MAGIC && lock->kind != &rlock__fenced)
        return rlock__fail(RLOCK_EINVAL, 0, "lock '%.200s' is not a fenced lock: make its "
                                            "handle with rlock_get_fenced", lock->name);
    if (token == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "token: NULL");
    return RLOCK_OK;
}

int rlock_try_lock_fenced(rlock *lock, long long wait_ms, long long lease_ms, long long *token) {
    int status = check_fenced(lock, token);
    if (status != RLOCK_OK)
        return status;
    return rlock__lock_call(lock, RLOCK__CALLING_THREAD, wait_ms, lease_ms, token);
}

int rlock_lock_fenced(rlock *lock, long long lease_ms, long long *token) {
    return rlock_try_lock_fenced(lock, -1, lease_ms, token);
}

int rlock_try_lock_fenced_as(rlock *lock, uint64_t owner, long long wait_ms, long long lease_ms,
                             long long *token) {
    int status = check_fenced(lock, token);
    if (status == RLOCK_OK)
        status = rlock__check_owner(owner);
    if (status != RLOCK_OK)
        return status;
    return rlock__lock_call(lock, owner, wait_ms, lease_ms, token);
}

int rlock_fence_token(rlock *lock, long long *token) {
    rlock__guard g;
    int status = check_fenced(lock, token);
    if (status != RLOCK_OK || (status = rlock__enter_lock(&g, lock)) != RLOCK_OK)
        return status;
    return rlock__leave_status(&g, rlock__fence_token(lock, token));
}

/* rlock_fenced_set's arguments, checked; *fence receives the companion key (caller frees). */
static int fence_key_of(rlock_client *c, const char *key, long long token, const char *value,
                        size_t len, char **fence, size_t *fence_len) {
    size_t key_len = key != NULL ? strnlen(key, RLOCK_MAX_NAME_LEN + 1) : 0;
    *fence = NULL;
    if (key_len == 0 || key_len > RLOCK_MAX_NAME_LEN)
        return rlock__fail(RLOCK_EINVAL, 0, "key: NULL, empty or longer than %d bytes",
                           RLOCK_MAX_NAME_LEN);
    if (token < 1)
        return rlock__fail(RLOCK_EINVAL, 0, "token %lld: fencing tokens start at 1", token);
    if (value == NULL && len > 0)
        return rlock__fail(RLOCK_EINVAL, 0, "value: NULL with len %zu", len);
    if ((*fence = rlock__prefixed_name("rlock_fence", key, key_len, fence_len)) == NULL)
        return RLOCK_ENOMEM;
    if (!rlock__net_same_slot(&c->net, key, key_len, *fence, *fence_len))
        return rlock__fail(RLOCK_EINVAL, 0, "key '%.200s': its fence key '%.200s' hashes to "
                                            "another Cluster slot (a key with '}' but no '{', or "
                                            "with '{' but no non-empty {tag})", key, *fence);
    return RLOCK_OK;
}

int rlock_fenced_set(rlock_client *client, const char *key, long long token, const char *value,
                     size_t len) {
    rlock__guard g;
    char *fence = NULL;
    size_t fence_len = 0;
    int status = rlock__enter(&g, client);
    if (status != RLOCK_OK)
        return status;
    status = fence_key_of(client, key, token, value, len, &fence, &fence_len);
    if (status == RLOCK_OK)
        status = rlock__fenced_set(&client->net, key, strlen(key), fence, fence_len, token, value,
                                   len);
    rlock__free(fence);
    return rlock__leave_status(&g, status);
}
