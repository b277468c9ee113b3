/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * internal.h - PRIVATE to the kind layer's own files: what the kinds share
 * among themselves and the group layer does not call (kind.h is the face).
 */
#ifndef RLOCK_KIND_INTERNAL_H
#define RLOCK_KIND_INTERNAL_H

#include "kind.h"

/* ---- layout.c --------------------------------------------------------------------- */

/* "<client id>:<owner id>" into buf (RLOCK__OWNER_MAX bytes); returns its length. */
size_t rlock__owner_field(const char *client_id, uint64_t owner, char *buf);
/* The renewer's owner_field (arg: the client id). */
size_t rlock__owner_field_of(const void *client_id, uint64_t owner, char *buf);

/* ---- reentrant.c: the Redisson hash the reentrant, fair and read-write kinds share -- */

/*
 * reentrant.c, shared with the fair and read-write kinds (same hash, same
 * answers): the read-only questions, a reply read ahead, and the release
 * (RELEASE, or FAIR_RELEASE when lock->keys.queue is set).
 */
int rlock__hash_ask(const rlock *lock, int question, const rlock__owner *owner, long long *value);
int rlock__hash_read_ahead(const rlock *lock, rlock__conn *ahead, rlock__attempt *answer);
int rlock__hash_release(const rlock *lock, const rlock__owner *owner, long long expected,
                        int64_t deadline_ms, rlock__released *out);
/*
 * The same with another script that takes RELEASE's arguments and gives its
 * answers (a read-write lock's releases), for the owner field of the kind's
 * renewer; message: what its last unlock publishes (re-published after an ASK).
 */
int rlock__hash_release_with(const rlock *lock, int script, const char *message,
                             const rlock__owner *owner, long long expected, int64_t deadline_ms,
                             rlock__released *out);
/*
 * A script that ran at a node importing the lock's slot (after ASK) with
 * sharded pub/sub published where nobody listens yet: message once more at
 * the slot's owner, best effort.
 */
void rlock__republish_if_asked(const rlock *lock, const rlock__exec_info *info,
                               const char *message, int64_t deadline_ms);
/* A forced unlock's reply: 1 deleted, 0 not locked, or the error of the script named
 * script_name (a const char *). */
int rlock__read_forced(const redisReply *reply, void *script_name);

/* ---- hold.c, acquire.c, release.c ---------------------------------------------------- */

/* The hold count a sleeping waiter's own attempt would send (for an attempt sent ahead). */
long long rlock__waiter_expected(const rlock__waiter *w);
/* The same for its hold of kind's kind of the lock's name (a sibling's). */
rlock__hold_key rlock__hold_of_kind(const rlock *lock, const rlock__kind *kind,
                                    const rlock__owner *owner);
/* What the client's own view says of owner's hold of kind's kind of lock's name
 * (RLOCK__HOLD_*); a loss found now is reported, once. */
int rlock__known_hold(const rlock *lock, const rlock__kind *kind, const rlock__owner *owner);
/*
 * Tells owner's loss of lock: one LOCK_LOST event (and on_lock_lost) when
 * report is set, and RLOCK_ELOST with `how` in the message.
 */
int rlock__lost(const rlock *lock, const rlock__owner *owner, int report, long long lease_left_ms,
                const char *how);
/* The LOCK_LOST event (and on_lock_lost) for owner's hold of lock. */
void rlock__report_lost(const rlock *lock, const rlock__owner *owner, long long lease_left_ms,
                        const char *how);
/* "the calling thread" or "owner <id>", for messages; buf holds 32 bytes. */
const char *rlock__owner_words(const rlock__owner *owner, char *buf);

/* ---- fence.c ------------------------------------------------------------------------- */

/* A token as the scripts answer it: a decimal string or integer (nil: 0). */
int rlock__read_token(const redisReply *reply, long long *token);

#endif /* RLOCK_KIND_INTERNAL_H */
