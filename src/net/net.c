/*
 * net.c - the network layer's lifetime: open (parse the url, open its
 * route, make the first connection and load the scripts), abort (close
 * began: end commands in flight and retry pauses), close (free).
 *
 * Threads: client open and close; rlock__net_closing and connect_for from
 * any thread. Locking: net->mutex only pairs with `closed` for retry pauses.
 */
#include <string.h>

#include "net.h"

/* The first connection: proves the url works and loads the scripts. */
static int first_connection(rlock__net *net) {
    const rlock__settings *s = net->settings;
    rlock__node *node = net->route->ops->node_for(net->route, NULL, 0);
    int status;
    rlock__conn *conn = rlock__pool_take(&node->pool, RLOCK__NO_DEADLINE, &status);
    if (conn == NULL)
        return status;
    status = rlock__pool_connect(conn, s->connect_timeout_ms,
                                 rlock__deadline_after(s->connect_timeout_ms));
    if (status == RLOCK_OK)
        status = rlock__scripts_load(conn->ctx, rlock__deadline_after(s->command_timeout_ms),
                                     &net->scripts);
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
    int status = rlock__parse_url(url, &u);
    if (status == RLOCK_EINVAL)
        return rlock__fail(status, 0, "malformed url (expected redis://[[user]:password@]host"
                                      "[:port][/db], unix:///path[?db=N], redis-sentinel://"
                                      "[[user]:password@]host[:port][,host[:port]...]/master"
                                      "[?db=N&sentinel_password=P] or redis-cluster://"
                                      "[[user]:password@]host[:port][,host[:port]...])");
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

int rlock__net_connect_for(rlock__net *net, const char *key, size_t len, int64_t deadline_ms,
                           redisContext **out) {
    rlock__route *route = net->route;
    rlock__node *node = route->ops->node_for(route, key, len);
    int status = rlock__connect(&node->endpoint, net->settings->connect_timeout_ms, deadline_ms,
                                out);
    if (status == RLOCK_OK) {
        rlock__link_up(net->events);
        return RLOCK_OK;
    }
    rlock__link_down(net->events, status, rlock__last_message());
    if (status == RLOCK_EIO && route->ops->suspect != NULL)
        route->ops->suspect(route, node);
    return status;
}
