/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net.c - the network layer's lifetime: open (parse the url, open its
 * route, make the first connection, load the scripts and check that the ACL
 * lets them run), abort (close began: end commands in flight and retry
 * pauses), close (free).
 *
 * Threads: client open and close; rlock__net_closing and connect_for from
 * any thread. Locking: net->mutex only pairs with `closed` for retry pauses.
 */
#include <string.h>

#include "route.h"

/*
 * Which pub/sub unlock messages use (Redisson's shardedSubscriptionMode):
 * AUTO is sharded on a Cluster whose node answers PUBSUB SHARDNUMSUB (Redis
 * >= 7.0; the argument keeps it from hanging on some proxies, as Redisson
 * found), classic elsewhere; SHARDED insists on it.
 */
static int choose_pubsub(rlock__net *net, redisContext *ctx) {
    static const char *argv[] = {"PUBSUB", "SHARDNUMSUB", "0"};
    const rlock__settings *s = net->settings;
    redisReply *reply = NULL;
    net->sharded = 0;
    if (s->pubsub_mode == RLOCK_PUBSUB_CLASSIC ||
        (s->pubsub_mode == RLOCK_PUBSUB_AUTO && !net->route->slotted))
        return RLOCK_OK;
    rlock__node *node = net->route->ops->node_for(net->route, NULL, 0);
    int status = rlock__run_private(ctx, &node->endpoint, 3, argv,
                                    rlock__deadline_after(s->command_timeout_ms), &reply);
    if (reply != NULL)
        freeReplyObject(reply);
    net->sharded = status == RLOCK_OK;
    if (status == RLOCK_OK || s->pubsub_mode == RLOCK_PUBSUB_AUTO)
        return status == RLOCK_EIO ? status : RLOCK_OK;
    return rlock__fail(status == RLOCK_EIO ? status : RLOCK_EINVAL, 0,
                       "pubsub_mode RLOCK_PUBSUB_SHARDED, but the server has no sharded pub/sub "
                       "(Redis >= 7.0): %s", rlock__last_message());
}

/*
 * Whether the ACL lets this user run the lock scripts: EVALSHA of a sha no
 * script has is checked against the ACL before the script is looked up, so
 * the answer is NOPERM (refused) or NOSCRIPT (allowed), and nothing runs.
 * A user without EVALSHA would otherwise open fine and fail at the first
 * lock. Any other answer is no refusal: the first lock tells.
 */
static int scripts_allowed(rlock__net *net, redisContext *ctx, int64_t deadline_ms) {
    static const char *argv[] = {"EVALSHA", "0000000000000000000000000000000000000000", "0"};
    rlock__node *node = net->route->ops->node_for(net->route, NULL, 0);
    redisReply *reply = NULL;
    rlock_error_info info;
    rlock__error_detail saved;
    char at[RLOCK__WHERE_MAX];
    rlock__error_save(&saved); /* the expected NOSCRIPT is no error of the open's */
    int status = rlock__run_private(ctx, &node->endpoint, 3, argv, deadline_ms, &reply);
    if (reply != NULL)
        freeReplyObject(reply);
    if (status == RLOCK_EIO)
        return status;
    if (status != RLOCK_ENOPERM) {
        rlock__error_restore(&saved);
        return RLOCK_OK;
    }
    rlock_last_error_info(&info);
    return rlock__fail_redis(RLOCK_ENOPERM, info.redis_error,
                             "EVALSHA at %s: %s (locking runs its scripts with EVALSHA: grant "
                             "the least-privilege ACL of docs/failure-modes.md, \"Least "
                             "privilege\")",
                             rlock__endpoint_str(&node->endpoint, at, sizeof(at)),
                             info.redis_error);
}

/* The first connection: proves the url works and loads the scripts. */
static int first_connection(rlock__net *net) {
    const rlock__settings *s = net->settings;
    rlock__node *node = net->route->ops->node_for(net->route, NULL, 0);
    int status;
    rlock__conn *conn = rlock__pool_take(&node->pool, RLOCK__NO_DEADLINE, &status);
    if (conn == NULL && rlock__pool_fenced(&node->pool))
        return rlock__fail(RLOCK_EIO, 0, "the master changed while the client opened: try again");
    if (conn == NULL)
        return status;
    status = rlock__pool_connect(conn, s->connect_timeout_ms,
                                 rlock__deadline_after(s->connect_timeout_ms));
    int64_t scripts_by = rlock__deadline_after(s->command_timeout_ms); /* load and check */
    if (status == RLOCK_OK)
        status = rlock__scripts_load(conn->ctx, scripts_by, &net->scripts);
    if (status == RLOCK_OK)
        status = scripts_allowed(net, conn->ctx, scripts_by);
    if (status == RLOCK_OK)
        status = choose_pubsub(net, conn->ctx);
    rlock__pool_give(conn, status == RLOCK_OK);
    return status;
}

/*
 * The route tells of a new master: pass it on to the listener, if any. The
 * call is made under net->mutex, so that once rlock__net_on_switch(NULL)
 * returns no call is running (close unregisters before it stops threads).
 */
static void master_switched(void *arg) {
    rlock__net *net = arg;
    pthread_mutex_lock(&net->mutex);
    if (net->on_switch != NULL)
        net->on_switch(net->on_switch_arg);
    pthread_mutex_unlock(&net->mutex);
}

void rlock__net_on_switch(rlock__net *net, void (*fn)(void *arg), void *arg) {
    pthread_mutex_lock(&net->mutex);
    net->on_switch = fn;
    net->on_switch_arg = arg;
    pthread_mutex_unlock(&net->mutex);
}

static int open_route(rlock__net *net, const char *url) {
    rlock__url u;
    int status = rlock__parse_url(url, &u); /* a malformed url says what is wrong */
    if (status != RLOCK_OK)
        return status;
    if (u.kind == RLOCK__URL_SENTINEL)
        status = rlock__route_sentinel_open(&u, &net->route_env, &net->route);
    else if (u.kind == RLOCK__URL_CLUSTER)
        status = rlock__route_cluster_open(&u, &net->route_env, &net->route);
    else
        status = rlock__route_single_open(&u, &net->route_env, &net->route);
    rlock__url_clear(&u); /* what the route took over is cleared already */
    return status;
}

int rlock__net_open(rlock__net *net, const char *url, const rlock__settings *settings,
                    rlock__events *events, const rlock__script *scripts, int nscripts) {
    memset(net, 0, sizeof(*net));
    net->settings = settings;
    net->events = events;
    net->scripts.defs = scripts;
    net->scripts.count = nscripts < RLOCK__MAX_SCRIPTS ? nscripts : RLOCK__MAX_SCRIPTS;
    net->route_env = (rlock__route_env){.settings = settings, .events = events,
                                        .scripts = &net->scripts, .switched = master_switched,
                                        .arg = net};
    if (pthread_mutex_init(&net->mutex, NULL) != 0)
        return RLOCK_ENOMEM;
    if (rlock__cond_init(&net->closed) != 0) {
        pthread_mutex_destroy(&net->mutex);
        return RLOCK_ENOMEM;
    }
    net->initialised = 1;
    int status = open_route(net, url);
    return status == RLOCK_OK ? first_connection(net) : status;
}

int rlock__net_closing(rlock__net *net) {
    return atomic_load(&net->closing);
}

void rlock__net_abort(rlock__net *net) {
    if (!net->initialised)
        return;
    pthread_mutex_lock(&net->mutex);
    atomic_store(&net->closing, 1);
    pthread_cond_broadcast(&net->closed);
    pthread_mutex_unlock(&net->mutex);
    if (net->route != NULL)
        net->route->ops->abort(net->route);
}

void rlock__net_close(rlock__net *net) {
    if (!net->initialised)
        return;
    if (net->route != NULL)
        net->route->ops->destroy(net->route);
    net->route = NULL;
    pthread_cond_destroy(&net->closed);
    pthread_mutex_destroy(&net->mutex);
    net->initialised = 0;
}

rlock__node *rlock__net_subscribe_node(rlock__net *net, const char *channel, size_t len) {
    rlock__route *route = net->route;
    return route->ops->node_for(route, channel, len);
}

const rlock__endpoint *rlock__net_node_endpoint(const rlock__node *node) {
    return &node->endpoint;
}

int rlock__net_connect_node(rlock__net *net, rlock__node *node, int64_t deadline_ms,
                            redisContext **out) {
    rlock__route *route = net->route;
    int status = rlock__connect(&node->endpoint, net->events, net->settings->connect_timeout_ms,
                                deadline_ms, out);
    if (status == RLOCK_OK) {
        rlock__link_up(net->events);
        return RLOCK_OK;
    }
    rlock__link_down(net->events, status, rlock__last_message());
    if (status == RLOCK_EIO && route->ops->suspect != NULL)
        route->ops->suspect(route, node);
    return status;
}

void rlock__net_subscription_moved(rlock__net *net, rlock__node *node, const redisReply *reply) {
    rlock__route *route = net->route;
    rlock__node *to = NULL;
    int asking = 0;
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR &&
        route->ops->on_error(route, node, reply, &to, &asking) != RLOCK__ROUTE_NONE)
        return; /* a MOVED patched the table */
    if (route->ops->suspect != NULL)
        route->ops->suspect(route, node);
}

int rlock__net_hears(const rlock__net *net, const char *key, size_t key_len, const char *channel,
                     size_t channel_len) {
    return !net->sharded || !net->route->slotted ||
           rlock__key_slot(key, key_len) == rlock__key_slot(channel, channel_len);
}

int rlock__net_masters(rlock__net *net, rlock__node **out, int max) {
    rlock__route *route = net->route;
    if (max <= 0)
        return 0;
    if (route->ops->masters != NULL)
        return route->ops->masters(route, out, max);
    out[0] = route->ops->node_for(route, NULL, 0);
    return 1;
}

int rlock__net_slot_of(const rlock__net *net, const char *key, size_t len) {
    return net->route->slotted ? rlock__key_slot(key, len) : -1;
}

int rlock__net_same_slot(const rlock__net *net, const char *a, size_t a_len, const char *b,
                         size_t b_len) {
    return !net->route->slotted || rlock__key_slot(a, a_len) == rlock__key_slot(b, b_len);
}

const void *rlock__net_node_of(rlock__net *net, const char *key, size_t len) {
    return net->route->ops->node_for(net->route, key, len);
}

const char *rlock__net_server(rlock__net *net, const char *key, size_t len, char *buf,
                              size_t size) {
    rlock__node *node = net->route->ops->node_for(net->route, key, len);
    if (!rlock__pool_peer(&node->pool, buf, size))
        rlock__endpoint_str(&node->endpoint, buf, size);
    return buf;
}

const char *rlock__net_where(rlock__net *net, const char *key, size_t len, char *buf, size_t size) {
    const rlock__node *node = net->route->ops->node_for(net->route, key, len);
    char at[RLOCK__WHERE_MAX];
    snprintf(buf, size, "%s/%d", rlock__net_server(net, key, len, at, sizeof(at)),
             node->endpoint.db);
    return buf;
}

int rlock__net_sharded(const rlock__net *net) {
    return net->sharded;
}

const char *rlock__net_publish_verb(const rlock__net *net, const char *key, size_t key_len,
                                    const char *channel, size_t channel_len) {
    return net->sharded && rlock__net_hears(net, key, key_len, channel, channel_len) ? "spublish"
                                                                                      : "publish";
}

int rlock__net_publish(rlock__net *net, const char *verb, const char *channel,
                       size_t channel_len, const char *payload, int64_t deadline_ms) {
    const char *argv[] = {verb, channel, payload};
    size_t argvlen[] = {strlen(verb), channel_len, strlen(payload)};
    rlock__cmd cmd = {.script = -1, .argc = 3, .argv = argv, .argvlen = argvlen};
    redisReply *reply = NULL;
    int status = rlock__exec(net, &cmd, deadline_ms, &reply, NULL);
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}
