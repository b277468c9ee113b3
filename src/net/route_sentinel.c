/*
 * route_sentinel.c - the Sentinel route: every key is served by the master
 * that the sentinels name for the url's master name, followed through
 * failovers.
 *
 * Finding the master (resolve): the sentinels are asked in turn, the one
 * that answered last first, each with a short time bound, for SENTINEL
 * MASTER (its address and config epoch: a sentinel that has not heard of the
 * last failover names the old master under an older epoch, and is not
 * followed back); SENTINEL SENTINELS adds the peers it knows to the list. A master not used before is trusted only after it
 * answers ROLE with "master" (an old master keeps accepting writes for
 * seconds after a failover: never use what a sentinel has not confirmed and
 * the server itself does not claim), and gets the scripts loaded (the
 * script cache is not replicated) before any command goes to it.
 *
 * Learning of a failover: the route's own monitor thread subscribes to
 * +switch-master on one sentinel and asks the sentinels again about once a
 * second; an I/O failure of the master's connections (suspect) makes it ask
 * at once, and an error reply that says the node is no longer a writable
 * master (READONLY, NOREPLICAS, MASTERDOWN, LOADING) makes the command's own
 * thread resolve before its retry (on_error). Why a thread of the route's,
 * not the subscriber's: topology is the routing seam's business, and the
 * engine above stays the same for every route.
 *
 * On a switch: a new node (pool) becomes the master; the old node is
 * retired (its idle connections close, busy ones when given back) and kept
 * until the route is destroyed, so a thread still using it never touches
 * freed memory; the net's listener is told (the engine resubscribes and
 * renews at once) and RLOCK_EVENT_MASTER_SWITCHED is posted.
 *
 * Threads: the monitor thread; application and watchdog threads (node_for,
 * on_error, suspect); client open and close. Locking: `mutex` guards the
 * sentinel list and the retired nodes; `master` is an atomic pointer (read
 * on every command); `resolve_mutex` lets one thread resolve at a time (a
 * thread that finds it taken does not wait: the other's answer serves it).
 */
#include <poll.h>
#include <string.h>

#include "sentinel.h"

/*
 * Resolves unless another thread is at it or did so less than
 * RESOLVE_GAP_MS ago (then its answer serves). 1 if this call resolved.
 */
static int resolve_now(rlock__sentinel *r) {
    char report[REPORT_MAX];
    if (pthread_mutex_trylock(&r->resolve_mutex) != 0)
        return 0;
    int due = rlock__now_ms() - r->last_resolve_ms >= RESOLVE_GAP_MS;
    if (due) { /* a failed resolve is not the command's error: the command retries */
        rlock__sentinel_resolve(r, report, sizeof(report));
        r->last_resolve_ms = rlock__now_ms();
    }
    pthread_mutex_unlock(&r->resolve_mutex);
    return due;
}

/* ---- the monitor thread ------------------------------------------------------------- */

/* Subscribes to +switch-master on one of the sentinels (best effort). */
static void watch_switches(rlock__sentinel *r) {
    static const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    rlock__endpoint ep;
    for (int i = 0; r->events == NULL && rlock__sentinel_at(r, i, &ep) == RLOCK_OK; i++) {
        int64_t deadline_ms = rlock__deadline_after(SENTINEL_TIMEOUT_MS);
        redisReply *reply = NULL;
        if (rlock__connect(&ep, SENTINEL_TIMEOUT_MS, deadline_ms, &r->events) == RLOCK_OK &&
            rlock__sentinel_run(r->events, &ep, 2, argv, deadline_ms, &reply) != RLOCK_OK) {
            redisFree(r->events);
            r->events = NULL;
        }
        if (reply != NULL)
            freeReplyObject(reply);
        rlock__endpoint_clear(&ep);
    }
}

/* 1 if a +switch-master message names our master. */
static int names_our_master(const rlock__sentinel *r, const redisReply *m) {
    size_t len = strlen(r->master_name);
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[2]->type != REDIS_REPLY_STRING)
        return 0;
    const char *payload = m->element[2]->str; /* "<name> <old ip> <old port> <new ip> <new port>" */
    return strncmp(payload, r->master_name, len) == 0 && payload[len] == ' ';
}

/* Waits up to timeout_ms for +switch-master; 1 if one about our master came. */
static int heard_switch(rlock__sentinel *r, int timeout_ms) {
    struct pollfd pfd = {.fd = r->events != NULL ? r->events->fd : -1, .events = POLLIN};
    int heard = 0;
    if (r->events == NULL) {
        poll(NULL, 0, timeout_ms);
        return 0;
    }
    if (poll(&pfd, 1, timeout_ms) <= 0)
        return 0;
    if (redisBufferRead(r->events) != REDIS_OK) {
        redisFree(r->events); /* a dead sentinel: another one next tick */
        r->events = NULL;
        return 1;
    }
    for (void *raw = NULL; redisGetReplyFromReader(r->events, &raw) == REDIS_OK && raw != NULL;) {
        heard |= names_our_master(r, raw);
        freeReplyObject(raw);
        raw = NULL;
    }
    return heard;
}

static void *monitor_main(void *arg) {
    rlock__sentinel *r = arg;
    rlock__worker *w = &r->monitor;
    int64_t next_poll = rlock__now_ms() + POLL_INTERVAL_MS;
    pthread_setname_np(pthread_self(), "rlock-sentinel");
    pthread_mutex_lock(&w->mutex);
    while (!w->stop) {
        pthread_mutex_unlock(&w->mutex);
        if (r->events == NULL)
            watch_switches(r);
        int heard = heard_switch(r, MONITOR_TICK_MS);
        if (heard || atomic_exchange(&r->resolve_wanted, 0) || rlock__now_ms() >= next_poll) {
            pthread_mutex_lock(&r->resolve_mutex);
            char report[REPORT_MAX];
            rlock__sentinel_resolve(r, report, sizeof(report));
            r->last_resolve_ms = rlock__now_ms();
            pthread_mutex_unlock(&r->resolve_mutex);
            next_poll = rlock__now_ms() + POLL_INTERVAL_MS;
        }
        pthread_mutex_lock(&w->mutex);
    }
    pthread_mutex_unlock(&w->mutex);
    if (r->events != NULL)
        redisFree(r->events);
    r->events = NULL;
    return NULL;
}

/* ---- the route's operations ------------------------------------------------------- */

static rlock__node *sentinel_node_for(rlock__route *route, const char *key, size_t len) {
    (void)key;
    (void)len;
    return atomic_load(&((rlock__sentinel *)route)->master);
}

/* Replies of a server that is not (or no longer) a writable master. */
static int says_not_master(const redisReply *error) {
    static const char *const prefixes[] = {"READONLY", "NOREPLICAS", "MASTERDOWN", "LOADING"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(error->str, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

static int sentinel_on_error(rlock__route *route, rlock__node *node, const redisReply *error,
                             rlock__node **to, int *asking) {
    rlock__sentinel *r = (rlock__sentinel *)route;
    *asking = 0;
    *to = NULL;
    if (!says_not_master(error))
        return RLOCK__ROUTE_NONE;
    resolve_now(r);
    rlock__node *master = atomic_load(&r->master);
    if (master == node)
        return RLOCK__ROUTE_LATER; /* not moved (yet): the retry pause, then again */
    *to = master;
    return RLOCK__ROUTE_NOW;
}

static void sentinel_suspect(rlock__route *route, rlock__node *node) {
    rlock__sentinel *r = (rlock__sentinel *)route;
    if (node == atomic_load(&r->master))
        atomic_store(&r->resolve_wanted, 1);
}

static void sentinel_abort(rlock__route *route) {
    rlock__sentinel *r = (rlock__sentinel *)route;
    atomic_store(&r->closing, 1);
    rlock__worker_stop(&r->monitor);
    rlock__node *master = atomic_load(&r->master);
    if (master != NULL)
        rlock__pool_abort(&master->pool);
    pthread_mutex_lock(&r->mutex);
    for (size_t i = 0; i < r->nretired; i++)
        rlock__pool_abort(&r->retired[i]->pool);
    pthread_mutex_unlock(&r->mutex);
}

static void sentinel_destroy(rlock__route *route) {
    rlock__sentinel *r = (rlock__sentinel *)route;
    rlock__worker_stop(&r->monitor);
    rlock__worker_destroy(&r->monitor);
    rlock__node_free(atomic_load(&r->master));
    for (size_t i = 0; i < r->nretired; i++)
        rlock__node_free(r->retired[i]);
    rlock__free(r->retired);
    for (int i = 0; i < r->nsentinels; i++)
        rlock__endpoint_clear(&r->sentinels[i]);
    rlock__endpoint_clear(&r->master_auth);
    rlock__free(r->master_name);
    rlock__free(r->sentinel_user);
    rlock__free(r->sentinel_password);
    pthread_mutex_destroy(&r->resolve_mutex);
    pthread_mutex_destroy(&r->mutex);
    rlock__free(r);
}

static const rlock__route_ops sentinel_ops = {
    .name = "sentinel",
    .node_for = sentinel_node_for,
    .on_error = sentinel_on_error,
    .suspect = sentinel_suspect,
    .abort = sentinel_abort,
    .destroy = sentinel_destroy,
};

/* Takes over the url's parts (the url keeps what was not taken: nothing). */
static rlock__sentinel *new_route(rlock__url *url, const rlock__route_env *env) {
    rlock__sentinel *r = rlock__calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    if (pthread_mutex_init(&r->mutex, NULL) != 0 ||
        pthread_mutex_init(&r->resolve_mutex, NULL) != 0) {
        rlock__free(r); /* glibc's init cannot fail: nothing to destroy */
        return NULL;
    }
    r->base.ops = &sentinel_ops;
    r->env = env;
    r->master_name = url->master_name;
    r->sentinel_user = url->sentinel_user;
    r->sentinel_password = url->sentinel_password;
    r->master_auth = url->server;
    r->nsentinels = url->nsentinels;
    /* host and port only: sentinel_at adds the sentinel credentials to a copy */
    memcpy(r->sentinels, url->sentinels, (size_t)url->nsentinels * sizeof(*r->sentinels));
    rlock__free(url->sentinels);
    memset(url, 0, sizeof(*url));
    r->last_resolve_ms = rlock__now_ms() - RESOLVE_GAP_MS;
    return r;
}

int rlock__route_sentinel_open(rlock__url *url, const rlock__route_env *env,
                               rlock__route **out) {
    char report[REPORT_MAX];
    *out = NULL;
    rlock__sentinel *r = new_route(url, env);
    if (r == NULL)
        return RLOCK_ENOMEM;
    int status = rlock__sentinel_resolve(r, report, sizeof(report));
    if (status != RLOCK_OK) /* the last sentinel's status, every sentinel's story */
        status = rlock__fail(status, 0, "no sentinel named a usable master '%.100s': %s",
                             r->master_name, report);
    if (status == RLOCK_OK)
        status = rlock__worker_start(&r->monitor, monitor_main, r);
    if (status != RLOCK_OK) {
        sentinel_destroy(&r->base);
        return status;
    }
    *out = &r->base;
    return RLOCK_OK;
}
