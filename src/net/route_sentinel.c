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
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

#define SENTINEL_TIMEOUT_MS 1000 /* each step with one sentinel: a dead one costs little */
#define POLL_INTERVAL_MS 1000    /* ask the sentinels this often, +switch-master or not */
#define RESOLVE_GAP_MS 100       /* on_error: at most one resolve this often */
#define MONITOR_TICK_MS 100      /* the monitor looks at suspect() requests this often */
#define REPORT_MAX 600

typedef struct sentinel_route {
    rlock__route base;
    const rlock__route_env *env;
    char *master_name;                 /* owned */
    rlock__endpoint master_auth;       /* user, password, db for the master; owned */
    char *sentinel_user;               /* owned, or NULL */
    char *sentinel_password;           /* owned, or NULL */
    _Atomic(rlock__node *) master;     /* owned; NULL only before the first resolve */
    atomic_llong epoch;                /* the sentinels' config-epoch of that master */
    pthread_mutex_t mutex;             /* guards the fields below */
    rlock__endpoint sentinels[RLOCK__MAX_SENTINELS];
    int nsentinels;
    int first;                         /* the sentinel that answered last */
    rlock__node **retired;             /* owned: former masters' nodes */
    size_t nretired;
    pthread_mutex_t resolve_mutex;     /* one resolve at a time; guards last_resolve_ms */
    int64_t last_resolve_ms;
    atomic_int resolve_wanted;         /* suspect() asks the monitor to resolve */
    atomic_int closing;                /* abort began: no more resolving */
    rlock__worker monitor;             /* its mutex guards only stop */
    redisContext *events;              /* the +switch-master subscription: monitor only */
} sentinel_route;

/* ---- one command on a private connection --------------------------------------- */

static int run(redisContext *ctx, const rlock__endpoint *ep, int argc, const char **argv,
               int64_t deadline_ms, redisReply **reply) {
    *reply = NULL;
    if (redisAppendCommandArgv(ctx, argc, argv, NULL) != REDIS_OK)
        return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", argv[0]);
    if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK ||
        rlock__io_read(ctx, deadline_ms, reply) != RLOCK_OK)
        return rlock__fail_io(ep, ctx, ctx->err != 0 ? 0 : errno, argv[0]);
    if ((*reply)->type == REDIS_REPLY_ERROR) {
        int status = rlock__fail_reply(*reply, argv[0]);
        freeReplyObject(*reply);
        *reply = NULL;
        return status;
    }
    return RLOCK_OK;
}

static int endpoint_init(rlock__endpoint *ep, const char *host, int port, const char *user,
                         const char *password, int db) {
    memset(ep, 0, sizeof(*ep));
    ep->port = port;
    ep->db = db;
    ep->host = rlock__memdup0(host, strlen(host));
    ep->user = user != NULL ? rlock__memdup0(user, strlen(user)) : NULL;
    ep->password = password != NULL ? rlock__memdup0(password, strlen(password)) : NULL;
    if (ep->host == NULL || (user != NULL && ep->user == NULL) ||
        (password != NULL && ep->password == NULL)) {
        rlock__endpoint_clear(ep);
        return RLOCK_ENOMEM;
    }
    return RLOCK_OK;
}

static int same_address(const rlock__endpoint *ep, const char *host, int port) {
    return ep->host != NULL && ep->port == port && strcmp(ep->host, host) == 0;
}

/* ---- the sentinel list ------------------------------------------------------------- */

/* Adds a sentinel the others told of (mutex held); quietly ignores what does not fit. */
static void learn_sentinel(sentinel_route *r, const char *host, int port) {
    for (int i = 0; i < r->nsentinels; i++)
        if (same_address(&r->sentinels[i], host, port))
            return;
    if (r->nsentinels < RLOCK__MAX_SENTINELS &&
        endpoint_init(&r->sentinels[r->nsentinels], host, port, NULL, NULL, 0) == RLOCK_OK)
        r->nsentinels++;
}

/* The value of field in a flat RESP2 map (an array of name, value, ...); NULL if absent. */
static const char *map_get(const redisReply *map, const char *field) {
    for (size_t i = 0; map->type == REDIS_REPLY_ARRAY && i + 1 < map->elements; i += 2)
        if (map->element[i]->type == REDIS_REPLY_STRING && strcmp(map->element[i]->str, field) == 0)
            return map->element[i + 1]->type == REDIS_REPLY_STRING ? map->element[i + 1]->str
                                                                    : NULL;
    return NULL;
}

/* SENTINEL SENTINELS <name>: best effort, a failure changes nothing. */
static void refresh_sentinels(sentinel_route *r, redisContext *ctx, const rlock__endpoint *ep,
                              int64_t deadline_ms) {
    const char *argv[] = {"SENTINEL", "SENTINELS", r->master_name};
    redisReply *reply = NULL;
    if (run(ctx, ep, 3, argv, deadline_ms, &reply) != RLOCK_OK)
        return;
    pthread_mutex_lock(&r->mutex);
    for (size_t i = 0; reply->type == REDIS_REPLY_ARRAY && i < reply->elements; i++) {
        const char *ip = map_get(reply->element[i], "ip");
        const char *port = map_get(reply->element[i], "port");
        if (ip != NULL && port != NULL && atoi(port) > 0 && atoi(port) < 65536)
            learn_sentinel(r, ip, atoi(port));
    }
    pthread_mutex_unlock(&r->mutex);
    freeReplyObject(reply);
}

/* ---- resolving --------------------------------------------------------------------- */

/* What a sentinel says of the master. */
typedef struct answer {
    char host[256];
    int port;
    long long epoch;    /* config-epoch: grows with each failover */
} answer;

/* SENTINEL MASTER <name>'s ip, port and config-epoch into *a. */
static int read_master(const sentinel_route *r, const redisReply *reply, answer *a) {
    const char *ip = map_get(reply, "ip"), *port = map_get(reply, "port");
    const char *epoch = map_get(reply, "config-epoch");
    if (ip == NULL || port == NULL || epoch == NULL || strlen(ip) >= sizeof(a->host))
        return rlock__fail(RLOCK_EREDIS, 0, "it names no master '%.100s'", r->master_name);
    snprintf(a->host, sizeof(a->host), "%s", ip);
    a->port = atoi(port);
    a->epoch = atoll(epoch);
    return RLOCK_OK;
}

/* Asks sentinel ep for the master's address and epoch (and its peers). */
static int ask_sentinel(sentinel_route *r, const rlock__endpoint *ep, answer *a) {
    const char *argv[] = {"SENTINEL", "MASTER", r->master_name};
    int64_t deadline_ms = rlock__deadline_after(SENTINEL_TIMEOUT_MS);
    redisContext *ctx = NULL;
    redisReply *reply = NULL;
    int status = rlock__connect(ep, SENTINEL_TIMEOUT_MS, deadline_ms, &ctx);
    if (status == RLOCK_OK)
        status = run(ctx, ep, 3, argv, deadline_ms, &reply);
    if (status == RLOCK_EREDIS) /* "ERR No such master with that name" */
        status = rlock__fail(RLOCK_EREDIS, 0, "it names no master '%.100s'", r->master_name);
    if (status == RLOCK_OK)
        status = read_master(r, reply, a);
    if (status == RLOCK_OK)
        refresh_sentinels(r, ctx, ep, deadline_ms);
    if (reply != NULL)
        freeReplyObject(reply);
    if (ctx != NULL)
        redisFree(ctx);
    return status;
}

/*
 * Connects to the named master, checks that it says it is one (ROLE), and
 * loads the scripts there: the connection becomes the new pool's first.
 */
static int confirm_master(sentinel_route *r, rlock__endpoint *ep, redisContext **out) {
    const char *argv[] = {"ROLE"};
    int64_t deadline_ms = rlock__deadline_after(r->env->settings->connect_timeout_ms);
    rlock__script_set scripts = *r->env->scripts; /* its own copy: the SHA1s are written */
    redisReply *reply = NULL;
    int status = rlock__connect(ep, r->env->settings->connect_timeout_ms, deadline_ms, out);
    if (status == RLOCK_OK)
        status = run(*out, ep, 1, argv, deadline_ms, &reply);
    if (status == RLOCK_OK &&
        (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
         reply->element[0]->type != REDIS_REPLY_STRING || strcmp(reply->element[0]->str, "master")))
        status = rlock__fail(RLOCK_EIO, 0, "named as master, but ROLE says %.40s",
                             reply->elements > 0 && reply->element[0]->type == REDIS_REPLY_STRING
                                 ? reply->element[0]->str
                                 : "something else");
    if (reply != NULL)
        freeReplyObject(reply);
    if (status == RLOCK_OK)
        status = rlock__scripts_load(*out, rlock__deadline_after(SENTINEL_TIMEOUT_MS), &scripts);
    if (status != RLOCK_OK && *out != NULL) {
        redisFree(*out);
        *out = NULL;
    }
    return status;
}

/* Makes node the master (its pool seeded with ctx); the old one is retired. */
static int switch_to(sentinel_route *r, rlock__node *node) {
    char from[RLOCK__WHERE_MAX] = "(none)", to[RLOCK__WHERE_MAX], detail[2 * RLOCK__WHERE_MAX + 8];
    rlock__node *old = atomic_load(&r->master);
    if (old != NULL) {
        rlock__node **grown = rlock__malloc((r->nretired + 1) * sizeof(*grown));
        if (grown == NULL)
            return RLOCK_ENOMEM;
        pthread_mutex_lock(&r->mutex);
        if (r->nretired > 0)
            memcpy(grown, r->retired, r->nretired * sizeof(*grown));
        rlock__free(r->retired);
        r->retired = grown;
        r->retired[r->nretired++] = old;
        pthread_mutex_unlock(&r->mutex);
        rlock__endpoint_str(&old->endpoint, from, sizeof(from));
    }
    atomic_store(&r->master, node);
    if (old == NULL)
        return RLOCK_OK; /* the first master: no switch to tell */
    rlock__pool_retire(&old->pool);
    snprintf(detail, sizeof(detail), "%s -> %s", from,
             rlock__endpoint_str(&node->endpoint, to, sizeof(to)));
    rlock__event_post(r->env->events, RLOCK_EVENT_MASTER_SWITCHED, NULL, 0, -1, RLOCK_OK, detail);
    r->env->switched(r->env->arg);
    return RLOCK_OK;
}

/*
 * Takes the master a sentinel named if it is new, of an epoch not older
 * than the current master's (a sentinel that has not heard of the last
 * failover yet names the old master, which may still say it is one), and
 * confirms itself.
 */
static int adopt(sentinel_route *r, const answer *a) {
    rlock__node *current = atomic_load(&r->master);
    rlock__endpoint ep;
    redisContext *ctx = NULL;
    if (current != NULL && a->epoch < atomic_load(&r->epoch))
        return rlock__fail(RLOCK_EREDIS, 0, "it names %.100s:%d of config epoch %lld, older "
                                            "than the master in use (%lld)", a->host, a->port,
                           a->epoch, atomic_load(&r->epoch));
    if (current != NULL && same_address(&current->endpoint, a->host, a->port))
        return RLOCK_OK;
    int status = endpoint_init(&ep, a->host, a->port, r->master_auth.user,
                               r->master_auth.password, r->master_auth.db);
    if (status == RLOCK_OK && (status = confirm_master(r, &ep, &ctx)) == RLOCK_OK) {
        rlock__node *node = rlock__node_new(&ep, r->env->settings->pool_size);
        status = node == NULL ? RLOCK_ENOMEM : switch_to(r, node);
        if (status == RLOCK_OK) {
            atomic_store(&r->epoch, a->epoch);
            rlock__pool_seed(&node->pool, ctx);
            ctx = NULL;
        } else {
            rlock__node_free(node);
        }
    }
    if (ctx != NULL)
        redisFree(ctx);
    rlock__endpoint_clear(&ep);
    return status;
}

/* A copy of sentinel i's endpoint (the list may grow meanwhile). */
static int sentinel_at(sentinel_route *r, int i, rlock__endpoint *ep) {
    pthread_mutex_lock(&r->mutex);
    int n = r->nsentinels;
    int status = i < n ? endpoint_init(ep, r->sentinels[(r->first + i) % n].host,
                                       r->sentinels[(r->first + i) % n].port, r->sentinel_user,
                                       r->sentinel_password, 0)
                       : RLOCK_EINVAL;
    pthread_mutex_unlock(&r->mutex);
    return status;
}

/* Notes what sentinel ep said (the thread's last error) in report. */
static void note(char *report, size_t size, const rlock__endpoint *ep) {
    char at[RLOCK__WHERE_MAX];
    size_t used = strlen(report);
    if (used + 1 < size)
        snprintf(report + used, size - used, "%s%s: %s", used > 0 ? "; " : "",
                 rlock__endpoint_str(ep, at, sizeof(at)), rlock__last_message());
}

/*
 * Asks the sentinels in turn until one names a master that confirms itself,
 * and adopts it. RLOCK_EIO (what each said, in report) if none did.
 */
static int resolve(sentinel_route *r, char *report, size_t size) {
    answer a;
    int status = RLOCK_EIO;
    report[0] = '\0';
    for (int i = 0; status != RLOCK_OK && i < RLOCK__MAX_SENTINELS; i++) {
        rlock__endpoint ep;
        if (sentinel_at(r, i, &ep) != RLOCK_OK || atomic_load(&r->closing))
            break;
        status = ask_sentinel(r, &ep, &a);
        if (status == RLOCK_OK)
            status = adopt(r, &a);
        if (status == RLOCK_OK) {
            pthread_mutex_lock(&r->mutex);
            r->first = (r->first + i) % r->nsentinels;
            pthread_mutex_unlock(&r->mutex);
        } else {
            note(report, size, &ep);
        }
        rlock__endpoint_clear(&ep);
    }
    return status;
}

/*
 * Resolves unless another thread is at it or did so less than
 * RESOLVE_GAP_MS ago (then its answer serves). 1 if this call resolved.
 */
static int resolve_now(sentinel_route *r) {
    char report[REPORT_MAX];
    if (pthread_mutex_trylock(&r->resolve_mutex) != 0)
        return 0;
    int due = rlock__now_ms() - r->last_resolve_ms >= RESOLVE_GAP_MS;
    if (due) { /* a failed resolve is not the command's error: the command retries */
        resolve(r, report, sizeof(report));
        r->last_resolve_ms = rlock__now_ms();
    }
    pthread_mutex_unlock(&r->resolve_mutex);
    return due;
}

/* ---- the monitor thread ------------------------------------------------------------- */

/* Subscribes to +switch-master on one of the sentinels (best effort). */
static void watch_switches(sentinel_route *r) {
    static const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    rlock__endpoint ep;
    for (int i = 0; r->events == NULL && sentinel_at(r, i, &ep) == RLOCK_OK; i++) {
        int64_t deadline_ms = rlock__deadline_after(SENTINEL_TIMEOUT_MS);
        redisReply *reply = NULL;
        if (rlock__connect(&ep, SENTINEL_TIMEOUT_MS, deadline_ms, &r->events) == RLOCK_OK &&
            run(r->events, &ep, 2, argv, deadline_ms, &reply) != RLOCK_OK) {
            redisFree(r->events);
            r->events = NULL;
        }
        if (reply != NULL)
            freeReplyObject(reply);
        rlock__endpoint_clear(&ep);
    }
}

/* 1 if a +switch-master message names our master. */
static int names_our_master(const sentinel_route *r, const redisReply *m) {
    size_t len = strlen(r->master_name);
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        m->element[2]->type != REDIS_REPLY_STRING)
        return 0;
    const char *payload = m->element[2]->str; /* "<name> <old ip> <old port> <new ip> <new port>" */
    return strncmp(payload, r->master_name, len) == 0 && payload[len] == ' ';
}

/* Waits up to timeout_ms for +switch-master; 1 if one about our master came. */
static int heard_switch(sentinel_route *r, int timeout_ms) {
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
    sentinel_route *r = arg;
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
            resolve(r, report, sizeof(report));
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
    return atomic_load(&((sentinel_route *)route)->master);
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
    sentinel_route *r = (sentinel_route *)route;
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
    sentinel_route *r = (sentinel_route *)route;
    if (node == atomic_load(&r->master))
        atomic_store(&r->resolve_wanted, 1);
}

static void sentinel_abort(rlock__route *route) {
    sentinel_route *r = (sentinel_route *)route;
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
    sentinel_route *r = (sentinel_route *)route;
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
static sentinel_route *new_route(rlock__url *url, const rlock__route_env *env) {
    sentinel_route *r = rlock__calloc(1, sizeof(*r));
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
    sentinel_route *r = new_route(url, env);
    if (r == NULL)
        return RLOCK_ENOMEM;
    int status = resolve(r, report, sizeof(report));
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
