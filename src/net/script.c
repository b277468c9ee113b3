/*
 * script.c - running Lua scripts: SCRIPT LOAD of a script set when a
 * connection to a server is first made, EVALSHA on the hot path, and EVAL
 * (which also caches the script) when a server answers NOSCRIPT (restarted,
 * SCRIPT FLUSH, a replica promoted: the script cache is not replicated).
 *
 * The scripts themselves belong to the lock kinds (kind/); this file knows
 * only their names and bodies.
 *
 * Threads: any; a script set's SHA1s are written once at open, read-only after.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net.h"

const char *rlock__cmd_name(const rlock__script_set *set, const rlock__cmd *cmd) {
    if (cmd->script >= 0 && cmd->script < set->count)
        return set->defs[cmd->script].name;
    return cmd->argc > 0 ? cmd->argv[0] : "command";
}

/* "SCRIPT LOAD at host:port" (or the socket path), for messages. */
static void load_where(const redisContext *ctx, char *buf, size_t size) {
    if (ctx->connection_type == REDIS_CONN_UNIX && ctx->unix_sock.path != NULL)
        snprintf(buf, size, "SCRIPT LOAD at %s", ctx->unix_sock.path);
    else if (ctx->connection_type == REDIS_CONN_UNIX || ctx->tcp.host == NULL)
        snprintf(buf, size, "SCRIPT LOAD");
    else if (strchr(ctx->tcp.host, ':') != NULL)
        snprintf(buf, size, "SCRIPT LOAD at [%s]:%d", ctx->tcp.host, ctx->tcp.port);
    else
        snprintf(buf, size, "SCRIPT LOAD at %s:%d", ctx->tcp.host, ctx->tcp.port);
}

/* An I/O failure of the load: hiredis's text if the context has one, else errno. */
static int fail_load_io(const redisContext *ctx, int sys_errno, const char *at) {
    if (ctx->err != 0)
        return rlock__fail(RLOCK_EIO, 0, "%s: %s", at, ctx->errstr);
    return rlock__fail(RLOCK_EIO, sys_errno, "%s", at);
}

/*
 * One pipeline: every SCRIPT LOAD is written, then the replies read, all by
 * deadline_ms (poll on the socket: signals do not stretch it). The first
 * refusal (NOPERM for an ACL user without script|load) is the status.
 */
int rlock__scripts_load(redisContext *ctx, int64_t deadline_ms, rlock__script_set *set) {
    char at[320];
    int status = RLOCK_OK;
    load_where(ctx, at, sizeof(at));
    for (int i = 0; i < set->count; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", set->defs[i].body};
        if (redisAppendCommandArgv(ctx, 3, argv, NULL) != REDIS_OK)
            return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", at);
    }
    if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
        return fail_load_io(ctx, errno, at);
    for (int i = 0; i < set->count; i++) {
        redisReply *reply = NULL;
        if (rlock__io_read(ctx, deadline_ms, &reply) != RLOCK_OK)
            return fail_load_io(ctx, errno, at);
        if (reply->type == REDIS_REPLY_STRING && reply->len == 40)
            memcpy(set->sha[i], reply->str, 41);
        else if (status == RLOCK_OK)
            status = rlock__fail_reply(reply, at);
        freeReplyObject(reply);
    }
    return status;
}

int rlock__is_noscript(const redisReply *reply) {
    return reply != NULL && reply->type == REDIS_REPLY_ERROR &&
           strncmp(reply->str, "NOSCRIPT", 8) == 0;
}

#define STACK_ARGS 16

int rlock__append_cmd(redisContext *ctx, const rlock__script_set *set, const rlock__cmd *cmd,
                      int use_body) {
    const char *stack_argv[STACK_ARGS];
    size_t stack_len[STACK_ARGS];
    const char **argv = stack_argv;
    size_t *argvlen = stack_len;
    char numkeys[24];
    int argc = cmd->argc + 3, status = RLOCK_OK;

    if (cmd->script < 0)
        return redisAppendCommandArgv(ctx, cmd->argc, cmd->argv, cmd->argvlen) == REDIS_OK
                   ? RLOCK_OK
                   : RLOCK_ENOMEM;
    if (argc > STACK_ARGS) {
        argv = rlock__malloc(sizeof(*argv) * (size_t)argc);
        argvlen = rlock__malloc(sizeof(*argvlen) * (size_t)argc);
        if (argv == NULL || argvlen == NULL) {
            status = RLOCK_ENOMEM;
            goto out;
        }
    }
    argv[0] = use_body ? "EVAL" : "EVALSHA";
    argv[1] = use_body ? set->defs[cmd->script].body : set->sha[cmd->script];
    argv[2] = numkeys;
    argvlen[0] = strlen(argv[0]);
    argvlen[1] = strlen(argv[1]);
    argvlen[2] = rlock__fmt_u64(numkeys, (uint64_t)cmd->nkeys);
    memcpy(argv + 3, cmd->argv, sizeof(*argv) * (size_t)cmd->argc);
    memcpy(argvlen + 3, cmd->argvlen, sizeof(*argvlen) * (size_t)cmd->argc);
    if (redisAppendCommandArgv(ctx, argc, argv, argvlen) != REDIS_OK)
        status = RLOCK_ENOMEM; /* hiredis appends fail only for memory */
out:
    if (argv != stack_argv)
        rlock__free(argv);
    if (argvlen != stack_len)
        rlock__free(argvlen);
    return status;
}
