/*
 * route_single.c - the single-server route: every key is served by one
 * node (the url's server), and no error reply redirects.
 *
 * It is the first implementation of the routing seam (rlock__route_ops in
 * net.h); the Sentinel route (a node that moves on failover) and the
 * Cluster route (a node per master, MOVED/ASK) are further ones.
 *
 * Threads: any thread asks node_for; the node and its endpoint are
 * read-only after open; the pool has its own mutex.
 */
#include "net.h"

typedef struct single_route {
    rlock__route base;
    rlock__node node;
} single_route;

static rlock__node *single_node_for(rlock__route *route, const char *key, size_t len) {
    (void)key;
    (void)len;
    return &((single_route *)route)->node;
}

static rlock__node *single_redirect(rlock__route *route, const redisReply *error, int *asking) {
    (void)route;
    (void)error;
    *asking = 0;
    return NULL;
}

static void single_abort(rlock__route *route) {
    rlock__pool_abort(&((single_route *)route)->node.pool);
}

static void single_destroy(rlock__route *route) {
    single_route *r = (single_route *)route;
    rlock__pool_destroy(&r->node.pool);
    rlock__endpoint_clear(&r->node.endpoint);
    rlock__free(r);
}

static const rlock__route_ops single_ops = {
    .name = "single",
    .node_for = single_node_for,
    .redirect = single_redirect,
    .abort = single_abort,
    .destroy = single_destroy,
};

int rlock__route_single_open(rlock__endpoint *ep, int pool_size, rlock__route **out) {
    single_route *r = rlock__calloc(1, sizeof(*r));
    *out = NULL;
    if (r == NULL)
        return RLOCK_ENOMEM;
    if (rlock__pool_init(&r->node.pool, &r->node, pool_size) != RLOCK_OK) {
        rlock__free(r);
        return RLOCK_ENOMEM;
    }
    r->base.ops = &single_ops;
    r->node.endpoint = *ep;
    *ep = (rlock__endpoint){0};
    *out = &r->base;
    return RLOCK_OK;
}
