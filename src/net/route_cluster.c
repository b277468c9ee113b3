/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * route_cluster.c - the Redis Cluster route: each key goes to the master of
 * its slot (slot.c), looked up in a table of 16384 node pointers that
 * cluster_table.c fills from CLUSTER SLOTS. Every master has a connection
 * pool of pool_size, connected on demand; a node that stops being a master
 * has its idle connections closed.
 *
 * Redirects (exec.c follows what on_error says, within the call):
 *   MOVED slot host:port   the slot lives there now: the entry is patched at
 *                          once and a refresh asked for (more slots may have
 *                          moved); the command goes there.
 *   ASK slot host:port     the key is being imported there: ASKING and the
 *                          command on one connection, the table unchanged.
 *   CLUSTERDOWN, TRYAGAIN  retried by exec.c with jittered back-off (the
 *                          slot is in flux); CLUSTERDOWN also asks for a refresh.
 * An I/O failure on a node asks for a refresh (its replica may be promoted).
 *
 * Unlike Redisson, which re-sends to the MOVED address but leaves the table
 * to its next scan (5 s), a MOVED patches the entry: later commands for the
 * slot go straight to the right node.
 *
 * Threads: any thread asks node_for (one atomic load), on_error and
 * suspect; the refresh thread (cluster_table.c) rebuilds the table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

static rlock__node *cluster_node_for(rlock__route *route, const char *key, size_t len) {
    rlock__cluster *r = (rlock__cluster *)route;
    return atomic_load(&r->slots[key != NULL ? rlock__key_slot(key, len) : 0]);
}

/*
 * "MOVED 3999 127.0.0.1:6381" / "ASK ...": the slot and the address (an
 * empty host is the node that answered). RLOCK_EINVAL if malformed.
 */
static int read_redirect(const char *text, const rlock__node *from, int *slot, char *host,
                         size_t size, int *port) {
    const char *p = strchr(text, ' ');
    char *end = NULL;
    if (p == NULL)
        return RLOCK_EINVAL;
    long n = strtol(p + 1, &end, 10);
    if (end == p + 1 || *end != ' ' || n < 0 || n >= RLOCK__CLUSTER_SLOTS)
        return RLOCK_EINVAL;
    const char *addr = end + 1, *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= size)
        return RLOCK_EINVAL;
    *port = atoi(colon + 1);
    if (*port <= 0 || *port > 65535)
        return RLOCK_EINVAL;
    if (colon == addr && from->endpoint.host != NULL)
        snprintf(host, size, "%s", from->endpoint.host);
    else
        snprintf(host, size, "%.*s", (int)(colon - addr), addr);
    *slot = (int)n;
    return RLOCK_OK;
}

static int cluster_on_error(rlock__route *route, rlock__node *node, const redisReply *error,
                            rlock__node **to, int *asking) {
    rlock__cluster *r = (rlock__cluster *)route;
    int moved = strncmp(error->str, "MOVED ", 6) == 0, ask = strncmp(error->str, "ASK ", 4) == 0;
    char host[256];
    int slot, port;
    *to = NULL;
    *asking = 0;
    if (!moved && !ask) {
        if (strncmp(error->str, "CLUSTERDOWN", 11) == 0)
            rlock__cluster_want_refresh(r, NULL);
        return RLOCK__ROUTE_NONE; /* exec.c retries CLUSTERDOWN and TRYAGAIN */
    }
    if (read_redirect(error->str, node, &slot, host, sizeof(host), &port) != RLOCK_OK)
        return RLOCK__ROUTE_NONE;
    pthread_mutex_lock(&r->mutex);
    rlock__node *target = rlock__cluster_node_at(r, host, port);
    pthread_mutex_unlock(&r->mutex);
    if (target == NULL)
        return RLOCK__ROUTE_LATER;
    rlock__pool_retire(&target->pool, 0); /* it serves the slot now (or imports it) */
    if (moved) {
        atomic_store(&r->slots[slot], target);
        rlock__cluster_want_refresh(r, target); /* it knows it owns the slot now */
    }
    *to = target;
    *asking = ask;
    return RLOCK__ROUTE_NOW;
}

static void cluster_suspect(rlock__route *route, rlock__node *node) {
    (void)node;
    rlock__cluster_want_refresh((rlock__cluster *)route, NULL);
}

static int cluster_masters(rlock__route *route, rlock__node **out, int max) {
    rlock__cluster *r = (rlock__cluster *)route;
    int n = 0;
    pthread_mutex_lock(&r->mutex);
    for (size_t i = 0; i < r->nnodes && n < max; i++)
        if (r->nodes[i].master)
            out[n++] = r->nodes[i].node;
    pthread_mutex_unlock(&r->mutex);
    return n;
}

static void cluster_abort(rlock__route *route) {
    rlock__cluster *r = (rlock__cluster *)route;
    pthread_mutex_lock(&r->mutex);
    atomic_store(&r->closing, 1); /* under the mutex: node_at sees it or its node is here */
    pthread_mutex_unlock(&r->mutex);
    rlock__worker_stop(&r->refresher);
    pthread_mutex_lock(&r->mutex);
    for (size_t i = 0; i < r->nnodes; i++)
        rlock__pool_abort(&r->nodes[i].node->pool);
    pthread_mutex_unlock(&r->mutex);
}

static void cluster_destroy(rlock__route *route) {
    rlock__cluster *r = (rlock__cluster *)route;
    rlock__worker_stop(&r->refresher);
    rlock__worker_destroy(&r->refresher);
    if (r->ctx != NULL)
        rlock__conn_free(r->ctx);
    rlock__endpoint_clear(&r->ctx_ep);
    for (size_t i = 0; i < r->nnodes; i++)
        rlock__node_free(r->nodes[i].node);
    rlock__free(r->nodes);
    for (int i = 0; i < r->nseeds; i++)
        rlock__endpoint_clear(&r->seeds[i]);
    rlock__free(r->seeds);
    rlock__endpoint_clear(&r->auth);
    pthread_mutex_destroy(&r->mutex);
    rlock__free(r);
}

static const rlock__route_ops cluster_ops = {
    .name = "cluster",
    .node_for = cluster_node_for,
    .on_error = cluster_on_error,
    .suspect = cluster_suspect,
    .masters = cluster_masters,
    .abort = cluster_abort,
    .destroy = cluster_destroy,
};

/* Takes over the url's parts (the url is cleared). */
static rlock__cluster *new_route(rlock__url *url, const rlock__route_env *env) {
    rlock__cluster *r = rlock__calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    if (pthread_mutex_init(&r->mutex, NULL) != 0 || rlock__worker_init(&r->refresher) != RLOCK_OK) {
        rlock__free(r); /* glibc's init cannot fail: nothing to destroy */
        return NULL;
    }
    r->base.ops = &cluster_ops;
    r->base.slotted = 1;
    r->env = env;
    r->auth = url->server;
    r->seeds = url->hosts;
    r->nseeds = url->nhosts;
    memset(url, 0, sizeof(*url));
    return r;
}

int rlock__route_cluster_open(rlock__url *url, const rlock__route_env *env, rlock__route **out) {
    char report[CLUSTER_REPORT_MAX];
    *out = NULL;
    rlock__cluster *r = new_route(url, env);
    if (r == NULL)
        return RLOCK_ENOMEM;
    int status = rlock__cluster_refresh(r, report, sizeof(report));
    if (status != RLOCK_OK) /* the last node's status, every node's story */
        status = rlock__fail(status, 0,
                             "no seed node gave the cluster's slots (CLUSTER SLOTS; "
                             "for one server use redis://): %s",
                             report);
    if (status == RLOCK_OK)
        status = rlock__worker_start(&r->refresher, rlock__cluster_refresher_main, r);
    if (status != RLOCK_OK) {
        cluster_destroy(&r->base);
        return status;
    }
    *out = &r->base;
    return RLOCK_OK;
}
