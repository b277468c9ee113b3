/*
 * api.h - the top layer: the public rlock_* functions of include/rlock.h,
 * the client they share, and the call guard. PRIVATE: not installed.
 *
 *   client.c    client open/close, the call guard
 *   config.c    rlock_config -> rlock__settings, every range checked
 *   registry.c  the open clients, for thread exit and fork
 *   handle.c    lock handles (rlock_get, rlock_get_fair, rlock_free, rlock_name)
 *   lock.c      the lock calls: lock, try_lock, unlock, queries
 *   inspect.c   rlockctl's read-only inspection seam (inspect.h; tool-only)
 *
 * Calls go down only: api uses kind (kind.h) and, through it, the engine,
 * net and core.
 */
#ifndef RLOCK_API_H
#define RLOCK_API_H

#include "../kind/kind.h"

#define RLOCK__CLIENT_MAGIC 0x726c636bu /* "rlck" */

enum { RLOCK__OPEN, RLOCK__CLOSING, RLOCK__CLOSED };

struct rlock_client {
    uint32_t magic;
    unsigned fork_generation;   /* rlock__fork_generation() at open; read-only */
    char id[37];                /* UUID; read-only after open */
    rlock__settings settings;   /* read-only after open */
    rlock__events events;
    rlock__net net;
    rlock__engine engine;

    pthread_mutex_t mutex;      /* guards state transitions, handles */
    pthread_cond_t idle;        /* signalled when calls drops to 0 while closing */
    _Atomic int state;          /* RLOCK__OPEN/CLOSING/CLOSED; written under mutex */
    atomic_int calls;           /* public calls in progress (atomic, no mutex) */
    int handles;                /* live rlock handles */

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
/* Frees the client struct (its parts are released already). */
void rlock__client_free(rlock_client *c);
/* Whether c was opened before a fork() of this process (not ours to use). */
int rlock__inherited(const rlock_client *c);

/* ---- config.c ------------------------------------------------------------------------ */

/* Checks cfg (NULL: defaults) and copies it; RLOCK_EINVAL names the bad field. */
int rlock__settings_from(const rlock_config *cfg, rlock__settings *s);

/* ---- registry.c ------------------------------------------------------------------------ */

/* Registers the fork handlers and the thread-exit hook once. */
void rlock__registry_init(void);
void rlock__registry_add(rlock_client *c);
void rlock__registry_remove(rlock_client *c);
/* Bumped in a forked child; a client opened under another value is inherited. */
unsigned rlock__fork_generation(void);

#endif /* RLOCK_API_H */
