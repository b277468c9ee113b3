/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.h - the Cluster route's own parts, shared by route_cluster.c (the
 * route's operations: slot lookups, redirects) and cluster_table.c (the
 * slot table: CLUSTER SLOTS, asked of the nodes by the refresh thread). Only
 * the net layer sees it.
 */
#ifndef RLOCK_CLUSTER_H
#define RLOCK_CLUSTER_H

#include "route.h"

#define CLUSTER_REFRESH_EVERY_MS 2000 /* the table is asked for this often anyway */
#define CLUSTER_REFRESH_GAP_MS 100    /* and at most this often on request */
#define CLUSTER_NODE_TIMEOUT_MS 1000  /* each step with one node while refreshing */
#define CLUSTER_REPORT_MAX 600
#define CLUSTER_IDLE_CLOSE_MS                                                                      \
    30000 /* a master's connections idle this long close                                           \
             (one per master stays) */

typedef struct rlock__cluster_node {
    rlock__node *node; /* owned */
    int master;        /* serves slots in the table in use */
} rlock__cluster_node;

typedef struct rlock__cluster {
    rlock__route base;
    const rlock__route_env *env;
    rlock__endpoint auth; /* user and password of every node; owned */
    /* The master of each slot. Entries are written by the refresh thread and by
       MOVED; nodes live until destroy, so a reader never sees a freed one. */
    _Atomic(rlock__node *) slots[RLOCK__CLUSTER_SLOTS];
    pthread_mutex_t mutex;      /* guards nodes and nnodes */
    rlock__cluster_node *nodes; /* owned; every node ever routed to (grows only) */
    size_t nnodes;
    rlock__endpoint *seeds; /* owned: the url's hosts */
    int nseeds;
    int have_table;                      /* refresh thread (open before it starts) only */
    atomic_int refresh_wanted;           /* a redirect or an I/O failure asks for a refresh */
    _Atomic(rlock__node *) refresh_from; /* ask this node first (a MOVED's target), or NULL */
    atomic_int refresh_elsewhere;        /* not the node asked last: it may be the stale one */
    unsigned rotation;                   /* refresher only: where the candidates start */
    atomic_int closing;                  /* abort began; set under mutex */
    rlock__worker refresher;             /* its mutex guards only stop */
    redisContext *ctx;                   /* refresher only: to the node that answered last */
    rlock__endpoint ctx_ep;              /* refresher only: where ctx goes; owned */
} rlock__cluster;

/*
 * The node at host:port, made (with a pool of pool_size) if new (its pool
 * aborted at once if close began); NULL if out of memory. Call with mutex held.
 */
rlock__node *rlock__cluster_node_at(rlock__cluster *r, const char *host, int port);
/*
 * Asks the node that answered last (or, when asked for a refresh, the
 * node named, else another one), then the masters, the other known nodes
 * and the seeds in turn for CLUSTER SLOTS, and takes the first
 * answer: entries patched, masters that left retired, new ones given the
 * scripts; a change of masters (a failover) posts MASTER_SWITCHED and tells
 * the net. RLOCK_OK, or the last node's status with what each said in
 * report (may be NULL).
 */
int rlock__cluster_refresh(rlock__cluster *r, char *report, size_t size);
/*
 * Asks the refresh thread for a refresh soon (any thread). from: a node
 * that surely knows (a MOVED's target), asked first; NULL: a failure at
 * some node (CLUSTERDOWN, I/O), so the node asked last -- which may be the
 * one cut off, still claiming its slots -- is not asked first.
 */
void rlock__cluster_want_refresh(rlock__cluster *r, rlock__node *from);
/* The refresh thread's body (a core worker). */
void *rlock__cluster_refresher_main(void *arg);

#endif /* RLOCK_CLUSTER_H */
