/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * route_sentinel.c - the Sentinel route: every key is served by the master
 * that the sentinels name for the url's master name, followed through
 * failovers.
 *
 * Finding the master (resolve): every sentinel is asked, each with a short
 * time bound, for SENTINEL MASTER (its address and config epoch), and the
 * answer of the highest epoch is taken (a sentinel that has not heard of the
 * last failover names the old master under an older epoch, and is not
 * followed back); SENTINEL SENTINELS adds the peers it knows to the list. A
 * master not used before is trusted only after it answers ROLE with
 * "master" (an old master keeps accepting writes for seconds after a
 * failover: never use what a sentinel has not confirmed and the server
 * itself does not claim) and the sentinels still name it when asked again
 * after that (the ROLE check may have waited on a paused master while they
 * promoted a replica), and gets the scripts loaded (the script cache is not
 * replicated) before any command goes to it.
 *
 * Learning of a failover: the route's own monitor thread subscribes to
 * +switch-master and +selected-slave on up to four sentinels and polls about
 * once a second: one sentinel, the next in turn (asking every one from each
 * of many clients every second multiplied each sentinel's connections by
 * their number), and every sentinel only if its answer differs from the
 * master in use (another address or config epoch), or while that master is
 * left or a promotion not yet confirmed. A failover event, open and
 * resolve_wanted ask every sentinel. +selected-slave comes from the
 * sentinel leading a failover and names the replica it is promoting: the
 * monitor then asks that replica's ROLE every 10 ms and adopts it as soon
 * as it says master (about a second before the sentinels name it), one
 * epoch above the old master, so that a sentinel still naming the old
 * master is not followed back; a sentinel that names it later confirms it
 * (and one that still does not after 10 s makes it a wrong guess); an I/O failure of the master's connections (suspect) makes it ask
 * at once, and an error reply that says the node is no longer a writable
 * master (READONLY, NOREPLICAS, MASTERDOWN, LOADING) makes the command's own
 * thread resolve before its retry (on_error). Why a thread of the route's,
 * not the subscriber's: topology is the routing seam's business, and the
 * engine above stays the same for every route.
 *
 * On a switch: a new node (pool) becomes the master; the old node is
 * fenced (rlock__pool_fence: nothing is sent there any more, commands in
 * flight there go to the new master) and kept until the route is
 * destroyed, so a thread still using it never touches freed memory; the net's listener is told (the engine resubscribes and
 * renews at once) and RLOCK_EVENT_MASTER_SWITCHED is posted.
 *
 * Threads: the monitor thread; application and watchdog threads (node_for,
 * on_error, suspect); client open and close. Locking: `mutex` guards the
 * sentinel list and the retired nodes; `master` is an atomic pointer (read
 * on every command); `resolve_mutex` lets one thread resolve at a time (a
 * thread that finds it taken does not wait: the other's answer serves it).
 * Command threads never resolve: they ask the monitor (resolve_wanted).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel.h"

/* ---- the monitor thread ------------------------------------------------------------- */

#define PROMOTION_POLL_MS 10     /* a replica being promoted: ROLE this often */
#define PROMOTION_WATCH_MS 5000  /* ... for at most this long */

/* Subscribes to the failover events on each of the first sentinels not heard yet. */
static void watch_events(rlock__sentinel *r) {
    static const char *argv[] = {"SUBSCRIBE", "+switch-master", "+selected-slave"};
    rlock__endpoint ep;
    for (int i = 0; i < RLOCK__EVENT_SENTINELS && !atomic_load(&r->closing); i++) {
        if (r->events[i] != NULL || rlock__sentinel_quiet(r, i) ||
            rlock__sentinel_at(r, i, 0, &ep) != RLOCK_OK)
            continue;
        int64_t asked_ms = rlock__now_ms(), deadline_ms = asked_ms + SENTINEL_TIMEOUT_MS;
        redisReply *reply = NULL;
        int status = rlock__connect(&ep, r->env->events, SENTINEL_TIMEOUT_MS, deadline_ms,
                                    &r->events[i]);
        if (status == RLOCK_OK)
            status = rlock__run_private(r->events[i], &ep, 3, argv, deadline_ms, &reply);
        if (status != RLOCK_OK && r->events[i] != NULL) {
            rlock__conn_free(r->events[i]);
            r->events[i] = NULL;
        }
        rlock__sentinel_heard(r, i, status, asked_ms);
        if (reply != NULL)
            freeReplyObject(reply);
        rlock__endpoint_clear(&ep);
    }
    r->next_watch_ms = rlock__now_ms() + POLL_INTERVAL_MS;
}

/* Splits a payload into at most n space-separated words (in place). */
static int words(char *payload, char **w, int n) {
    int k = 0;
    for (char *save = NULL, *t = strtok_r(payload, " ", &save); t != NULL && k < n;
         t = strtok_r(NULL, " ", &save))
        w[k++] = t;
    return k;
}

enum { HEARD_NOTHING = 0, HEARD_SWITCH = 1 };

/* Starts watching host:port's ROLE (a connection kept to another host goes). */
static void watch_host(rlock__sentinel *r, const char *host, const char *port) {
    if (strlen(host) >= sizeof(r->promoting_host))
        return;
    if (r->promoting != NULL)
        rlock__conn_free(r->promoting);
    r->promoting = NULL;
    snprintf(r->promoting_host, sizeof(r->promoting_host), "%s", host);
    r->promoting_port = atoi(port);
    r->promoting_until = rlock__now_ms() + PROMOTION_WATCH_MS;
}

/*
 * A failover event. +switch-master "<name> <old ip> <old port> <new ip> <new
 * port>": resolve now. +selected-slave "slave <ip:port> <ip> <port> @ <name>
 * <ip> <port>" (only from the sentinel leading the failover): watch that
 * replica's ROLE closely, to adopt it as soon as it is promoted.
 */
static int on_failover_event(rlock__sentinel *r, const redisReply *m) {
    char payload[512], *w[8];
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[1]->type != REDIS_REPLY_STRING || m->element[2]->type != REDIS_REPLY_STRING ||
        strcmp(m->element[0]->str, "message") != 0 || m->element[2]->len >= sizeof(payload))
        return HEARD_NOTHING;
    memcpy(payload, m->element[2]->str, m->element[2]->len + 1);
    int n = words(payload, w, 8);
    if (strcmp(m->element[1]->str, "+switch-master") == 0) {
        if (n < 5 || strcmp(w[0], r->master_name) != 0)
            return HEARD_NOTHING;
        watch_host(r, w[3], w[4]); /* confirmed like a promotion (ROLE), then by the sentinels */
        return HEARD_SWITCH;
    }
    if (n >= 6 && strcmp(w[0], "slave") == 0 && strcmp(w[5], r->master_name) == 0)
        watch_host(r, w[2], w[3]);
    return HEARD_NOTHING;
}

/* Reads what sentinel i sent; a broken subscription is dropped (renewed later). */
static int read_events(rlock__sentinel *r, int i) {
    int heard = HEARD_NOTHING;
    if (rlock__io_fill(r->events[i]) != REDIS_OK) {
        rlock__conn_free(r->events[i]);
        r->events[i] = NULL;
        return HEARD_SWITCH; /* a sentinel went away: worth a look */
    }
    for (void *raw = NULL; rlock__io_next(r->events[i], &raw) == REDIS_OK && raw;) {
        heard |= on_failover_event(r, raw);
        freeReplyObject(raw);
        raw = NULL;
    }
    return heard;
}

/* Waits up to timeout_ms for failover events; HEARD_SWITCH if one calls for a resolve. */
static int heard_events(rlock__sentinel *r, int timeout_ms) {
    struct pollfd pfd[RLOCK__EVENT_SENTINELS];
    int heard = HEARD_NOTHING;
    for (int i = 0; i < RLOCK__EVENT_SENTINELS; i++) {
        pfd[i] = (struct pollfd){.fd = -1};
        if (r->events[i] != NULL)
            pfd[i] = (struct pollfd){.fd = r->events[i]->fd,
                                     .events = rlock__io_events(r->events[i], POLLIN)};
    }
    if (poll(pfd, RLOCK__EVENT_SENTINELS, timeout_ms) <= 0)
        return HEARD_NOTHING;
    for (int i = 0; i < RLOCK__EVENT_SENTINELS; i++)
        if (pfd[i].revents != 0 && r->events[i] != NULL)
            heard |= read_events(r, i);
    return heard;
}

/* Whether the replica being promoted says ROLE master (one kept connection). */
static int promoted(rlock__sentinel *r) {
    rlock__endpoint ep = {.host = r->promoting_host, .port = r->promoting_port,
                          .user = r->master_auth.user, .password = r->master_auth.password};
    const char *argv[] = {"ROLE"};
    redisReply *reply = NULL;
    int64_t deadline_ms = rlock__deadline_after(4 * PROMOTION_POLL_MS);
    if (r->promoting == NULL &&
        rlock__connect(&ep, r->env->events, SENTINEL_TIMEOUT_MS, deadline_ms, &r->promoting) !=
            RLOCK_OK)
        return 0;
    int yes = rlock__run_private(r->promoting, &ep, 1, argv, deadline_ms, &reply) == RLOCK_OK &&
              reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
              reply->element[0]->type == REDIS_REPLY_STRING &&
              strcmp(reply->element[0]->str, "master") == 0;
    if (reply != NULL)
        freeReplyObject(reply);
    else if (r->promoting != NULL) { /* no answer in time: a fresh connection next tick */
        rlock__conn_free(r->promoting);
        r->promoting = NULL;
    }
    return yes;
}

static void stop_watching(rlock__sentinel *r) {
    r->promoting_until = 0;
    if (r->promoting != NULL)
        rlock__conn_free(r->promoting);
    r->promoting = NULL;
}

/*
 * A replica is being promoted (or +switch-master named a new master): once
 * it says ROLE master, adopt it -- one epoch above the old master's, so a
 * sentinel still naming the old one is not followed back -- until a
 * sentinel names it with its true epoch.
 */
static void watch_promotion(rlock__sentinel *r) {
    rlock__sentinel_answer a;
    if (rlock__now_ms() >= r->promoting_until) {
        stop_watching(r);
        return;
    }
    if (!promoted(r))
        return;
    snprintf(a.host, sizeof(a.host), "%s", r->promoting_host);
    a.port = r->promoting_port;
    a.epoch = atomic_load(&r->epoch) + 1;
    pthread_mutex_lock(&r->resolve_mutex);
    int status = rlock__sentinel_adopt(r, &a, 1);
    pthread_mutex_unlock(&r->resolve_mutex);
    if (status == RLOCK_OK)
        stop_watching(r);
}

/* Resolves (asks every sentinel) if all, else polls (asks one, more on a difference). */
static void resolve_locked(rlock__sentinel *r, int all) {
    char report[REPORT_MAX];
    pthread_mutex_lock(&r->resolve_mutex);
    if (all)
        rlock__sentinel_resolve(r, report, sizeof(report));
    else
        rlock__sentinel_poll(r, report, sizeof(report));
    pthread_mutex_unlock(&r->resolve_mutex);
}

static void *monitor_main(void *arg) {
    rlock__sentinel *r = arg;
    rlock__worker *w = &r->monitor;
    int64_t next_poll = rlock__now_ms() + POLL_INTERVAL_MS;
    pthread_setname_np(pthread_self(), "rlock-sentinel");
    pthread_mutex_lock(&w->mutex);
    while (!w->stop) {
        pthread_mutex_unlock(&w->mutex);
        if (rlock__now_ms() >= r->next_watch_ms)
            watch_events(r);
        int heard = heard_events(r, r->promoting_until ? PROMOTION_POLL_MS : MONITOR_TICK_MS);
        if (r->promoting_until != 0)
            watch_promotion(r);
        int wanted = heard || atomic_exchange(&r->resolve_wanted, 0);
        if (wanted || rlock__now_ms() >= next_poll) {
            resolve_locked(r, wanted);
            next_poll = rlock__now_ms() + POLL_INTERVAL_MS;
        }
        pthread_mutex_lock(&w->mutex);
    }
    pthread_mutex_unlock(&w->mutex);
    for (int i = 0; i < RLOCK__EVENT_SENTINELS; i++)
        if (r->events[i] != NULL)
            rlock__conn_free(r->events[i]);
    stop_watching(r);
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

/*
 * The command's thread does not resolve itself (that could take seconds of
 * its time bound with sentinels down): it asks the monitor, and retries after
 * the usual pause on whatever master is current then.
 */
static int sentinel_on_error(rlock__route *route, rlock__node *node, const redisReply *error,
                             rlock__node **to, int *asking) {
    rlock__sentinel *r = (rlock__sentinel *)route;
    *asking = 0;
    *to = NULL;
    if (!says_not_master(error))
        return RLOCK__ROUTE_NONE;
    rlock__node *master = atomic_load(&r->master);
    if (master != node) {
        *to = master; /* moved already: at once */
        return RLOCK__ROUTE_NOW;
    }
    atomic_store(&r->resolve_wanted, 1);
    return RLOCK__ROUTE_LATER;
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
    r->nsentinels = url->nhosts;
    /* host and port only: sentinel_at adds the sentinel credentials to a copy */
    memcpy(r->sentinels, url->hosts, (size_t)url->nhosts * sizeof(*r->sentinels));
    rlock__free(url->hosts);
    memset(url, 0, sizeof(*url));
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
