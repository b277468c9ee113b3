/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_table.c - the Cluster route's slot table: CLUSTER SLOTS asked of
 * one node at a time (the one that answered last first, so a refresh is
 * one round trip on a kept connection), each master's range written into
 * the 16384 entries, and what a change of masters means: former masters'
 * pools retired, new masters given the scripts before use, MASTER_SWITCHED
 * posted and the net told (the watchdog renews at once, waiters subscribe
 * again). A slot moving between two masters that stay masters is no
 * switch: MOVED and the sharded `sunsubscribe` take care of it.
 *
 * The same thread closes connections idle for CLUSTER_IDLE_CLOSE_MS, so a
 * client that once used many connections to many masters does not keep them.
 *
 * Threads: the refresh thread (and open, before it starts) refreshes; any
 * thread may ask for a refresh. Locking: the route's mutex guards the node
 * list while it is read or grown; no mutex is held during I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

rlock__node *rlock__cluster_node_at(rlock__cluster *r, const char *host, int port) {
    rlock__endpoint ep;
    for (size_t i = 0; i < r->nnodes; i++)
        if (rlock__endpoint_is(&r->nodes[i].node->endpoint, host, port))
            return r->nodes[i].node;
    rlock__cluster_node *grown = rlock__malloc((r->nnodes + 1) * sizeof(*grown));
    if (grown == NULL ||
        rlock__endpoint_set(&ep, host, port, r->auth.user, r->auth.password, 0) != RLOCK_OK) {
        rlock__free(grown);
        return NULL;
    }
    rlock__node *node = rlock__node_new(&ep, r->env->settings->pool_size, r->env->events);
    if (node == NULL) {
        rlock__endpoint_clear(&ep);
        rlock__free(grown);
        return NULL;
    }
    if (r->nnodes > 0)
        memcpy(grown, r->nodes, r->nnodes * sizeof(*grown));
    rlock__free(r->nodes);
    r->nodes = grown;
    r->nodes[r->nnodes++] = (rlock__cluster_node){.node = node, .master = 0};
    if (atomic_load(&r->closing)) /* a redirect after abort: no command may wait on it */
        rlock__pool_abort(&node->pool);
    return node;
}

/* ---- asking a node --------------------------------------------------------------- */

/* CLUSTER SLOTS from the node at ep, on the kept connection if it goes there. */
static int ask_slots(rlock__cluster *r, const rlock__endpoint *ep, redisReply **reply) {
    static const char *argv[] = {"CLUSTER", "SLOTS"};
    const rlock__settings *s = r->env->settings;
    int timeout = s->connect_timeout_ms < CLUSTER_NODE_TIMEOUT_MS ? s->connect_timeout_ms
                                                                  : CLUSTER_NODE_TIMEOUT_MS;
    int status = RLOCK_OK;
    if (r->ctx != NULL && !rlock__endpoint_is(&r->ctx_ep, ep->host, ep->port)) {
        rlock__conn_free(r->ctx);
        r->ctx = NULL;
    }
    if (r->ctx == NULL) {
        rlock__endpoint_clear(&r->ctx_ep);
        status =
            rlock__endpoint_set(&r->ctx_ep, ep->host, ep->port, r->auth.user, r->auth.password, 0);
        if (status == RLOCK_OK)
            status = rlock__connect(&r->ctx_ep, r->env->events, timeout,
                                    rlock__deadline_after(timeout), &r->ctx);
    }
    if (status == RLOCK_OK)
        status = rlock__run_private(r->ctx, &r->ctx_ep, 2, argv,
                                    rlock__deadline_after(CLUSTER_NODE_TIMEOUT_MS), reply);
    if (status != RLOCK_OK && r->ctx != NULL) {
        rlock__conn_free(r->ctx);
        r->ctx = NULL;
    }
    return status;
}

/*
 * Where to ask, in order (copies): first (may be NULL), the masters -- from
 * the rotation-th on when a node failed, so that not always the same one is
 * asked --, the other nodes, the seeds.
 */
static int candidates(rlock__cluster *r, const rlock__node *first, unsigned rotation,
                      rlock__endpoint **out, int *count) {
    pthread_mutex_lock(&r->mutex);
    size_t cap = 1 + r->nnodes + (size_t)r->nseeds, n = 0, nodes = r->nnodes;
    rlock__endpoint *list = rlock__calloc(cap, sizeof(*list));
    int status = list == NULL ? RLOCK_ENOMEM : RLOCK_OK;
    if (first != NULL && status == RLOCK_OK)
        status = rlock__endpoint_set(&list[n++], first->endpoint.host, first->endpoint.port, NULL,
                                     NULL, 0);
    for (int pass = 0; pass < 2 && status == RLOCK_OK; pass++)
        for (size_t k = 0; k < nodes && status == RLOCK_OK; k++) {
            const rlock__cluster_node *cn = &r->nodes[(k + rotation) % nodes];
            if (cn->master == (pass == 0))
                status = rlock__endpoint_set(&list[n++], cn->node->endpoint.host,
                                             cn->node->endpoint.port, NULL, NULL, 0);
        }
    for (int i = 0; i < r->nseeds && status == RLOCK_OK; i++)
        status = rlock__endpoint_set(&list[n++], r->seeds[i].host, r->seeds[i].port, NULL, NULL, 0);
    pthread_mutex_unlock(&r->mutex);
    *out = list;
    *count = (int)n;
    return status;
}

static void free_candidates(rlock__endpoint *list, int count) {
    for (int i = 0; list != NULL && i < count; i++)
        rlock__endpoint_clear(&list[i]);
    rlock__free(list);
}

/* ---- reading the answer --------------------------------------------------------- */

/* One CLUSTER SLOTS entry: [start, end, [host, port, id...], replicas...]. */
static int read_range(const redisReply *e, int *start, int *end, const char **host, int *port) {
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER)
        return RLOCK_EREDIS;
    const redisReply *master = e->element[2];
    if (master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        master->element[0]->type != REDIS_REPLY_STRING ||
        master->element[1]->type != REDIS_REPLY_INTEGER)
        return RLOCK_EREDIS;
    *start = (int)e->element[0]->integer;
    *end = (int)e->element[1]->integer;
    *host = master->element[0]->str;
    *port = (int)master->element[1]->integer;
    if (*start < 0 || *end < *start || *end >= RLOCK__CLUSTER_SLOTS || *port <= 0 || *port > 65535)
        return RLOCK_EREDIS;
    return RLOCK_OK;
}

/*
 * Fills table (a copy of the one in use) with each range's master; a slot
 * no range names gets the first node, which answers CLUSTERDOWN for it.
 * Mutex held.
 */
static int read_ranges(rlock__cluster *r, const redisReply *reply, const char *asked_host,
                       rlock__node **table) {
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0)
        return rlock__fail(RLOCK_EREDIS, 0,
                           "CLUSTER SLOTS: no slot is served (cluster not "
                           "set up?)");
    for (size_t i = 0; i < reply->elements; i++) {
        int start, end, port;
        const char *host;
        if (read_range(reply->element[i], &start, &end, &host, &port) != RLOCK_OK)
            return rlock__fail(RLOCK_EREDIS, 0, "CLUSTER SLOTS: malformed answer");
        /* An unknown endpoint ("" or "?") is the node we asked (cluster-preferred-endpoint). */
        if (host[0] == '\0' || strcmp(host, "?") == 0)
            host = asked_host;
        rlock__node *node = rlock__cluster_node_at(r, host, port);
        if (node == NULL)
            return RLOCK_ENOMEM;
        for (int slot = start; slot <= end; slot++)
            table[slot] = node;
    }
    /* A slot no master serves (yet): any node, which answers CLUSTERDOWN for it. */
    for (int slot = 0; slot < RLOCK__CLUSTER_SLOTS; slot++)
        if (table[slot] == NULL)
            table[slot] = r->nodes[0].node;
    return RLOCK_OK;
}

/* Appends "+host:port" / "-host:port" to detail for each master that came or went. */
static void describe(char *detail, size_t size, const rlock__node *node, int came) {
    char where[RLOCK__WHERE_MAX];
    size_t used = strlen(detail);
    if (used + 2 < size)
        snprintf(detail + used, size - used, "%s%c%s", used > 0 ? " " : "", came ? '+' : '-',
                 rlock__endpoint_str(&node->endpoint, where, sizeof(where)));
}

/* Gives a new master the scripts on a connection its pool then keeps. */
static void prepare_master(rlock__cluster *r, rlock__node *node) {
    const rlock__settings *s = r->env->settings;
    redisContext *ctx = NULL;
    if (rlock__connect(&node->endpoint, r->env->events, s->connect_timeout_ms,
                       rlock__deadline_after(CLUSTER_NODE_TIMEOUT_MS), &ctx) != RLOCK_OK)
        return; /* commands find out; EVALSHA falls back to EVAL on NOSCRIPT */
    rlock__script_set scripts = *r->env->scripts; /* its own copy: loading writes the SHA1s */
    if (rlock__scripts_load(ctx, rlock__deadline_after(CLUSTER_NODE_TIMEOUT_MS), &scripts) ==
        RLOCK_OK)
        rlock__pool_seed(&node->pool, ctx);
    else
        rlock__conn_free(ctx);
}

/* Marks in serves[i] each node i that the table names for some slot. Mutex held. */
static void mark_serving(const rlock__cluster *r, rlock__node *const *table, char *serves) {
    for (int slot = 0; slot < RLOCK__CLUSTER_SLOTS; slot++) {
        if (slot > 0 && table[slot] == table[slot - 1])
            continue; /* ranges: one look-up per run */
        for (size_t i = 0; i < r->nnodes; i++)
            if (r->nodes[i].node == table[slot])
                serves[i] = 1;
    }
}

/*
 * Takes table as the one in use: the entries, each node's master flag, the
 * pools of masters that left retired. Puts the masters that came in came
 * (nnodes entries) and describes the change. Mutex held.
 */
static size_t adopt(rlock__cluster *r, rlock__node **table, char *serves, rlock__node **came,
                    char *detail, size_t size) {
    size_t ncame = 0;
    for (int slot = 0; slot < RLOCK__CLUSTER_SLOTS; slot++)
        atomic_store(&r->slots[slot], table[slot]);
    mark_serving(r, table, serves);
    for (size_t i = 0; i < r->nnodes; i++) {
        rlock__cluster_node *cn = &r->nodes[i];
        if (serves[i] == cn->master)
            continue;
        cn->master = serves[i];
        rlock__pool_retire(&cn->node->pool, !cn->master);
        if (cn->master)
            came[ncame++] = cn->node;
        describe(detail, size, cn->node, cn->master);
    }
    return ncame;
}

/* Tells of a change of masters (not on the first table: nothing changed then). */
static void tell_switch(rlock__cluster *r, const char *detail) {
    if (!r->have_table || detail[0] == '\0')
        return;
    rlock__event_post(r->env->events, RLOCK_EVENT_MASTER_SWITCHED, NULL, 0, -1, RLOCK_OK, detail);
    r->env->switched(r->env->arg);
}

/* Takes a CLUSTER SLOTS answer from asked_host. */
static int take_answer(rlock__cluster *r, const redisReply *reply, const char *asked_host) {
    char detail[CLUSTER_REPORT_MAX] = "";
    rlock__node **table = rlock__malloc(RLOCK__CLUSTER_SLOTS * sizeof(*table));
    rlock__node **came = NULL;
    char *serves = NULL;
    size_t ncame = 0;
    if (table == NULL)
        return RLOCK_ENOMEM;
    for (int slot = 0; slot < RLOCK__CLUSTER_SLOTS; slot++)
        table[slot] = atomic_load(&r->slots[slot]);
    pthread_mutex_lock(&r->mutex);
    int status = read_ranges(r, reply, asked_host, table);
    if (status == RLOCK_OK) {
        came = rlock__calloc(r->nnodes, sizeof(*came));
        serves = rlock__calloc(r->nnodes, 1);
        status = came == NULL || serves == NULL ? RLOCK_ENOMEM : RLOCK_OK;
    }
    if (status == RLOCK_OK)
        ncame = adopt(r, table, serves, came, detail, sizeof(detail));
    pthread_mutex_unlock(&r->mutex);
    for (size_t i = 0; i < ncame; i++)
        prepare_master(r, came[i]);
    if (status == RLOCK_OK)
        tell_switch(r, detail);
    rlock__free(serves);
    rlock__free(came);
    rlock__free(table);
    return status;
}

/* Asks the node at ep and takes its answer. */
static int refresh_from(rlock__cluster *r, const rlock__endpoint *ep) {
    redisReply *reply = NULL;
    int status = ask_slots(r, ep, &reply);
    if (status != RLOCK_OK)
        return status;
    status = take_answer(r, reply, ep->host);
    freeReplyObject(reply);
    return status;
}

int rlock__cluster_refresh(rlock__cluster *r, char *report, size_t size) {
    rlock__endpoint *list = NULL;
    int count = 0, used = 0;
    char where[RLOCK__WHERE_MAX];
    rlock__node *first = atomic_exchange(&r->refresh_from, NULL);
    int elsewhere = atomic_exchange(&r->refresh_elsewhere, 0);
    int status = candidates(r, first, elsewhere ? r->rotation++ : 0, &list, &count);
    if (report != NULL && size > 0)
        report[0] = '\0';
    if (status != RLOCK_OK) {
        free_candidates(list, count);
        return status;
    }
    status = rlock__fail(RLOCK_EIO, 0, "no node to ask for CLUSTER SLOTS");
    /* The node that answered last first: one round trip on a kept connection. */
    int kept_first = r->ctx != NULL && first == NULL && !elsewhere;
    for (int i = kept_first ? -1 : 0; status != RLOCK_OK && i < count; i++) {
        if (atomic_load(&r->closing))
            break;
        const rlock__endpoint *ep = i < 0 ? &r->ctx_ep : &list[i];
        status = refresh_from(r, ep);
        if (status == RLOCK_OK)
            r->have_table = 1;
        else if (report != NULL && used < (int)size)
            used += snprintf(report + used, size - (size_t)used, "%s%s: %s", used > 0 ? "; " : "",
                             rlock__endpoint_str(ep, where, sizeof(where)), rlock__last_message());
    }
    free_candidates(list, count);
    return status;
}

/* ---- the refresh thread ----------------------------------------------------------- */

void rlock__cluster_want_refresh(rlock__cluster *r, rlock__node *from) {
    if (from != NULL)
        atomic_store(&r->refresh_from, from);
    else
        atomic_store(&r->refresh_elsewhere, 1);
    if (atomic_exchange(&r->refresh_wanted, 1))
        return; /* already asked */
    pthread_mutex_lock(&r->refresher.mutex);
    pthread_cond_signal(&r->refresher.wake);
    pthread_mutex_unlock(&r->refresher.mutex);
}

/* Each pool keeps the connections its peak needed: close those idle for long. */
static void close_idle(rlock__cluster *r) {
    pthread_mutex_lock(&r->mutex);
    for (size_t i = 0; i < r->nnodes; i++)
        rlock__pool_close_idle(&r->nodes[i].node->pool, CLUSTER_IDLE_CLOSE_MS);
    pthread_mutex_unlock(&r->mutex);
}

void *rlock__cluster_refresher_main(void *arg) {
    rlock__cluster *r = arg;
    rlock__worker *w = &r->refresher;
    int64_t last = rlock__now_ms();
    pthread_setname_np(pthread_self(), "rlock-cluster");
    pthread_mutex_lock(&w->mutex);
    while (!w->stop) {
        int64_t due = atomic_load(&r->refresh_wanted) ? last + CLUSTER_REFRESH_GAP_MS
                                                      : last + CLUSTER_REFRESH_EVERY_MS;
        if (rlock__now_ms() < due) {
            rlock__cond_wait_until(&w->wake, &w->mutex, due);
            continue;
        }
        atomic_store(&r->refresh_wanted, 0);
        pthread_mutex_unlock(&w->mutex);
        if (rlock__cluster_refresh(r, NULL, 0) != RLOCK_OK)
            atomic_store(&r->refresh_wanted, 1); /* no node answered: ask again soon */
        close_idle(r);
        pthread_mutex_lock(&w->mutex);
        last = rlock__now_ms();
    }
    pthread_mutex_unlock(&w->mutex);
    return NULL;
}
