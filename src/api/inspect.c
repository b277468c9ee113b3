/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inspect.c - the read-only inspection seam for rlockctl (inspect.h): raw
 * reads and pub/sub listeners through a client's own net layer, so the tool
 * reaches the right node on every kind of url without routing of its own.
 *
 * What may run is a closed list of reads (read_only_verbs); anything else is
 * refused before it is sent. The one write, rlock__inspect_fair_dequeue, is
 * a fixed script of the fair kind on a fair handle, not a command of the
 * caller's. Commands go through rlock__exec_pipeline, with
 * a node of their own (every master, a channel's node) or routed by key.
 *
 * Threads: any application thread, each call guarded as a public call is.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "inspect.h"

/* "VERB" or "VERB SUBCOMMAND": what an inspection may run. */
static const char *const read_only_verbs[] = {
    "SCAN", "TYPE", "EXISTS", "PTTL", "HGETALL", "HGET", "HLEN", "GET", "LLEN", "LRANGE",
    "ZRANGE", "ZSCORE", "ZCARD", "INFO", "ROLE", "PING", "TIME",
    "PUBSUB NUMSUB", "PUBSUB SHARDNUMSUB", "PUBSUB CHANNELS", "PUBSUB SHARDCHANNELS",
    "PUBSUB NUMPAT", "CLIENT LIST",
};

static int word_is(const char *word, size_t len, const char *want, size_t want_len) {
    return len == want_len && strncasecmp(word, want, len) == 0;
}

static int is_read_only(int argc, const char **argv, const size_t *argvlen) {
    if (argc < 1)
        return 0;
    for (size_t i = 0; i < sizeof(read_only_verbs) / sizeof(read_only_verbs[0]); i++) {
        const char *verb = read_only_verbs[i], *space = strchr(verb, ' ');
        size_t verb_len = space != NULL ? (size_t)(space - verb) : strlen(verb);
        if (!word_is(argv[0], argvlen[0], verb, verb_len))
            continue;
        if (space == NULL)
            return 1;
        if (argc >= 2 && word_is(argv[1], argvlen[1], space + 1, strlen(space + 1)))
            return 1;
    }
    return 0;
}

int rlock__inspect_masters(rlock_client *c, rlock__inspect_node **out, int max, int *n) {
    rlock__guard g;
    int status = rlock__enter(&g, c);
    if (status != RLOCK_OK)
        return status;
    *n = rlock__net_masters(&c->net, out, max);
    rlock__leave(&g);
    return RLOCK_OK;
}

rlock__inspect_node *rlock__inspect_channel_node(rlock_client *c, const char *channel,
                                                 size_t len) {
    return rlock__net_subscribe_node(&c->net, channel, len);
}

const char *rlock__inspect_node_addr(const rlock__inspect_node *node, char *buf, size_t size) {
    return rlock__endpoint_str(rlock__net_node_endpoint(node), buf, size);
}

char *rlock__inspect_prefixed(const char *prefix, const char *name, size_t len,
                              size_t *out_len) {
    return rlock__prefixed_name(prefix, name, len, out_len); /* rlock__malloc: free() */
}

int rlock__inspect_sharded(rlock_client *c) {
    return rlock__net_sharded(&c->net);
}

int rlock__inspect_clustered(rlock_client *c) {
    return rlock__net_slot_of(&c->net, "", 0) >= 0;
}

/* The lengths of argv (strlen where the caller gave none), into lens. */
static const size_t *lengths_of(const rlock__inspect_cmd *in, size_t *lens) {
    if (in->argvlen != NULL)
        return in->argvlen;
    for (int k = 0; k < in->argc; k++)
        lens[k] = strlen(in->argv[k]);
    return lens;
}

#define MAX_ARGS 16

/* Checks each command and makes the net's from it; lens holds n * MAX_ARGS lengths. */
static int to_net_cmds(const rlock__inspect_cmd *in, int n, rlock__cmd *out, size_t *lens) {
    for (int i = 0; i < n; i++) {
        if (in[i].argc < 1 || in[i].argc > MAX_ARGS)
            return rlock__fail(RLOCK_EINVAL, 0, "inspection: %d arguments (1..%d)", in[i].argc,
                               MAX_ARGS);
        const size_t *argvlen = lengths_of(&in[i], lens + (size_t)i * MAX_ARGS);
        if (!is_read_only(in[i].argc, in[i].argv, argvlen))
            return rlock__fail(RLOCK_EINVAL, 0,
                               "inspection: %.*s is not on the read-only list: not sent",
                               (int)argvlen[0], in[i].argv[0]);
        out[i] = (rlock__cmd){.script = -1, .argc = in[i].argc, .argv = in[i].argv,
                              .argvlen = argvlen, .node = in[i].node};
    }
    return RLOCK_OK;
}

int rlock__inspect_run(rlock_client *c, const rlock__inspect_cmd *cmds, int n,
                       redisReply **replies) {
    rlock__guard g;
    int acks; /* no write among them: no WAIT */
    if (cmds == NULL || replies == NULL || n < 0)
        return rlock__fail(RLOCK_EINVAL, 0, "inspection: NULL commands or replies");
    for (int i = 0; i < n; i++)
        replies[i] = NULL;
    if (n == 0)
        return RLOCK_OK;
    int status = rlock__enter(&g, c);
    if (status != RLOCK_OK)
        return status;
    rlock__cmd *net_cmds = rlock__calloc((size_t)n, sizeof(*net_cmds));
    size_t *lens = rlock__calloc((size_t)n * MAX_ARGS, sizeof(*lens));
    status = net_cmds == NULL || lens == NULL ? RLOCK_ENOMEM : to_net_cmds(cmds, n, net_cmds, lens);
    if (status == RLOCK_OK)
        status = rlock__exec_pipeline(&c->net, net_cmds, n,
                                      rlock__deadline_after(c->settings.command_timeout_ms),
                                      replies, &acks);
    rlock__free(lens);
    rlock__free(net_cmds);
    return rlock__leave_status(&g, status);
}

void rlock__inspect_close(redisContext *ctx) {
    rlock__conn_free(ctx);
}

int rlock__inspect_listen(rlock_client *c, rlock__inspect_node *node, redisContext **out) {
    rlock__guard g;
    int status = rlock__enter(&g, c);
    if (status != RLOCK_OK)
        return status;
    status = rlock__connect(rlock__net_node_endpoint(node), &c->events, c->settings.connect_timeout_ms,
                            rlock__deadline_after(c->settings.connect_timeout_ms), out);
    return rlock__leave_status(&g, status);
}

int rlock__inspect_subscribe(redisContext *ctx, int argc, const char **argv,
                             const size_t *argvlen) {
    static const char *const verbs[] = {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"};
    int allowed = 0;
    for (size_t i = 0; argc >= 2 && i < sizeof(verbs) / sizeof(verbs[0]); i++)
        allowed |= word_is(argv[0], argvlen[0], verbs[i], strlen(verbs[i]));
    if (!allowed)
        return rlock__fail(RLOCK_EINVAL, 0, "a listener sends (P|S)SUBSCRIBE only");
    if (redisAppendCommandArgv(ctx, argc, argv, argvlen) != REDIS_OK)
        return rlock__fail(RLOCK_ENOMEM, 0, "listener: %s", ctx->errstr);
    if (rlock__io_flush(ctx, rlock__deadline_after(3000)) != RLOCK_OK)
        return rlock__fail(RLOCK_EIO, errno, "listener: write failed: %s", ctx->errstr);
    return RLOCK_OK;
}

int rlock__inspect_read(redisContext *ctx, int64_t deadline_ms, redisReply **reply) {
    int status = rlock__io_read(ctx, deadline_ms, reply);
    if (status == RLOCK_OK)
        return RLOCK_OK;
    if (ctx->err == 0 && errno == ETIMEDOUT)
        return RLOCK_BUSY;
    /* errno tells only of an I/O error (not of the server closing the connection). */
    int sys_errno = ctx->err == 0 || ctx->err == REDIS_ERR_IO ? errno : 0;
    return rlock__fail(RLOCK_EIO, sys_errno, "listener: connection lost: %s",
                       ctx->errstr[0] != '\0' ? ctx->errstr : strerror(errno));
}

int64_t rlock__inspect_now_ms(void) {
    return rlock__now_ms();
}

int rlock__inspect_fair_dequeue(rlock *fair, const char *field, size_t len, long long wait_ms) {
    rlock__guard g;
    int status = rlock__enter_lock(&g, fair);
    if (status != RLOCK_OK)
        return status;
    return rlock__leave_status(&g, rlock__fair_dequeue(fair, field, len, wait_ms));
}
