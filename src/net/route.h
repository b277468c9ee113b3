/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * route.h - PRIVATE to the net layer: where a command goes -- a node (a
 * server) and its connection pool (pool.c), and the routing seam
 * (rlock__route_ops) with its three routes: one server, the master Sentinel
 * names, the master of a Cluster slot. The layers above see nodes, pooled
 * connections and routes only as opaque pointers (net.h).
 *
 * Threads and locking: written where each field is declared.
 */
#ifndef RLOCK_NET_ROUTE_H
#define RLOCK_NET_ROUTE_H

#include "conn.h"

/* ---- pool.c: one node's connections ------------------------------------------ */

struct rlock__conn {
    redisContext *ctx;     /* NULL = not connected; written by the thread holding the slot */
    /* Replies the server still sends on ctx for commands whose replies nobody awaits (a
       fan-out that had enough): read and dropped before the next command's. Written by
       the thread holding the slot (0 whenever ctx changes). */
    int owed;
    int busy;              /* guarded by the pool's mutex */
    int64_t last_used_ms;  /* when last given back: written under the pool's mutex, read
                              by the thread that then takes the slot */
    rlock__node *node;     /* the node whose pool this slot is in; read-only */
};

struct rlock__pool {
    pthread_mutex_t mutex;     /* guards busy flags, closing, every write of a slot's ctx */
    pthread_cond_t available;  /* signalled when a slot is returned or on close */
    rlock__conn *slots;        /* size entries; owned */
    int size;
    int closing;               /* set once by rlock__pool_abort */
    int waiting;               /* threads queued in rlock__pool_take for a slot */
    int retired;               /* its node is not used now: connections given back are closed */
    /* Nothing may be sent there any more (a master the client has left): set once by
       rlock__pool_fence; read without the mutex by a thread checking a reply's source. */
    atomic_int fenced;
    /* The numeric address ("ip:port", "[ip6]:port") the node's first TCP connection
       reached, "" before it (or for a unix socket): what tells one server reached by
       two names apart from two servers. Written once, under the mutex. */
    char peer[64];
};

/* A server commands can go to: where it is and its connections. */
struct rlock__node {
    rlock__endpoint endpoint;  /* owned; read-only after the node is made */
    rlock__pool pool;
    rlock__events *events;     /* the client's (outlives the node): names and counts the
                                  pool's connections; read-only */
};

int rlock__pool_init(rlock__pool *pool, rlock__node *node, int size);
/* Aborts commands in flight (shutdown of busy sockets) and wakes pool waiters. */
void rlock__pool_abort(rlock__pool *pool);
void rlock__pool_destroy(rlock__pool *pool);
/*
 * Takes a slot, preferring a connected one, waiting while all are busy until
 * deadline_ms; threads already waiting go first (no slot is taken past them,
 * here or in rlock__pool_take_idle). NULL with *status RLOCK_ECLOSED
 * (closing) or RLOCK_EIO.
 */
rlock__conn *rlock__pool_take(rlock__pool *pool, int64_t deadline_ms, int *status);
/* Gives a slot back; a context that saw an error (or !healthy) is freed. */
void rlock__pool_give(rlock__conn *conn, int healthy);
/*
 * Connects the slot we hold if needed (by deadline_ms); an idle connection
 * the server closed is replaced; replies it owes are read and dropped first
 * (by deadline_ms, else it is replaced). RLOCK_ECLOSED if close began
 * meanwhile.
 */
int rlock__pool_connect(rlock__conn *conn, int connect_timeout_ms, int64_t deadline_ms);
/*
 * Takes an idle, connected slot without waiting; NULL if none (or closing,
 * or threads are queued in rlock__pool_take).
 * Slots the server closed are dropped on the way (checked whatever their
 * age with a peek; RLOCK__IDLE_UNCHECKED: not checked, the caller checks
 * the slots it took, all at once). A slot that owes replies is used only
 * once they have arrived (read and dropped here); RLOCK__IDLE_OWING: it is
 * taken as it is, conn->owed replies ahead of the taker's (a fan-out reads
 * past them).
 */
#define RLOCK__IDLE_OWING 1
#define RLOCK__IDLE_UNCHECKED 2
rlock__conn *rlock__pool_take_idle(rlock__pool *pool, int flags);
/* Copies the pool's peer address (above) into buf; 0 if not known yet. */
int rlock__pool_peer(rlock__pool *pool, char *buf, size_t size);
/* Gives a fresh pool its first connection (taken over; freed if the slot is in use). */
void rlock__pool_seed(rlock__pool *pool, redisContext *ctx);
/*
 * retired 1: its node is no longer used (not a master any more): idle
 * connections close now, busy ones when given back. 0: used again.
 */
void rlock__pool_retire(rlock__pool *pool, int retired);
/*
 * For good: nothing is sent on the pool any more (a Sentinel master the
 * client has switched from, which may still take writes): retired, slots
 * refused from now on (rlock__pool_take says RLOCK_EIO, take_idle NULL, its
 * waiters woken), and the sockets of commands in flight shut down, so a
 * thread about to write there fails before sending and one awaiting a reply
 * stops. rlock__pool_fenced says which: the caller goes to the new master.
 */
void rlock__pool_fence(rlock__pool *pool);
static inline int rlock__pool_fenced(rlock__pool *pool) {
    return atomic_load(&pool->fenced);
}
/*
 * Closes the connections idle for more than idle_ms, keeping one connected
 * (a Cluster client may touch many masters: idle connections must not add
 * up to pool_size on each for ever).
 */
void rlock__pool_close_idle(rlock__pool *pool, int64_t idle_ms);

/*
 * pool.c: a node for ep (taken over, cleared) with a pool of pool_size
 * whose connections ev names and counts; NULL if out of memory.
 */
rlock__node *rlock__node_new(rlock__endpoint *ep, int pool_size, rlock__events *ev);
/* Frees a node (no slot busy). */
void rlock__node_free(rlock__node *node);

/* ---- routing: which node runs a command for a key ------------------------------- */

/* What an error reply means for routing (rlock__route_ops.on_error). */
enum {
    RLOCK__ROUTE_NONE,          /* not the route's business */
    RLOCK__ROUTE_NOW,           /* run the command on *to now (ASKING first if *asking) */
    RLOCK__ROUTE_LATER          /* the route is finding the right node: retry after the pause */
};

typedef struct rlock__route_ops {
    const char *name;
    /* The node that serves key (NULL key: the node for keyless commands); never NULL. */
    rlock__node *(*node_for)(rlock__route *route, const char *key, size_t len);
    /*
     * An error reply from node: a redirect (Cluster's MOVED / ASK), or a sign
     * that the node is no longer the master (Sentinel: READONLY, NOREPLICAS,
     * MASTERDOWN, LOADING), which makes the route re-resolve. RLOCK__ROUTE_*.
     */
    int (*on_error)(rlock__route *route, rlock__node *node, const redisReply *error,
                    rlock__node **to, int *asking);
    /* An I/O failure on node: the route may re-resolve (NULL: nothing to do). */
    void (*suspect)(rlock__route *route, rlock__node *node);
    /*
     * The masters serving keys now (Cluster: every master with slots), at most
     * max into out; returns how many. NULL: the one node node_for(NULL) names.
     */
    int (*masters)(rlock__route *route, rlock__node **out, int max);
    /* Close began: stop the route's own thread, abort commands on every node. */
    void (*abort)(rlock__route *route);
    /* Frees the route and its nodes (no command in flight). */
    void (*destroy)(rlock__route *route);
} rlock__route_ops;

/* Every route begins with this; implementations extend it. */
struct rlock__route {
    const rlock__route_ops *ops;
    int slotted;    /* keys live on the master of their slot (Cluster); read-only */
};

/* route_single.c: every key on one server. Takes over the url's server (cleared). */
int rlock__route_single_open(rlock__url *url, const rlock__route_env *env, rlock__route **out);
/*
 * route_sentinel.c: the master the sentinels name, checked with ROLE, followed
 * through failovers. Takes over the url's parts. Finds the master before it
 * returns (RLOCK_EIO naming what each sentinel said if none could).
 */
int rlock__route_sentinel_open(rlock__url *url, const rlock__route_env *env,
                               rlock__route **out);
/*
 * route_cluster.c: each key on the master of its slot (slot.c), from the
 * CLUSTER SLOTS answer of a seed or known node; MOVED patches the table,
 * ASK redirects once; a thread refreshes the table on request and every
 * few seconds. Takes over the url's parts. Has the table before it returns
 * (RLOCK_EIO / EAUTH / EREDIS naming what each seed said if no seed gave one).
 */
int rlock__route_cluster_open(rlock__url *url, const rlock__route_env *env, rlock__route **out);

/* ---- slot.c ------------------------------------------------------------------ */

/* CRC16-XMODEM of the hash tag (the text between the first '{' and the next '}',
 * if not empty) or else of the whole key, mod 16384. */
int rlock__key_slot(const char *key, size_t len);

#endif /* RLOCK_NET_ROUTE_H */
