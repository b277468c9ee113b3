/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * route_single.c - the single-server route: every key is served by one
 * node (the url's server), and no error reply redirects.
 *
 * It is the first implementation of the routing seam (rlock__route_ops in
 * net.h); the Sentinel route (route_sentinel.c: a node that moves on
 * failover) and a Cluster route (a node per master, MOVED/ASK) are others.
 *
 * Threads: any thread asks node_for; the node is read-only after open; the
 * pool has its own mutex.
 */
#include "route.h"

typedef struct single_route {
    rlock__route base;
    rlock__node *node;          /* owned */
} single_route;

static rlock__node *single_node_for(rlock__route *route, const char *key, size_t len) {
    (void)key;
    (void)len;
    return ((single_route *)route)->node;
}

static int single_on_error(rlock__route *route, rlock__node *node, const redisReply *error,
                           rlock__node **to, int *asking) {
    (void)route;
    (void)node;
    (void)error;
    *to = NULL;
    *asking = 0;
    return RLOCK__ROUTE_NONE;
}

static void single_abort(rlock__route *route) {
    rlock__pool_abort(&((single_route *)route)->node->pool);
}

static void single_destroy(rlock__route *route) {
    rlock__node_free(((single_route *)route)->node);
    rlock__free(route);
}

static const rlock__route_ops single_ops = {
    .name = "single",
    .node_for = single_node_for,
    .on_error = single_on_error,
    .suspect = NULL,
    .abort = single_abort,
    .destroy = single_destroy,
};

int rlock__route_single_open(rlock__url *url, const rlock__route_env *env, rlock__route **out) {
    single_route *r = rlock__calloc(1, sizeof(*r));
    *out = NULL;
    if (r == NULL)
        return RLOCK_ENOMEM;
    r->node = rlock__node_new(&url->server, env->settings->pool_size, env->events);
    if (r->node == NULL) {
        rlock__free(r);
        return RLOCK_ENOMEM;
    }
    r->base.ops = &single_ops;
    *out = &r->base;
    return RLOCK_OK;
}
