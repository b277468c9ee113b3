/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lockkey.h - what a lock looks like in Redis, read and written behind
 * librlock's back: the hash of a lock key and its owner field, the wake-up
 * channel, a raw subscriber, a foreign (Redisson-style) holder, renewals
 * seen through PTTL, orphaned fields that must expire unrenewed.
 */
#ifndef RLOCK_TEST_HARNESS_LOCKKEY_H
#define RLOCK_TEST_HARNESS_LOCKKEY_H

#include <stddef.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fail.h"

/*
 * HGETALL of a lock key: fills field/value (malloc'd, NUL-terminated; pass
 * NULL to skip) with the FIRST field and returns the number of fields
 * (0 if the key does not exist).
 */
int h_lock_fields(redisContext *c, const char *name, size_t len, char **field, long long *value);
/*
 * 1 if the lock key has exactly one field, named "<client_id>:<decimal>",
 * whose value is count; 0 otherwise (with a description on stderr).
 */
int h_lock_is(redisContext *c, const char *name, size_t len, const char *client_id,
              long long count);
/* The owner field of a lock held by exactly one owner (malloc'd); fails the
 * test unless the key has exactly one field. */
char *h_lock_owner(redisContext *c, const char *name);

/* Fails unless the lock key holds exactly one field "<id>:<tid>" = count. */
#define H_ASSERT_LOCK_IS(redis, name, client_id, count)                                            \
    do {                                                                                           \
        const char *h_n_ = (name);                                                                 \
        if (!h_lock_is((redis), h_n_, strlen(h_n_), (client_id), (count)))                         \
            h_fail(__FILE__, __LINE__, "lock %.200s is not held by %s with count %lld", h_n_,      \
                   (client_id), (long long)(count));                                               \
    } while (0)

/*
 * The wake-up channel of a lock: "redisson_lock__channel:{NAME}", or
 * "redisson_lock__channel:NAME" when NAME contains '{'. malloc'd; *out_len
 * (may be NULL) receives its length (names may contain any byte but NUL).
 */
char *h_channel(const char *name, size_t len, size_t *out_len);
/* PUBSUB NUMSUB of a lock's channel. */
long long h_numsub(redisContext *c, const char *name, size_t len);
/* The same for sharded (SSUBSCRIBE) subscribers if sharded, else classic. */
long long h_numsub_kind(redisContext *c, const char *name, size_t len, int sharded);

/*
 * A raw subscriber on a lock's channel. h_sub_read() waits up to timeout_ms
 * (scaled) for the next message and returns its payload (malloc'd), or NULL
 * on timeout (the context is unusable afterwards: free it).
 */
redisContext *h_sub_open(const char *url, const char *name, size_t len);
char *h_sub_read(redisContext *sub, long long timeout_ms);

/* The owner field h_foreign_lock writes: another (Redisson) client's. */
#define H_FOREIGN_OWNER "5c3a9e2b-7d41-4f0a-9b6e-1a2b3c4d5e6f:1"
/* A Redisson-style holder from another client: HSET name H_FOREIGN_OWNER 1,
 * PEXPIRE name pexpire_ms (used as given). */
void h_foreign_lock(redisContext *c, const char *name, long long pexpire_ms);
/* What a Redisson client does on unlock: DEL name, PUBLISH 0 on its channel. */
void h_foreign_unlock(redisContext *c, const char *name);

/*
 * Waits until the watchdog has just renewed name: its PTTL jumps up by more
 * than min_jump_ms. Fails the test if no jump is seen within within_ms (used
 * as given: scale it yourself). Returns the PTTL seen right after the jump.
 */
long long h_wait_renewal(redisContext *c, const char *name, long long min_jump_ms,
                         long long within_ms);

/*
 * The fields of a lock key held by client id: 0 (absent), or 1 with *count
 * set. Fails the test if there are more, or if the field is someone else's.
 */
int h_own_fields(redisContext *r, const char *name, const char *id, long long *count);
/*
 * An orphan: a field of id's left by an acquisition whose every reply was
 * lost. Polls until the key is gone, checking meanwhile that nobody renews
 * it (its PTTL only decreases) and that it holds count 1; fails the test if
 * not, or if it is still there lease_ms (+ 500 ms, scaled) later. Returns
 * how long it took.
 */
long long h_orphan_expires(redisContext *r, const char *name, const char *id, long long lease_ms);

#endif /* RLOCK_TEST_HARNESS_LOCKKEY_H */
