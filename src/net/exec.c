/*
 * exec.c - running commands: the node the route names for the command's
 * key, a pooled connection, the round trip, and safe retries -- all within
 * absolute deadlines (net.h says which). Pipelines (the watchdog's renewal
 * rounds) and commands sent ahead (a waiter's ACQUIRE, written by the
 * subscriber thread) take the same path without retries.
 *
 * Threads: application threads, the watchdog thread, and the subscriber
 * thread (send ahead). No state of its own: the pools and the net's
 * `closing` carry the shared state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

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

/* What a round trip did: the command surely never reached Redis, or may have. */
enum { REACHED_NONE, REACHED_MAYBE };

/*
 * Sends cmd and reads its reply on ctx by deadline_ms. An EVALSHA answered
 * NOSCRIPT is sent again as EVAL (which also caches the script): one extra
 * round trip after a restart or SCRIPT FLUSH. *reached says whether a
 * failure may have let the command run (a failed write sends nothing that
 * Redis would run: a partial command is never executed).
 */
static int round_trip(rlock__net *net, redisContext *ctx, const rlock__cmd *cmd, int use_body,
                      int64_t deadline_ms, redisReply **reply, int *reached) {
    *reached = REACHED_NONE;
    for (; use_body < 2; use_body++) {
        int status = rlock__append_cmd(ctx, &net->scripts, cmd, use_body);
        if (status != RLOCK_OK)
            return status;
        if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
        *reached = REACHED_MAYBE;
        if (rlock__io_read(ctx, deadline_ms, reply) != RLOCK_OK)
            return RLOCK_EIO;
        if (cmd->script < 0 || use_body || !rlock__is_noscript(*reply))
            return RLOCK_OK;
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return RLOCK_EIO; /* not reached */
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

static const char *cmd_name(const rlock__net *net, const rlock__cmd *cmd) {
    return rlock__cmd_name(&net->scripts, cmd);
}

/* Records an error reply to cmd: Redis's text, the command and where. */
static int fail_cmd_reply(rlock__net *net, const rlock__node *node, const redisReply *reply,
                          const rlock__cmd *cmd) {
    char at[RLOCK__WHERE_MAX], what[RLOCK__WHERE_MAX + 64];
    snprintf(what, sizeof(what), "%s at %s", cmd_name(net, cmd),
             rlock__endpoint_str(&node->endpoint, at, sizeof(at)));
    return rlock__fail_reply(reply, what);
}

/* Records an I/O failure of a command at node. */
static int fail_cmd_io(rlock__net *net, const rlock__node *node, const redisContext *ctx,
                       const rlock__cmd *cmd) {
    char what[64];
    snprintf(what, sizeof(what), "%s at", cmd_name(net, cmd));
    int status = rlock__fail_io(&node->endpoint, ctx, ctx != NULL && ctx->err != 0 ? 0 : errno,
                                what);
    rlock__link_down(net->events, status, rlock__last_message());
    return status;
}

/* The key a command is about, for routing: KEYS[1] of a script, argv[1] of a command. */
static rlock__node *node_of(rlock__net *net, const rlock__cmd *cmd) {
    int i = cmd->script >= 0 ? 0 : 1;
    if ((cmd->script >= 0 && cmd->nkeys == 0) || i >= cmd->argc)
        return net->route->ops->node_for(net->route, NULL, 0);
    return net->route->ops->node_for(net->route, cmd->argv[i], cmd->argvlen[i]);
}

/*
 * Sends ASKING on ctx (Cluster's one-shot permission for the next command
 * of a key being imported). Its reply is read before the command is sent.
 */
static int send_asking(rlock__net *net, redisContext *ctx, int64_t by, int *reached) {
    static const char *const argv[] = {"ASKING"};
    static const size_t argvlen[] = {6};
    rlock__cmd asking = {.script = -1, .argc = 1, .argv = (const char **)argv, .argvlen = argvlen};
    redisReply *reply = NULL;
    int status = round_trip(net, ctx, &asking, 0, by, &reply, reached);
    if (status == RLOCK_OK && reply->type == REDIS_REPLY_ERROR)
        status = rlock__fail_reply(reply, "ASKING");
    if (reply != NULL)
        freeReplyObject(reply);
    *reached = REACHED_NONE; /* the command itself has not been sent */
    return status;
}

/*
 * One attempt on node: a pooled connection (queueing by the attempt's
 * deadline), a connection if needed, the round trip. *reached as for
 * round_trip.
 */
static int attempt_once(rlock__net *net, rlock__node *node, const rlock__cmd *cmd, int asking,
                        int64_t hard_ms, redisReply **reply, int *reached) {
    const rlock__settings *s = net->settings;
    int64_t start = rlock__now_ms();
    int64_t by = min_deadline(start + s->command_timeout_ms, hard_ms);
    int status;
    *reached = REACHED_NONE;
    rlock__conn *conn = rlock__pool_take(&node->pool, by, &status);
    if (conn == NULL)
        return status == RLOCK_ECLOSED
                   ? RLOCK_ECLOSED
                   : rlock__fail(RLOCK_EIO, ETIMEDOUT,
                                 "%s: no pooled connection free within %lld ms (pool_size %d)",
                                 cmd_name(net, cmd), (long long)(by - start), s->pool_size);
    status = rlock__pool_connect(conn, s->connect_timeout_ms,
                                 min_deadline(start + s->connect_timeout_ms, hard_ms));
    if (status == RLOCK_EIO)
        rlock__link_down(net->events, status, rlock__last_message());
    if (status != RLOCK_OK) {
        rlock__pool_give(conn, 0);
        return status;
    }
    /* No time left for a reply: sending would only let Redis run what we then call failed. */
    if (rlock__now_ms() >= by) {
        rlock__pool_give(conn, 1);
        return rlock__fail(RLOCK_EIO, ETIMEDOUT, "%s not sent: the call's time bound had passed",
                           cmd_name(net, cmd));
    }
    if (asking)
        status = send_asking(net, conn->ctx, by, reached);
    if (status == RLOCK_OK)
        status = round_trip(net, conn->ctx, cmd, 0, by, reply, reached);
    if (status == RLOCK_EIO)
        status = fail_cmd_io(net, node, conn->ctx, cmd);
    else if (status == RLOCK_OK)
        rlock__link_up(net->events);
    rlock__pool_give(conn, status == RLOCK_OK);
    return status;
}

static void drop_reply(redisReply **reply) {
    if (*reply != NULL)
        freeReplyObject(*reply);
    *reply = NULL;
}

/* A redirect is followed at once, at most this many times in one call. */
#define MAX_REDIRECTS 5

/*
 * Whether the reply moves the command to another node (the route says):
 * then *node and *asking are updated and the command goes there at once.
 */
static int follow_redirect(rlock__net *net, redisReply **reply, rlock__node **node, int *asking,
                           int *redirects) {
    if (*reply == NULL || (*reply)->type != REDIS_REPLY_ERROR || *redirects >= MAX_REDIRECTS)
        return 0;
    rlock__node *to = net->route->ops->redirect(net->route, *reply, asking);
    if (to == NULL)
        return 0;
    (*redirects)++;
    *node = to;
    drop_reply(reply);
    return 1;
}

int rlock__exec(rlock__net *net, const rlock__cmd *cmd, int64_t deadline_ms, redisReply **reply,
                int *resent) {
    const rlock__settings *s = net->settings;
    int64_t hard_ms = extend(deadline_ms, s->command_timeout_ms);
    int status = RLOCK_EIO, maybe_sent = 0, reached, unsent_retries = 0, redirects = 0, asking = 0;
    rlock__node *node = node_of(net, cmd);
    *reply = NULL;
    if (resent != NULL)
        *resent = 0;
    for (int attempt = 0;;) {
        if (resent != NULL && maybe_sent)
            *resent = 1;
        status = attempt_once(net, node, cmd, asking, hard_ms, reply, &reached);
        asking = 0;
        if (rlock__net_closing(net)) {
            drop_reply(reply);
            return rlock__fail(RLOCK_ECLOSED, 0, "client closed during %s", cmd_name(net, cmd));
        }
        if (status == RLOCK_OK && follow_redirect(net, reply, &node, &asking, &redirects))
            continue;
        if (status == RLOCK_OK && !is_transient_error(*reply))
            return (*reply)->type == REDIS_REPLY_ERROR ? fail_cmd_reply(net, node, *reply, cmd)
                                                       : RLOCK_OK;
        if (status != RLOCK_OK && status != RLOCK_EIO)
            return status;
        /* A write that failed sent nothing Redis would run: at once, on a fresh connection. */
        if (status == RLOCK_EIO && reached == REACHED_NONE && unsent_retries++ == 0 &&
            rlock__now_ms() < hard_ms)
            continue;
        maybe_sent |= status == RLOCK_EIO && reached == REACHED_MAYBE;
        if (attempt++ >= s->retry_attempts)
            break;
        int64_t resume = rlock__now_ms() + retry_pause_ms(s, attempt - 1);
        if (resume >= deadline_ms)
            break;
        drop_reply(reply);
        retry_sleep(net, resume);
    }
    if (*reply != NULL) /* still "try again" after the last attempt */
        return fail_cmd_reply(net, node, *reply, cmd);
    return status;
}

int rlock__exec_read(rlock__net *net, const rlock__cmd *cmd, int64_t deadline_ms, int *resent,
                     rlock__reply_reader read, void *arg) {
    redisReply *reply = NULL;
    int status = rlock__exec(net, cmd, deadline_ms, &reply, resent);
    if (status == RLOCK_OK)
        status = read(reply, arg);
    if (reply != NULL)
        freeReplyObject(reply);
    return status;
}

/* Sends the pipeline on ctx and reads its n replies by deadline_ms; NOSCRIPT re-run as EVAL. */
static int pipeline_round_trip(rlock__net *net, redisContext *ctx, const rlock__cmd *cmds, int n,
                               int64_t deadline_ms, redisReply **replies) {
    int reached, status = RLOCK_OK;
    for (int j = 0; j < n && status == RLOCK_OK; j++)
        status = rlock__append_cmd(ctx, &net->scripts, &cmds[j], 0);
    if (status == RLOCK_OK && rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
        status = RLOCK_EIO;
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        if (rlock__io_read(ctx, deadline_ms, &replies[i]) != RLOCK_OK)
            status = RLOCK_EIO;
    /* Scripts flushed meanwhile: re-run the ones answered NOSCRIPT as EVAL. */
    for (int j = 0; j < n && status == RLOCK_OK; j++) {
        if (!rlock__is_noscript(replies[j]))
            continue;
        drop_reply(&replies[j]);
        status = round_trip(net, ctx, &cmds[j], 1, deadline_ms, &replies[j], &reached);
    }
    return status;
}

int rlock__exec_pipeline(rlock__net *net, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                         redisReply **replies) {
    rlock__node *node = node_of(net, &cmds[0]);
    int status;
    for (int j = 0; j < n; j++)
        replies[j] = NULL;
    rlock__conn *conn = rlock__pool_take(&node->pool, deadline_ms, &status);
    if (conn == NULL)
        return status == RLOCK_ECLOSED
                   ? RLOCK_ECLOSED
                   : rlock__fail(RLOCK_EIO, ETIMEDOUT, "renewal: no pooled connection free");
    status = rlock__pool_connect(conn, net->settings->connect_timeout_ms, deadline_ms);
    if (status == RLOCK_OK) {
        status = pipeline_round_trip(net, conn->ctx, cmds, n, deadline_ms, replies);
        if (status == RLOCK_EIO)
            status = fail_cmd_io(net, node, conn->ctx, &cmds[0]);
        else if (status == RLOCK_OK)
            rlock__link_up(net->events);
    } else if (status == RLOCK_EIO) {
        rlock__link_down(net->events, status, rlock__last_message());
    }
    rlock__pool_give(conn, status == RLOCK_OK);
    if (status != RLOCK_OK)
        for (int j = 0; j < n; j++)
            drop_reply(&replies[j]);
    return rlock__net_closing(net) && status != RLOCK_OK ? RLOCK_ECLOSED : status;
}

rlock__conn *rlock__send_ahead(rlock__net *net, const rlock__cmd *cmd) {
    rlock__conn *conn = rlock__pool_take_idle(&node_of(net, cmd)->pool);
    if (conn == NULL)
        return NULL;
    /* An idle slot has nothing buffered: this small write does not wait. */
    if (rlock__append_cmd(conn->ctx, &net->scripts, cmd, 0) != RLOCK_OK ||
        rlock__io_flush(conn->ctx, rlock__now_ms()) != RLOCK_OK) {
        rlock__pool_give(conn, 0);
        return NULL;
    }
    return conn;
}

int rlock__read_ahead(rlock__conn *conn, int64_t deadline_ms, redisReply **reply) {
    int status = rlock__io_read(conn->ctx, deadline_ms, reply);
    rlock__pool_give(conn, status == RLOCK_OK);
    return status;
}
