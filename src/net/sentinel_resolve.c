/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_resolve.c - finding the master through the sentinels: ask every
 * one in turn (each step bounded by SENTINEL_TIMEOUT_MS) for SENTINEL
 * MASTER, learn their peers from SENTINEL SENTINELS, take the answer of the
 * highest config epoch, and adopt that master only if it is new, of a
 * config epoch not older than the one in use, answers ROLE with "master",
 * has the scripts loaded, and is still the sentinels' choice when they are
 * asked again after that ROLE. Adopting a new master retires the old node
 * and tells the net's listener (route_sentinel.c has the why of all this).
 * The monitor's poll asks one sentinel, in turn, and resolves only when
 * its answer differs from the master in use.
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
    /* RLOCK_EIO: the master exists, and will be named again in a moment. */
    if (flags != NULL && has_flag(flags, "failover_in_progress"))
        return rlock__fail(RLOCK_EIO, 0, "it is in the middle of a failover of '%.100s'",
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
        rlock__conn_free(ctx);
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
        rlock__conn_free(*out);
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
    /* After this nothing the client sends reaches the old master, which may still take
       writes (a zombie): commands in flight there are sent again here (exec.c). */
    rlock__pool_fence(&old->pool);
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

int rlock__sentinel_at(rlock__sentinel *r, int i, int from_first, rlock__endpoint *ep) {
    pthread_mutex_lock(&r->mutex);
    int n = r->nsentinels, k = from_first ? (r->first + i) % (n > 0 ? n : 1) : i;
    int status = i < n ? rlock__endpoint_set(ep, r->sentinels[k].host, r->sentinels[k].port,
                                       r->sentinel_user, r->sentinel_password, 0)
                       : RLOCK_EINVAL;
    ep->sentinel = status == RLOCK_OK; /* its AUTH is sentinel_user's, never the callback's */
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
 * How much a sentinel's failure says, for the status of a resolve that got
 * no answer: that the master name is unknown (RLOCK_EREDIS) least -- it is
 * the open's answer only if no sentinel said anything else; then that
 * something could not be reached or is changing (RLOCK_EIO: try again);
 * then a refusal that stays (credentials, an ACL, a bad db, no memory).
 */
static int weight(int status, int unknown_name) {
    return status == RLOCK_EREDIS && unknown_name ? 0 : status == RLOCK_EIO ? 1 : 2;
}

/* The sentinels that answered in a pass: bit k for sentinel k of the list. */
typedef uint64_t sentinel_set;
#define ALL_SENTINELS (~(sentinel_set)0)

/* Leaves out of among the sentinels that timed out lately, unless that leaves none. */
static sentinel_set not_quiet(rlock__sentinel *r, sentinel_set among) {
    sentinel_set known = 0, quiet = 0;
    int64_t now = rlock__now_ms();
    pthread_mutex_lock(&r->mutex);
    for (int k = 0; k < r->nsentinels; k++) {
        known |= (sentinel_set)1 << k;
        if (r->quiet_until[k] > now)
            quiet |= (sentinel_set)1 << k;
    }
    pthread_mutex_unlock(&r->mutex);
    /* among may name sentinels still to be learnt (ALL_SENTINELS): only those known count */
    return (among & known & ~quiet) != 0 ? among & ~quiet : among;
}

int rlock__sentinel_quiet(rlock__sentinel *r, int k) {
    pthread_mutex_lock(&r->mutex);
    int quiet = r->quiet_until[k] > rlock__now_ms();
    pthread_mutex_unlock(&r->mutex);
    return quiet;
}

void rlock__sentinel_heard(rlock__sentinel *r, int k, int status, int64_t asked_ms) {
    int64_t now = rlock__now_ms();
    int timed_out = status == RLOCK_EIO && now - asked_ms >= SENTINEL_TIMEOUT_MS / 2;
    pthread_mutex_lock(&r->mutex);
    r->quiet_until[k] = timed_out ? now + QUIET_MS : 0;
    pthread_mutex_unlock(&r->mutex);
}

/*
 * Asks the sentinels of among (the one that gave the best answer last time
 * first; those that timed out lately left out, unless all did) for the
 * master: the answer of the highest config epoch in *best, who answered in
 * *answered. A sentinel that has not heard of a failover names
 * the old master under an older epoch: taking the first answer would follow
 * it. RLOCK_OK if one answered; else the status that says most (weight),
 * with what each said in report.
 */
static int ask_all(rlock__sentinel *r, sentinel_set among, answer *best, sentinel_set *answered,
                   char *report, size_t size) {
    int status = RLOCK_EREDIS, unknown_name = 1, best_k = -1;
    *answered = 0;
    report[0] = '\0';
    among = not_quiet(r, among);
    pthread_mutex_lock(&r->mutex);
    int n0 = r->nsentinels, first = r->first;
    pthread_mutex_unlock(&r->mutex);
    for (int i = 0; i < RLOCK__MAX_SENTINELS && !atomic_load(&r->closing); i++) {
        rlock__endpoint ep;
        answer a;
        pthread_mutex_lock(&r->mutex);
        int n = r->nsentinels; /* grows as the sentinels name their peers */
        pthread_mutex_unlock(&r->mutex);
        if (i >= n)
            break;
        int k = i < n0 ? (first + i) % n0 : i; /* the peers learnt on the way last */
        if (!(among & ((sentinel_set)1 << k)) || rlock__sentinel_at(r, k, 0, &ep) != RLOCK_OK)
            continue;
        int64_t asked_ms = rlock__now_ms();
        int asked = ask_sentinel(r, &ep, &a);
        rlock__sentinel_heard(r, k, asked, asked_ms);
        if (asked == RLOCK_OK) {
            *answered |= (sentinel_set)1 << k;
            if (best_k < 0 || a.epoch > best->epoch) {
                *best = a;
                best_k = k;
            }
        } else {
            int unknown = asked == RLOCK_EREDIS &&
                          strstr(rlock__last_message(), "names no master") != NULL;
            if (weight(asked, unknown) >= weight(status, unknown_name)) {
                status = asked;
                unknown_name = unknown;
            }
            note(report, size, &ep);
        }
        rlock__endpoint_clear(&ep);
    }
    if (best_k < 0)
        return atomic_load(&r->closing) ? RLOCK_ECLOSED : status;
    pthread_mutex_lock(&r->mutex);
    r->first = best_k;
    pthread_mutex_unlock(&r->mutex);
    return RLOCK_OK;
}

/*
 * Whether the sentinels that answered (among) still name a's master after
 * its ROLE check: that check may have waited seconds on a paused master
 * while they promoted a replica (it then wakes up saying master). What they
 * name now goes to *now.
 */
static int still_named(rlock__sentinel *r, const answer *a, sentinel_set among, answer *now) {
    char report[REPORT_MAX];
    sentinel_set answered;
    int status = ask_all(r, among, now, &answered, report, sizeof(report));
    if (status != RLOCK_OK)
        return rlock__fail(status, 0, "%.100s:%d said master, but no sentinel could be asked "
                                      "again: %s", a->host, a->port, report);
    if (strcmp(now->host, a->host) == 0 && now->port == a->port && now->epoch >= a->epoch)
        return RLOCK_OK;
    return rlock__fail(RLOCK_EIO, 0, "%.100s:%d said master, but the sentinels name "
                                     "%.100s:%d (config epoch %lld) now", a->host, a->port,
                       now->host, now->port, now->epoch);
}

/*
 * rlock__sentinel_adopt, for an answer of the sentinels among (0: a
 * promotion seen by ROLE, nobody to ask): a new master is adopted only if
 * they still name it after its ROLE check; if they name another, that is in
 * *renamed (its port 0 if not).
 */
static int adopt(rlock__sentinel *r, const answer *a, int provisional, sentinel_set among,
                 answer *renamed) {
    rlock__node *current = atomic_load(&r->master);
    rlock__endpoint ep;
    redisContext *ctx = NULL;
    answer now = {.port = 0};
    if (renamed != NULL)
        renamed->port = 0;
    if (current != NULL && older(r, a))
        return rlock__fail(RLOCK_EREDIS, 0, "it names %.100s:%d of config epoch %lld, older "
                                            "than the master in use (%lld)", a->host, a->port,
                           a->epoch, atomic_load(&r->epoch));
    /* A master left (leave_unnamed) is adopted again only as a new node. */
    if (current != NULL && !rlock__pool_fenced(&current->pool) &&
        rlock__endpoint_is(&current->endpoint, a->host, a->port)) {
        if (!provisional) { /* a sentinel names it: confirmed, with its true epoch */
            r->provisional_until = 0;
            atomic_store(&r->epoch, a->epoch);
        }
        return RLOCK_OK;
    }
    int status = rlock__endpoint_set(&ep, a->host, a->port, r->master_auth.user,
                               r->master_auth.password, r->master_auth.db);
    if (status == RLOCK_OK)
        status = confirm_master(r, &ep, &ctx);
    if (status == RLOCK_OK && among != 0) {
        status = still_named(r, a, among, &now);
        if (status != RLOCK_OK && renamed != NULL)
            *renamed = now;
    }
    if (status == RLOCK_OK) {
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
        rlock__conn_free(ctx);
    rlock__endpoint_clear(&ep);
    return status;
}

int rlock__sentinel_adopt(rlock__sentinel *r, const answer *a, int provisional) {
    return adopt(r, a, provisional, 0, NULL);
}

/*
 * The sentinels name another master under a newer config epoch than the one
 * in use, but it could not be adopted (not reached, ROLE, scripts): the
 * master in use is no longer theirs -- an old master resumed after its
 * failover still says ROLE master and takes writes -- so nothing is sent to
 * it any more (its pool fenced: commands fail with RLOCK_EIO) until a master
 * is adopted.
 */
static void leave_unnamed(rlock__sentinel *r, const answer *named) {
    char at[RLOCK__WHERE_MAX];
    rlock__node *current = atomic_load(&r->master);
    if (current == NULL || named->epoch <= atomic_load(&r->epoch) ||
        rlock__endpoint_is(&current->endpoint, named->host, named->port) ||
        rlock__pool_fenced(&current->pool))
        return;
    rlock__pool_fence(&current->pool);
    rlock__log(r->env->events, RLOCK_LOG_WARN, "MASTER_LEFT",
               " at=%s named=%.100s:%d epoch=%lld why=\"%s\"",
               rlock__endpoint_str(&current->endpoint, at, sizeof(at)), named->host,
               named->port, named->epoch, rlock__last_message());
}

/*
 * Asks the sentinels one at a time, from the one after the sentinel that
 * answered the last poll (those that timed out lately left out, unless all
 * did), until one answers: its answer in *a. Rotating spreads the polls of
 * many clients over the sentinels. RLOCK_OK if one answered; else what the
 * last said, with what each said in report.
 */
static int ask_next(rlock__sentinel *r, answer *a, char *report, size_t size) {
    int status = RLOCK_EIO;
    report[0] = '\0';
    sentinel_set among = not_quiet(r, ALL_SENTINELS);
    pthread_mutex_lock(&r->mutex);
    int n = r->nsentinels, next = r->poll_next;
    pthread_mutex_unlock(&r->mutex);
    for (int i = 0; i < n && !atomic_load(&r->closing); i++) {
        int k = (next + i) % n;
        rlock__endpoint ep;
        if (!(among & ((sentinel_set)1 << k)) || rlock__sentinel_at(r, k, 0, &ep) != RLOCK_OK)
            continue;
        int64_t asked_ms = rlock__now_ms();
        status = ask_sentinel(r, &ep, a);
        rlock__sentinel_heard(r, k, status, asked_ms);
        if (status != RLOCK_OK)
            note(report, size, &ep);
        rlock__endpoint_clear(&ep);
        if (status == RLOCK_OK) {
            pthread_mutex_lock(&r->mutex);
            r->poll_next = (k + 1) % n;
            pthread_mutex_unlock(&r->mutex);
            return RLOCK_OK;
        }
    }
    return atomic_load(&r->closing) ? RLOCK_ECLOSED : status;
}

/*
 * Whether the master in use is settled: a sentinel named it (not a
 * provisional promotion), it was not left, and a is that master under the
 * config epoch in use. Call with resolve_mutex held.
 */
static int names_master_in_use(const rlock__sentinel *r, const answer *a) {
    rlock__node *current = atomic_load(&r->master);
    return current != NULL && r->provisional_until == 0 &&
           !rlock__pool_fenced(&current->pool) &&
           rlock__endpoint_is(&current->endpoint, a->host, a->port) &&
           a->epoch == atomic_load(&r->epoch);
}

int rlock__sentinel_poll(rlock__sentinel *r, char *report, size_t size) {
    answer a;
    rlock__node *current = atomic_load(&r->master);
    if (current == NULL || r->provisional_until != 0 || rlock__pool_fenced(&current->pool))
        return rlock__sentinel_resolve(r, report, size);
    int status = ask_next(r, &a, report, size);
    if (status != RLOCK_OK) /* every sentinel was asked: none could tell anything */
        return status;
    if (names_master_in_use(r, &a))
        return RLOCK_OK;
    /* another master or another epoch: what do they all say (highest epoch, ROLE, ...)? */
    return rlock__sentinel_resolve(r, report, size);
}

/* A new answer after a ROLE check is followed this many times in one resolve. */
#define MAX_RENAMES 3

int rlock__sentinel_resolve(rlock__sentinel *r, char *report, size_t size) {
    answer a, renamed;
    sentinel_set answered;
    int status = ask_all(r, ALL_SENTINELS, &a, &answered, report, size);
    for (int i = 0; status == RLOCK_OK; i++) {
        status = adopt(r, &a, 0, answered, &renamed);
        if (status == RLOCK_OK || renamed.port == 0 || i + 1 == MAX_RENAMES)
            break;
        a = renamed; /* the sentinels moved on during the ROLE check: their new choice */
        status = RLOCK_OK;
    }
    if (status != RLOCK_OK && answered != 0) { /* named, but not usable: say why */
        leave_unnamed(r, &a);
        size_t used = strlen(report);
        if (used + 1 < size)
            snprintf(report + used, size - used, "%smaster %.100s:%d: %s", used > 0 ? "; " : "",
                     a.host, a.port, rlock__last_message());
    }
    return status;
}
