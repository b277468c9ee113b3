/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exec.c - running one command: the node the route names for the command's
 * key, a pooled connection, the round trip (wire.c), and safe retries -- all
 * within absolute deadlines (net.h says which). The route is asked again at
 * each attempt and told of every I/O failure and error reply, so a
 * redirect or a new Sentinel master takes effect within the call.
 *
 * Threads: application threads. No state of its own: the pools and the
 * net's `closing` carry the shared state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* Errors after which Redis did not run the command and asks us to come back. */
static int is_transient_error(const redisReply *reply) {
    static const char *const prefixes[] = {"LOADING", "BUSY ", "TRYAGAIN", "MASTERDOWN",
                                           "CLUSTERDOWN"};
    if (reply->type != REDIS_REPLY_ERROR)
        return 0;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(reply->str, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

int rlock__is_redirect(const redisReply *reply) {
    return reply->type == REDIS_REPLY_ERROR &&
           (strncmp(reply->str, "MOVED ", 6) == 0 || strncmp(reply->str, "ASK ", 4) == 0);
}

int rlock__is_tryagain(const redisReply *reply) {
    return reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "TRYAGAIN", 8) == 0;
}

int rlock__is_redirect_or_retry(const redisReply *reply) {
    return is_transient_error(reply) || rlock__is_redirect(reply);
}

/* Pause before re-send n (0-based): 50 ms doubling, capped at retry_interval_ms, jittered. */
static int64_t retry_pause_ms(const rlock__settings *s, int n) {
    int64_t pause = 50;
    for (int i = 0; i < n && pause < s->retry_interval_ms; i++)
        pause *= 2;
    if (pause > s->retry_interval_ms)
        pause = s->retry_interval_ms;
    unsigned seed = (unsigned)rlock__now_ms() ^ (unsigned)(uintptr_t)&pause;
    return pause / 2 + (pause > 1 ? rand_r(&seed) % (pause / 2 + 1) : 0);
}

/* Sleeps until until_ms unless the client starts closing. */
static void retry_sleep(rlock__net *net, int64_t until_ms) {
    pthread_mutex_lock(&net->mutex);
    while (!rlock__net_closing(net) && rlock__now_ms() < until_ms)
        rlock__cond_wait_until(&net->closed, &net->mutex, until_ms);
    pthread_mutex_unlock(&net->mutex);
}

static int64_t min_deadline(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* deadline_ms + ms, saturating (RLOCK__NO_DEADLINE stays). */
static int64_t extend(int64_t deadline_ms, int ms) {
    return deadline_ms >= RLOCK__NO_DEADLINE - ms ? RLOCK__NO_DEADLINE : deadline_ms + ms;
}

/* A command's own time: the command timeout, plus WAIT's when it follows. */
static int command_ms(const rlock__net *net, const rlock__cmd *cmd) {
    const rlock__settings *s = net->settings;
    return s->command_timeout_ms + (rlock__wait_for(net, cmd) > 0 ? s->replica_ack_timeout_ms : 0);
}

/*
 * Sends ASKING on ctx (Cluster's one-shot permission for the next command
 * of a key being imported). Its reply is read before the command is sent.
 */
static int send_asking(rlock__net *net, redisContext *ctx, int64_t by, int *reached) {
    static const char *argv[] = {"ASKING"};
    static const size_t argvlen[] = {6};
    rlock__cmd asking = {.script = -1, .argc = 1, .argv = argv, .argvlen = argvlen};
    redisReply *reply = NULL;
    int acks;
    int status = rlock__round_trip(net, ctx, &asking, 0, by, &reply, reached, &acks);
    if (status == RLOCK_OK && reply->type == REDIS_REPLY_ERROR)
        status = rlock__fail_reply(reply, "ASKING");
    rlock__drop_reply(&reply);
    *reached = RLOCK__REACHED_NONE; /* the command itself has not been sent */
    return status;
}

/* The most arguments a script sent with its keys as arguments has (the kinds' have < 16). */
#define KEYS_AS_ARGS_MAX 32

/*
 * cmd for a slot's importing node (net.h, RLOCK__KEYS_AS_ARGS) into *out,
 * with argv and argvlen (KEYS_AS_ARGS_MAX + 2 entries) and count: KEYS[1]
 * declared, the other keys after the mark and their count. 0 if cmd is not
 * a script of a lock of several keys (nothing to do).
 */
static int keys_as_args(const rlock__cmd *cmd, rlock__cmd *out, const char **argv,
                        size_t *argvlen, char *count) {
    if (cmd->family == NULL || cmd->script < 0 || cmd->nkeys < 2 ||
        cmd->argc > KEYS_AS_ARGS_MAX)
        return 0;
    argv[0] = cmd->argv[0];
    argvlen[0] = cmd->argvlen[0];
    argv[1] = RLOCK__KEYS_AS_ARGS;
    argvlen[1] = strlen(RLOCK__KEYS_AS_ARGS);
    argv[2] = count;
    argvlen[2] = rlock__fmt_u64(count, (uint64_t)(cmd->nkeys - 1));
    memcpy(argv + 3, cmd->argv + 1, (size_t)(cmd->argc - 1) * sizeof(*argv));
    memcpy(argvlen + 3, cmd->argvlen + 1, (size_t)(cmd->argc - 1) * sizeof(*argvlen));
    *out = *cmd;
    out->argc = cmd->argc + 2;
    out->nkeys = 1;
    out->argv = argv;
    out->argvlen = argvlen;
    return 1;
}

/* One attempt's outcome besides its status. */
typedef struct attempt {
    rlock__node *node;          /* where it ran */
    int asking;                 /* send ASKING first */
    int reached;                /* RLOCK__REACHED_* */
    int acks;                   /* WAIT's answer, or -1 */
    int left;                   /* the client left node (rlock__pool_fenced): go again */
} attempt;

/*
 * The attempt met a node the client has left (a Sentinel master it switched
 * from, or one the sentinels no longer name; either may still take writes):
 * whatever it answered is dropped -- it says nothing of the master that
 * holds the locks now, and an unlock it answered left the lock there -- and
 * the command goes to the master in use now, if there is a new one, at
 * once. Safe as any re-send: every command is a read or an idempotent
 * script.
 */
static int left_node(rlock__net *net, const rlock__cmd *cmd, attempt *a, rlock__conn *conn,
                     redisReply **reply) {
    char at[RLOCK__WHERE_MAX];
    rlock__drop_reply(reply);
    if (conn != NULL)
        rlock__pool_give(conn, 0);
    a->left = 1;
    a->acks = -1;
    return rlock__fail(RLOCK_EIO, 0, "%s at %s: the client has left that master",
                       rlock__net_cmd_name(net, cmd),
                       rlock__endpoint_str(&a->node->endpoint, at, sizeof(at)));
}

/*
 * One attempt on a->node: a pooled connection (queueing by the attempt's
 * deadline), a connection if needed, the round trip.
 */
static int attempt_once(rlock__net *net, const rlock__cmd *cmd, attempt *a, int64_t hard_ms,
                        redisReply **reply) {
    const rlock__settings *s = net->settings;
    int64_t start = rlock__now_ms();
    int64_t by = min_deadline(start + command_ms(net, cmd), hard_ms);
    int status;
    rlock__pool *pool = &a->node->pool;
    a->reached = RLOCK__REACHED_NONE;
    a->acks = -1;
    a->left = 0;
    rlock__conn *conn = rlock__pool_take(pool, by, &status);
    if (conn == NULL && rlock__pool_fenced(pool))
        return left_node(net, cmd, a, NULL, reply);
    if (conn == NULL)
        return status == RLOCK_ECLOSED
                   ? RLOCK_ECLOSED
                   : rlock__fail_errno(RLOCK_EIO, ETIMEDOUT,
                                       "%s: no pooled connection free within %lld ms (pool_size %d)",
                                       rlock__net_cmd_name(net, cmd),
                                       (long long)(by - start), s->pool_size);
    status = rlock__pool_connect(conn, s->connect_timeout_ms,
                                 min_deadline(start + s->connect_timeout_ms, hard_ms));
    if (rlock__pool_fenced(pool)) /* then a write fails: the fence shut the socket */
        return left_node(net, cmd, a, conn, reply);
    if (status != RLOCK_OK) {
        if (status == RLOCK_EIO)
            rlock__node_unreachable(net, a->node);
        rlock__pool_give(conn, 0);
        return status;
    }
    /* No time left for a reply: sending would only let Redis run what we then call failed. */
    if (rlock__now_ms() >= by) {
        rlock__pool_give(conn, 1);
        return rlock__fail_errno(RLOCK_EIO, ETIMEDOUT,
                                 "%s not sent: the call's time bound had passed",
                                 rlock__net_cmd_name(net, cmd));
    }
    const char *argv[KEYS_AS_ARGS_MAX + 2];
    size_t argvlen[KEYS_AS_ARGS_MAX + 2];
    char count[24];
    rlock__cmd as_args;
    if (a->asking && keys_as_args(cmd, &as_args, argv, argvlen, count))
        cmd = &as_args;
    if (a->asking)
        status = send_asking(net, conn->ctx, by, &a->reached);
    if (status == RLOCK_OK)
        status = rlock__round_trip(net, conn->ctx, cmd, 0, by, reply, &a->reached, &a->acks);
    if (rlock__pool_fenced(pool)) /* the client switched while it ran: whatever came back */
        return left_node(net, cmd, a, conn, reply);
    if (status == RLOCK_EIO)
        status = rlock__fail_cmd_io(net, a->node, conn->ctx, cmd);
    else if (status == RLOCK_OK)
        rlock__link_up(net->events);
    rlock__pool_give(conn, status == RLOCK_OK);
    return status;
}

/* A redirect is followed at once, at most this many times in one call. */
#define MAX_REDIRECTS 5

/* The route's verdict on an error reply (RLOCK__ROUTE_*); NOW updates a. */
static int ask_route(rlock__net *net, const rlock__cmd *cmd, const redisReply *reply, attempt *a,
                     int *redirects) {
    rlock__route *route = net->route;
    rlock__node *to = NULL;
    if (reply == NULL || reply->type != REDIS_REPLY_ERROR)
        return RLOCK__ROUTE_NONE;
    int verdict = route->ops->on_error(route, a->node, reply, &to, &a->asking);
    if (verdict == RLOCK__ROUTE_NOW && a->asking && (cmd->flags & RLOCK__CMD_NO_ASK)) {
        a->asking = 0;
        return RLOCK__ROUTE_NONE;
    }
    if (verdict != RLOCK__ROUTE_NOW)
        return verdict;
    if (to == NULL || (*redirects)++ >= MAX_REDIRECTS)
        return RLOCK__ROUTE_LATER;
    a->node = to;
    return RLOCK__ROUTE_NOW;
}

/* Runs one plain command on node (one attempt); an error reply is returned with RLOCK_OK. */
int rlock__run_on(rlock__net *net, rlock__node *node, int argc, const char **argv,
                   const size_t *argvlen, int64_t hard_ms, redisReply **reply) {
    rlock__cmd cmd = {.script = -1, .argc = argc, .argv = argv, .argvlen = argvlen,
                      .node = node};
    attempt a = {.node = node};
    *reply = NULL;
    return attempt_once(net, &cmd, &a, hard_ms, reply);
}

/*
 * A reply that ends the call: an error reply's status, ENOREPL, or OK. After
 * a re-send, WAIT proves nothing: the send that applied may have been the
 * first, on a connection now gone, and WAIT counts only this connection's
 * writes (none, if this send found the work done).
 */
static int final_status(rlock__net *net, const rlock__cmd *cmd, const attempt *a,
                        const redisReply *reply, int resent) {
    if (reply->type == REDIS_REPLY_ERROR)
        return rlock__fail_cmd_reply(net, a->node, reply, cmd);
    if (a->acks >= 0 && (a->acks < rlock__wait_for(net, cmd) || resent))
        return rlock__fail_acks(net, a->node, cmd, resent ? -1 : a->acks);
    return RLOCK_OK;
}

int rlock__exec(rlock__net *net, const rlock__cmd *cmd, int64_t deadline_ms, redisReply **reply,
                rlock__exec_info *info) {
    const rlock__settings *s = net->settings;
    int64_t hard_ms = extend(deadline_ms, command_ms(net, cmd));
    int status = RLOCK_EIO, maybe_sent = 0, unsent_retries = 0, redirects = 0;
    attempt a = {.node = NULL};
    int redirected = 0;
    *reply = NULL;
    for (int tries = 0;;) {
        if (info != NULL)
            *info = (rlock__exec_info){.resent = maybe_sent, .acks = -1,
                                       .sent_ms = rlock__now_ms()};
        if (!redirected)
            a.node = rlock__node_of(net, cmd); /* asked again: the master may have moved */
        redirected = 0;
        status = attempt_once(net, cmd, &a, hard_ms, reply);
        if (info != NULL) {
            info->acks = a.acks;
            info->asked = a.asking;
        }
        if (rlock__net_closing(net)) {
            rlock__drop_reply(reply);
            return rlock__fail(RLOCK_ECLOSED, 0, "client closed during %s",
                               rlock__net_cmd_name(net, cmd));
        }
        if (a.left && redirects++ < MAX_REDIRECTS) { /* to the new master at once */
            maybe_sent |= a.reached == RLOCK__REACHED_MAYBE;
            continue;
        }
        if (status == RLOCK_OK && net->route->slotted && rlock__split_by_migration(cmd, *reply) &&
            redirects++ < MAX_REDIRECTS) {
            int gathered,
                moved = rlock__gather_family(net, cmd, *reply, &a.node, hard_ms, &gathered);
            a.asking |= gathered;
            if (moved != RLOCK_OK || gathered) {
                rlock__drop_reply(reply);
                if (moved != RLOCK_OK)
                    return moved;
                redirected = 1;
                continue;
            }
        }
        int verdict = status == RLOCK_OK ? ask_route(net, cmd, *reply, &a, &redirects)
                                         : RLOCK__ROUTE_NONE;
        if (verdict == RLOCK__ROUTE_NOW) {
            rlock__drop_reply(reply);
            redirected = 1;
            continue;
        }
        a.asking = 0;
        if (status == RLOCK_OK && verdict == RLOCK__ROUTE_NONE &&
            (!is_transient_error(*reply) || (cmd->flags & RLOCK__CMD_NO_RETRY)))
            return final_status(net, cmd, &a, *reply, maybe_sent);
        if (status != RLOCK_OK && status != RLOCK_EIO)
            return status;
        /* A write that failed sent nothing Redis would run: at once, on a fresh connection. */
        if (status == RLOCK_EIO && a.reached == RLOCK__REACHED_NONE && unsent_retries++ == 0 &&
            rlock__now_ms() < hard_ms)
            continue;
        maybe_sent |= status == RLOCK_EIO && a.reached == RLOCK__REACHED_MAYBE;
        if (tries++ >= s->retry_attempts)
            break;
        int64_t resume = rlock__now_ms() + retry_pause_ms(s, tries - 1);
        if (resume >= deadline_ms)
            break;
        rlock__drop_reply(reply);
        retry_sleep(net, resume);
    }
    if (*reply != NULL) /* still "try again" after the last attempt */
        return rlock__fail_cmd_reply(net, a.node, *reply, cmd);
    return status;
}

int rlock__exec_read(rlock__net *net, const rlock__cmd *cmd, int64_t deadline_ms,
                     rlock__exec_info *info, rlock__reply_reader read, void *arg) {
    redisReply *reply = NULL;
    int status = rlock__exec(net, cmd, deadline_ms, &reply, info);
    /* Not acknowledged by enough replicas: the reply still says what the master did. */
    if (status == RLOCK_OK ||
        (status == RLOCK_ENOREPL && reply != NULL && reply->type != REDIS_REPLY_ERROR)) {
        int read_status = read(reply, arg);
        if (status == RLOCK_OK || read_status < 0)
            status = read_status;
    }
    rlock__drop_reply(&reply);
    return status;
}
