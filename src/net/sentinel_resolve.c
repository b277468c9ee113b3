/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_resolve.c - finding the master through the sentinels: ask each
 * in turn (the last responsive one first, each step bounded by
 * SENTINEL_TIMEOUT_MS) for SENTINEL MASTER, learn their peers from SENTINEL
 * SENTINELS, and adopt a master only if it is new, of a config epoch not
 * older than the one in use, answers ROLE with "master", and has the
 * scripts loaded. Adopting a new master retires the old node and tells the
 * net's listener (route_sentinel.c has the why of all this).
 *
 * Threads: the monitor thread and command threads (on_error), one at a
 * time (resolve_mutex); the sentinel list under the route's mutex.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel.h"

/* ---- the sentinel list ------------------------------------------------------------- */

/* Adds a sentinel the others told of (mutex held); quietly ignores what does not fit. */
static void learn_sentinel(rlock__sentinel *r, const char *host, int port) {
    for (int i = 0; i < r->nsentinels; i++)
        if (rlock__endpoint_is(&r->sentinels[i], host, port))
            return;
    if (r->nsentinels < RLOCK__MAX_SENTINELS &&
        rlock__endpoint_set(&r->sentinels[r->nsentinels], host, port, NULL, NULL, 0) == RLOCK_OK)
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
static void refresh_sentinels(rlock__sentinel *r, redisContext *ctx, const rlock__endpoint *ep,
                              int64_t deadline_ms) {
    const char *argv[] = {"SENTINEL", "SENTINELS", r->master_name};
    redisReply *reply = NULL;
    if (rlock__run_private(ctx, ep, 3, argv, deadline_ms, &reply) != RLOCK_OK)
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

typedef rlock__sentinel_answer answer;

/* Whether a sentinel's flags (comma-separated, as "master,failover_in_progress") include flag. */
static int has_flag(const char *flags, const char *flag) {
    size_t len = strlen(flag);
    for (const char *at = flags;; at++) {
        if (strncmp(at, flag, len) == 0 && (at[len] == ',' || at[len] == '\0'))
            return 1;
        if ((at = strchr(at, ',')) == NULL)
            return 0;
    }
}

/*
 * SENTINEL MASTER <name>'s ip, port and config-epoch into *a. A sentinel in
 * the middle of a failover is not an answer: the one leading it sets the new
 * config epoch when the replica it promotes says master, but keeps the old
 * master's address in this reply until the failover ends (the other replicas
 * reconfigured, up to failover-timeout later). Its pair would send us back
 * to the old master, which still says ROLE master until it is demoted.
 */
static int read_master(const rlock__sentinel *r, const redisReply *reply, answer *a) {
    const char *ip = map_get(reply, "ip"), *port = map_get(reply, "port");
    const char *epoch = map_get(reply, "config-epoch"), *flags = map_get(reply, "flags");
    if (ip == NULL || port == NULL || epoch == NULL || strlen(ip) >= sizeof(a->host))
        return rlock__fail(RLOCK_EREDIS, 0, "it names no master '%.100s'", r->master_name);
    if (flags != NULL && has_flag(flags, "failover_in_progress"))
        return rlock__fail(RLOCK_EREDIS, 0, "it is in the middle of a failover of '%.100s'",
                           r->master_name);
    snprintf(a->host, sizeof(a->host), "%s", ip);
    a->port = atoi(port);
    a->epoch = atoll(epoch);
    return RLOCK_OK;
}

/* Asks sentinel ep for the master's address and epoch (and its peers). */
static int ask_sentinel(rlock__sentinel *r, const rlock__endpoint *ep, answer *a) {
    const char *argv[] = {"SENTINEL", "MASTER", r->master_name};
    int64_t deadline_ms = rlock__deadline_after(SENTINEL_TIMEOUT_MS);
    redisContext *ctx = NULL;
    redisReply *reply = NULL;
    int status = rlock__connect(ep, r->env->events, SENTINEL_TIMEOUT_MS, deadline_ms, &ctx);
    if (status == RLOCK_OK)
        status = rlock__run_private(ctx, ep, 3, argv, deadline_ms, &reply);
    if (status == RLOCK_EREDIS && strstr(rlock__last_message(), "No such master") != NULL)
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
static int confirm_master(rlock__sentinel *r, rlock__endpoint *ep, redisContext **out) {
    const char *argv[] = {"ROLE"};
    int64_t deadline_ms = rlock__deadline_after(r->env->settings->connect_timeout_ms);
    rlock__script_set scripts = *r->env->scripts; /* its own copy: the SHA1s are written */
    redisReply *reply = NULL;
    int status =
        rlock__connect(ep, r->env->events, r->env->settings->connect_timeout_ms, deadline_ms, out);
    if (status == RLOCK_OK)
        status = rlock__run_private(*out, ep, 1, argv, deadline_ms, &reply);
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
static int switch_to(rlock__sentinel *r, rlock__node *node) {
    if (atomic_load(&r->closing)) /* close began: its abort would miss the new pool */
        return rlock__fail(RLOCK_ECLOSED, 0, "client closing: master switch not made");
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
    rlock__pool_retire(&old->pool, 1);
    snprintf(detail, sizeof(detail), "%s -> %s", from,
             rlock__endpoint_str(&node->endpoint, to, sizeof(to)));
    rlock__event_post(r->env->events, RLOCK_EVENT_MASTER_SWITCHED, NULL, 0, -1, RLOCK_OK, detail);
    r->env->switched(r->env->arg);
    return RLOCK_OK;
}

/* Whether the epoch guard refuses a (mutex held): older than the master in use. */
static int older(const rlock__sentinel *r, const answer *a) {
    if (a->epoch >= atomic_load(&r->epoch))
        return 0;
    /* A provisional master no sentinel confirmed in time was a wrong guess. */
    return r->provisional_until == 0 || rlock__now_ms() < r->provisional_until;
}

int rlock__sentinel_adopt(rlock__sentinel *r, const answer *a, int provisional) {
    rlock__node *current = atomic_load(&r->master);
    rlock__endpoint ep;
    redisContext *ctx = NULL;
    if (current != NULL && older(r, a))
        return rlock__fail(RLOCK_EREDIS, 0, "it names %.100s:%d of config epoch %lld, older "
                                            "than the master in use (%lld)", a->host, a->port,
                           a->epoch, atomic_load(&r->epoch));
    if (current != NULL && rlock__endpoint_is(&current->endpoint, a->host, a->port)) {
        if (!provisional) { /* a sentinel names it: confirmed, with its true epoch */
            r->provisional_until = 0;
            atomic_store(&r->epoch, a->epoch);
        }
        return RLOCK_OK;
    }
    int status = rlock__endpoint_set(&ep, a->host, a->port, r->master_auth.user,
                               r->master_auth.password, r->master_auth.db);
    if (status == RLOCK_OK && (status = confirm_master(r, &ep, &ctx)) == RLOCK_OK) {
        rlock__node *node = rlock__node_new(&ep, r->env->settings->pool_size, r->env->events);
        status = node == NULL ? RLOCK_ENOMEM : switch_to(r, node);
        if (status == RLOCK_OK) {
            atomic_store(&r->epoch, a->epoch);
            r->provisional_until = provisional ? rlock__now_ms() + PROVISIONAL_MS : 0;
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

int rlock__sentinel_at(rlock__sentinel *r, int i, int from_first, rlock__endpoint *ep) {
    pthread_mutex_lock(&r->mutex);
    int n = r->nsentinels, k = from_first ? (r->first + i) % (n > 0 ? n : 1) : i;
    int status = i < n ? rlock__endpoint_set(ep, r->sentinels[k].host, r->sentinels[k].port,
                                       r->sentinel_user, r->sentinel_password, 0)
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

int rlock__sentinel_resolve(rlock__sentinel *r, char *report, size_t size) {
    answer a;
    int status = RLOCK_EIO;
    report[0] = '\0';
    for (int i = 0; status != RLOCK_OK && i < RLOCK__MAX_SENTINELS; i++) {
        rlock__endpoint ep;
        if (atomic_load(&r->closing) || rlock__sentinel_at(r, i, 1, &ep) != RLOCK_OK)
            break;
        status = ask_sentinel(r, &ep, &a);
        if (status == RLOCK_OK)
            status = rlock__sentinel_adopt(r, &a, 0);
        if (status == RLOCK_OK) {
            /* The next resolve asks the next sentinel first: one that is cut off
             * with an old master is then never the only voice heard. */
            pthread_mutex_lock(&r->mutex);
            r->first = (r->first + i + 1) % r->nsentinels;
            pthread_mutex_unlock(&r->mutex);
        } else {
            note(report, size, &ep);
        }
        rlock__endpoint_clear(&ep);
    }
    return status;
}

