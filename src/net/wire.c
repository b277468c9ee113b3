/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c - one command's round trip on a connection the caller holds:
 * EVALSHA (EVAL after NOSCRIPT), WAIT pipelined behind a write when
 * replica_acks asks for it, and the error detail that names the command and
 * the server.
 *
 * WAIT is never inside MULTI or Lua (it does not block there) and never with
 * timeout 0 (that blocks for ever): it follows the script on the same
 * connection, so the pair costs one round trip plus the replicas' time.
 *
 * Threads: whichever thread holds the connection; no shared state.
 */
#include <errno.h>
#include <stdio.h>

#include "wire.h"

int rlock__wait_for(const rlock__net *net, const rlock__cmd *cmd) {
    return (cmd->flags & RLOCK__CMD_WRITE) ? net->settings->replica_acks : 0;
}

int rlock__append_wait(const rlock__net *net, redisContext *ctx, int n) {
    char count[24], timeout[24];
    const char *argv[] = {"WAIT", count, timeout};
    size_t argvlen[] = {4, rlock__fmt_u64(count, (uint64_t)n),
                        rlock__fmt_u64(timeout, (uint64_t)net->settings->replica_ack_timeout_ms)};
    return rlock__append_argv(ctx, 3, argv, argvlen);
}

int rlock__wait_acks(const redisReply *reply) {
    return reply->type == REDIS_REPLY_INTEGER && reply->integer >= 0 ? (int)reply->integer : 0;
}

/* Reads the WAIT reply that follows a command's. */
static int read_acks(redisContext *ctx, int64_t deadline_ms, int *acks) {
    redisReply *reply = NULL;
    if (rlock__io_read(ctx, deadline_ms, &reply) != RLOCK_OK)
        return RLOCK_EIO;
    *acks = rlock__wait_acks(reply);
    freeReplyObject(reply);
    return RLOCK_OK;
}

int rlock__round_trip(rlock__net *net, redisContext *ctx, const rlock__cmd *cmd, int use_body,
                      int64_t deadline_ms, redisReply **reply, int *reached, int *acks) {
    int wait_n = rlock__wait_for(net, cmd);
    *reached = RLOCK__REACHED_NONE;
    *acks = -1;
    for (; use_body < 2; use_body++) {
        int status = rlock__append_cmd(ctx, &net->scripts, cmd, use_body);
        if (status == RLOCK_OK && wait_n > 0)
            status = rlock__append_wait(net, ctx, wait_n);
        if (status != RLOCK_OK)
            return status;
        if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
        *reached = RLOCK__REACHED_MAYBE;
        if (rlock__io_read(ctx, deadline_ms, reply) != RLOCK_OK)
            return RLOCK_EIO;
        /* The reply alone is no outcome: the caller re-sends, or reports RLOCK_EIO (a
           reply kept here was reported as an error reply of no type). */
        if (wait_n > 0 && read_acks(ctx, deadline_ms, acks) != RLOCK_OK) {
            rlock__drop_reply(reply);
            return RLOCK_EIO;
        }
        if (cmd->script < 0 || use_body || !rlock__is_noscript(*reply))
            return RLOCK_OK;
        rlock__drop_reply(reply);
    }
    return RLOCK_EIO; /* not reached */
}

rlock__node *rlock__node_of(rlock__net *net, const rlock__cmd *cmd) {
    rlock__route *route = net->route;
    int i = cmd->script >= 0 ? 0 : 1;
    if (cmd->node != NULL)
        return cmd->node;
    if ((cmd->script >= 0 && cmd->nkeys == 0) || i >= cmd->argc)
        return route->ops->node_for(route, NULL, 0);
    return route->ops->node_for(route, cmd->argv[i], cmd->argvlen[i]);
}

const char *rlock__net_cmd_name(const rlock__net *net, const rlock__cmd *cmd) {
    return rlock__cmd_name(&net->scripts, cmd);
}

/* "ACQUIRE on 'name'" (a script's first key is the lock's name), else "PING". */
static const char *cmd_what(rlock__net *net, const rlock__cmd *cmd, char *buf, size_t size) {
    if (cmd->script >= 0 && cmd->nkeys > 0)
        snprintf(buf, size, "%s on '%.*s'", rlock__net_cmd_name(net, cmd),
                 cmd->argvlen[0] > 200 ? 200 : (int)cmd->argvlen[0], cmd->argv[0]);
    else
        snprintf(buf, size, "%s", rlock__net_cmd_name(net, cmd));
    return buf;
}

int rlock__fail_cmd_reply(rlock__net *net, const rlock__node *node, const redisReply *reply,
                          const rlock__cmd *cmd) {
    char at[RLOCK__WHERE_MAX], name[256], what[RLOCK__WHERE_MAX + 264];
    snprintf(what, sizeof(what), "%s at %s", cmd_what(net, cmd, name, sizeof(name)),
             rlock__endpoint_str(&node->endpoint, at, sizeof(at)));
    return rlock__fail_reply(reply, what);
}

int rlock__fail_cmd_io(rlock__net *net, rlock__node *node, const redisContext *ctx,
                       const rlock__cmd *cmd) {
    char name[256], what[264];
    rlock__route *route = net->route;
    snprintf(what, sizeof(what), "%s at", cmd_what(net, cmd, name, sizeof(name)));
    int status = rlock__fail_io(&node->endpoint, ctx, ctx != NULL && ctx->err != 0 ? 0 : errno,
                                what);
    rlock__link_down(net->events, status, rlock__last_message());
    if (route->ops->suspect != NULL)
        route->ops->suspect(route, node);
    return status;
}

void rlock__node_unreachable(rlock__net *net, rlock__node *node) {
    rlock__route *route = net->route;
    rlock__link_down(net->events, RLOCK_EIO, rlock__last_message());
    if (route->ops->suspect != NULL)
        route->ops->suspect(route, node);
}

int rlock__fail_acks(rlock__net *net, const rlock__node *node, const rlock__cmd *cmd, int acks) {
    char at[RLOCK__WHERE_MAX];
    if (acks < 0)
        return rlock__fail(RLOCK_ENOREPL, 0, "%s at %s: sent again after a lost reply: whether "
                                             "replicas acknowledged it is unknown",
                           rlock__net_cmd_name(net, cmd),
                           rlock__endpoint_str(&node->endpoint, at, sizeof(at)));
    return rlock__fail(RLOCK_ENOREPL, 0, "%s at %s: WAIT: %d of %d replicas acknowledged within "
                                         "%d ms", rlock__net_cmd_name(net, cmd),
                       rlock__endpoint_str(&node->endpoint, at, sizeof(at)), acks,
                       net->settings->replica_acks, net->settings->replica_ack_timeout_ms);
}

void rlock__drop_reply(redisReply **reply) {
    if (*reply != NULL)
        freeReplyObject(*reply);
    *reply = NULL;
}
