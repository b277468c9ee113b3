/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * api.h - the top layer: the public rlock_* functions of include/rlock.h,
 * the client they share, and the call guard. PRIVATE: not installed.
 *
 *   client.c    client open/close, the call guard
 *   config.c    rlock_config -> rlock__settings, every range checked
 *   registry.c  the open clients, for thread exit and fork
 *   handle.c    lock handles (rlock_get, rlock_get_fair, rlock_get_fenced, rlock_get_rw,
 *               rlock_free, rlock_name)
 *   lock.c      the lock calls: lock, try_lock, unlock, queries, for the calling thread
 *               or an explicit owner (the _as calls)
 *   owner.c     explicit owners: their ids, one call at a time per owner and lock
 *   fenced.c    the fenced lock's token calls, and the resource helper
 *   inspect.c   rlockctl's read-only inspection seam (inspect.h; tool-only)
 *   multi.c     multi-locks (rlock_multi_*): several handles taken together
 *   redlock.c   Redlocks (rlock_redlock_*): one name on independent masters
 *   identity.c  the client's connection name and registration hash
 *   stats.c     rlock_client_stats
 *
 * Calls go down only: api uses the group layer (group.h: multi-locks and
 * Redlocks) and, through it, the kind layer, the engine, net and core.
 */
#ifndef RLOCK_API_H
#define RLOCK_API_H

#include <limits.h>

#include "../group/group.h"

#define RLOCK__CLIENT_MAGIC 0x726c636bu /* "rlck" */

/* ---- owner.c: an explicit owner's call in progress --------------------------------- */

/*
 * An _as call registered for its length (on the calling thread's stack), so
 * that a second call for the same owner and lock is refused while it runs.
 */
typedef struct rlock__owner_call rlock__owner_call;
struct rlock__owner_call {
    rlock__owner_call *next;    /* the client's bucket chain; guarded by client->mutex */
    rlock_client *client;       /* NULL: not registered (a thread's call) */
    uint64_t owner;
    const char *name;           /* the handle's name; the handle outlives the call */
    size_t name_len;
};

#define RLOCK__OWNER_CALL_BUCKETS 64

enum { RLOCK__OPEN, RLOCK__CLOSING, RLOCK__CLOSED };

struct rlock_client {
    uint32_t magic;
    unsigned fork_generation;   /* rlock__fork_generation() at open; read-only */
    char id[37];                /* UUID; read-only after open */
    rlock__settings settings;   /* read-only after open */
    rlock__events events;
    rlock__net net;
    rlock__engine engine;

    pthread_mutex_t mutex;      /* guards state transitions, handles, owner_calls */
    pthread_cond_t idle;        /* signalled when calls drops to 0 while closing */
    _Atomic int state;          /* RLOCK__OPEN/CLOSING/CLOSED; written under mutex */
    atomic_int calls;           /* public calls in progress (atomic, no mutex) */
    int handles;                /* live rlock handles */
    rlock__owner_call *owner_calls[RLOCK__OWNER_CALL_BUCKETS]; /* _as calls in progress,
                                   by owner id; entries live on their callers' stacks */

    rlock_client *registry_next; /* guarded by the registry mutex in registry.c */
};

/* ---- client.c: the call guard ----------------------------------------------------- */

/* Per-call guard: validates the client and counts the call in flight. */
typedef struct rlock__guard {
    rlock_client *client;
    int cancel_state;           /* the caller's cancel state, restored on leave */
    unsigned error_mark;        /* rlock__error_mark() at entry */
} rlock__guard;

int rlock__enter(rlock__guard *g, rlock_client *c);
void rlock__leave(rlock__guard *g);
/* Leaves, and makes sure an error status comes with a recorded message. */
int rlock__leave_status(rlock__guard *g, int status);
/* Validates a handle and enters its client. */
int rlock__enter_lock(rlock__guard *g, rlock *lock);
/*
 * The guards of a call on n handles (a multi-lock's, a Redlock's): each
 * handle's client entered in turn, g[0] keeping the caller's cancel state
 * and error mark. rlock__enter_all: RLOCK_OK, or a status with nothing
 * entered or allocated. rlock__leave_all leaves them (last first), frees
 * them, and makes sure an error status comes with a recorded message; its
 * _on_cancel form is a cancellation cleanup (arg: the rlock__guards).
 * rlock__enter_all_for (owner.c) enters them for owner: RLOCK__CALLING_THREAD
 * as rlock__enter_all, an explicit id also registered on every handle, as an
 * _as call on one lock is; the leaves end the registrations.
 * rlock__release_all_for: release(locks, n, owner) inside such guards, the
 * unlock of a multi-lock or a Redlock.
 */
typedef struct rlock__guards {
    rlock__guard *g;            /* owned, n entries */
    rlock__owner_call *as;      /* owned, n entries: an explicit owner's registrations, or NULL */
    size_t n;
} rlock__guards;
int rlock__enter_all(rlock__guards *gs, rlock *const *locks, size_t n);
int rlock__enter_all_for(rlock__guards *gs, rlock *const *locks, size_t n, uint64_t owner);
int rlock__release_all_for(rlock *const *locks, size_t n, uint64_t owner,
                           int (*release)(rlock *const *locks, size_t n,
                                          const rlock__owner *owner));
int rlock__leave_all(rlock__guards *gs, int status);
void rlock__leave_all_on_cancel(void *guards);
/* Frees the client struct (its parts are released already). */
void rlock__client_free(rlock_client *c);
/* Whether c was opened before a fork() of this process (not ours to use). */
int rlock__inherited(const rlock_client *c);

/*
 * Registers an _as call of owner on lock (owner.c): RLOCK_EINVAL if one for
 * the same owner and lock name is in progress. End it with rlock__owner_call_end.
 */
int rlock__owner_call_begin(rlock__owner_call *call, rlock *lock, uint64_t owner);
/* Unregisters it; a no-op for a call never registered (client NULL). */
void rlock__owner_call_end(rlock__owner_call *call);

/* ---- lock.c -------------------------------------------------------------------------- */

/* The owner argument of rlock__lock_call meaning "the calling thread" (ids start at 1). */
#define RLOCK__CALLING_THREAD 0

/* An _as call's owner: RLOCK_EINVAL for 0 (no owner: 0 means the calling thread inside). */
int rlock__check_owner(uint64_t owner);

/*
 * The acquire behind every public lock call: for owner (an explicit id, or
 * RLOCK__CALLING_THREAD), waiting wait_ms (-1: no limit), lease_ms checked
 * here. *token (if not NULL) receives a fenced lock's token on RLOCK_OK.
 */
int rlock__lock_call(rlock *lock, uint64_t owner, long long wait_ms, long long lease_ms,
                     long long *token);
/* The owner named by id: the calling thread (RLOCK__CALLING_THREAD), or an explicit one. */
rlock__owner rlock__owner_of(uint64_t id);
/* 1..RLOCK_MAX_LEASE_MS or RLOCK_LEASE_WATCHDOG. */
int rlock__valid_lease(long long lease_ms);
/* RLOCK_EINVAL with the message every lock call gives for a bad lease. */
int rlock__bad_lease(long long lease_ms);

/* ---- config.c ------------------------------------------------------------------------ */

/* Checks cfg (NULL: defaults) and copies it; RLOCK_EINVAL names the bad field. */
int rlock__settings_from(const rlock_config *cfg, rlock__settings *s);

/* ---- identity.c -------------------------------------------------------------------------- */

/* Fills s->client_id and s->conn_name ("rlock:<host>:<pid>:<id8>") for client_id. */
void rlock__name_client(rlock__settings *s, const char *client_id);
/* Registers c (engine/registration.c) with its identity; url is shown without credentials. */
int rlock__register_client(rlock_client *c, const char *url);

/* ---- registry.c ------------------------------------------------------------------------ */

/* Registers the fork handlers and the thread-exit hook once. */
void rlock__registry_init(void);
void rlock__registry_add(rlock_client *c);
void rlock__registry_remove(rlock_client *c);
/* Bumped in a forked child; a client opened under another value is inherited. */
unsigned rlock__fork_generation(void);

#endif /* RLOCK_API_H */
