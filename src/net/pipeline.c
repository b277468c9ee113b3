/*
 * pipeline.c - commands that skip exec.c's retries: a pipeline of script
 * calls in one round trip (the watchdog's renewal rounds: the watchdog
 * retries next round), and a command sent ahead on an idle connection whose
 * reply another thread reads (a waiter's attempt, written by the subscriber
 * thread before it wakes the waiter).
 *
 * Threads: the watchdog thread (pipelines), the subscriber thread (send
 * ahead) and application threads (read ahead).
 */
#include <errno.h>

#include "wire.h"

/* The replicas the pipeline's closing WAIT must count: any write asks for it. */
static int pipeline_wait_for(const rlock__net *net, const rlock__cmd *cmds, int n) {
    for (int j = 0; j < n; j++)
        if (rlock__wait_for(net, &cmds[j]) > 0)
            return rlock__wait_for(net, &cmds[j]);
    return 0;
}

/* Re-runs as EVAL the calls answered NOSCRIPT (scripts flushed meanwhile). */
static int rerun_noscript(rlock__net *net, redisContext *ctx, const rlock__cmd *cmds, int n,
                          int64_t deadline_ms, redisReply **replies, int *acks) {
    int status = RLOCK_OK, reached, rerun_acks;
    for (int j = 0; j < n && status == RLOCK_OK; j++) {
        if (!rlock__is_noscript(replies[j]))
            continue;
        rlock__drop_reply(&replies[j]);
        status = rlock__round_trip(net, ctx, &cmds[j], 1, deadline_ms, &replies[j], &reached,
                                   &rerun_acks);
        if (rerun_acks >= 0 && (*acks < 0 || rerun_acks < *acks))
            *acks = rerun_acks;
    }
    return status;
}

/* Sends the pipeline (and WAIT) on ctx and reads its replies by deadline_ms. */
static int pipeline_round_trip(rlock__net *net, redisContext *ctx, const rlock__cmd *cmds, int n,
                               int64_t deadline_ms, redisReply **replies, int *acks) {
    int wait_n = pipeline_wait_for(net, cmds, n), status = RLOCK_OK;
    redisReply *wait_reply = NULL;
    for (int j = 0; j < n && status == RLOCK_OK; j++)
        status = rlock__append_cmd(ctx, &net->scripts, &cmds[j], 0);
    if (status == RLOCK_OK && wait_n > 0)
        status = rlock__append_wait(net, ctx, wait_n);
    if (status == RLOCK_OK && rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
        status = RLOCK_EIO;
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        if (rlock__io_read(ctx, deadline_ms, &replies[i]) != RLOCK_OK)
            status = RLOCK_EIO;
    if (status == RLOCK_OK && wait_n > 0) {
        if (rlock__io_read(ctx, deadline_ms, &wait_reply) != RLOCK_OK)
            return RLOCK_EIO;
        *acks = rlock__wait_acks(wait_reply);
        freeReplyObject(wait_reply);
    }
    return status == RLOCK_OK ? rerun_noscript(net, ctx, cmds, n, deadline_ms, replies, acks)
                              : status;
}

int rlock__exec_pipeline(rlock__net *net, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                         redisReply **replies, int *acks) {
    rlock__node *node = rlock__node_of(net, &cmds[0]);
    int status;
    *acks = -1;
    for (int j = 0; j < n; j++)
        replies[j] = NULL;
    rlock__conn *conn = rlock__pool_take(&node->pool, deadline_ms, &status);
    if (conn == NULL)
        return status == RLOCK_ECLOSED
                   ? RLOCK_ECLOSED
                   : rlock__fail(RLOCK_EIO, ETIMEDOUT, "renewal: no pooled connection free");
    status = rlock__pool_connect(conn, net->settings->connect_timeout_ms, deadline_ms);
    if (status == RLOCK_OK) {
        status = pipeline_round_trip(net, conn->ctx, cmds, n, deadline_ms, replies, acks);
        if (status == RLOCK_EIO)
            rlock__fail_cmd_io(net, node, conn->ctx, &cmds[0]);
        else if (status == RLOCK_OK)
            rlock__link_up(net->events);
    } else if (status == RLOCK_EIO) {
        rlock__node_unreachable(net, node);
    }
    rlock__pool_give(conn, status == RLOCK_OK);
    if (status != RLOCK_OK)
        for (int j = 0; j < n; j++)
            rlock__drop_reply(&replies[j]);
    return rlock__net_closing(net) && status != RLOCK_OK ? RLOCK_ECLOSED : status;
}

rlock__conn *rlock__send_ahead(rlock__net *net, const rlock__cmd *cmd) {
    /* With WAIT, an attempt's answer means nothing until the replicas acknowledge it. */
    if (rlock__wait_for(net, cmd) > 0)
        return NULL;
    rlock__conn *conn = rlock__pool_take_idle(&rlock__node_of(net, cmd)->pool);
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
