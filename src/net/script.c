/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * script.c - running Lua scripts: SCRIPT LOAD of a script set when a
 * connection to a server is first made, EVALSHA on the hot path, and EVAL
 * (which also caches the script) when a server answers NOSCRIPT (restarted,
 * SCRIPT FLUSH, a replica promoted: the script cache is not replicated).
 *
 * The scripts themselves belong to the lock kinds (kind/); this file knows
 * only their names and bodies. An error a script meets names its line as
 * "user_script:N": line N of the body sent, which is not line N of its .lua
 * file (kind/lua/: preludes come first, comment lines are not sent); the
 * build's gen/lua_scripts.h maps each body's lines back to file:line
 * (kind/scripts.c).
 *
 * Threads: any; a script set's SHA1s are written once at open, read-only after.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

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
    /* The connection's first exchange (its name's reply still owed), ended as a TLS port
     * ends a plaintext command. */
    if (ctx->reader->privdata != NULL && rlock__maybe_tls_port(ctx, sys_errno))
        return rlock__fail_errno(RLOCK_EIO, sys_errno, "%s: %s (is it a TLS port? use rediss://)",
                                 at, ctx->err != 0 ? ctx->errstr : strerror(sys_errno));
    if (ctx->err == REDIS_ERR_PROTOCOL)
        return rlock__fail(RLOCK_EIO, 0, "%s: %s: %s", at, ctx->errstr, rlock__not_resp);
    if (ctx->err != 0)
        return rlock__fail(RLOCK_EIO, 0, "%s: %s", at, ctx->errstr);
    if (sys_errno == ETIMEDOUT)
        return rlock__fail_errno(RLOCK_EIO, ETIMEDOUT, "%s: %s", at, rlock__no_reply);
    return rlock__fail(RLOCK_EIO, sys_errno, "%s", at);
}

/* The oldest server rlock runs on: 6.2 (ACL channel rules, GETDEL-era scripting, CLIENT
 * PAUSE WRITE). Valkey reports the Redis release it is compatible with (7.2.4). */
#define OLDEST_MAJOR 6
#define OLDEST_MINOR 2

int rlock__server_too_old(const char *info, char *version, size_t size) {
    const char *at = info != NULL ? strstr(info, "redis_version:") : NULL;
    version[0] = '\0';
    if (at == NULL)
        return 0; /* not told: not refused */
    at += strlen("redis_version:");
    snprintf(version, size, "%.*s", (int)strcspn(at, "\r\n"), at);
    int major = atoi(at), minor = 0;
    const char *dot = strchr(at, '.');
    if (dot != NULL && dot < at + strcspn(at, "\r\n"))
        minor = atoi(dot + 1);
    return major < OLDEST_MAJOR || (major == OLDEST_MAJOR && minor < OLDEST_MINOR);
}

/* The INFO server reply that comes before the loads: a server too old is refused; an INFO the
 * ACL refuses (the least-privilege user has none) tells nothing and refuses nothing. */
static int check_version(const redisReply *reply, const char *at) {
    char version[32];
    if (reply->type != REDIS_REPLY_STRING)
        return RLOCK_OK;
    if (!rlock__server_too_old(reply->str, version, sizeof version))
        return RLOCK_OK;
    return rlock__fail(RLOCK_EREDIS, 0, "%s: the server is Redis %s; rlock needs Redis %d.%d or "
                                        "later (or Valkey)", at, version, OLDEST_MAJOR,
                       OLDEST_MINOR);
}

/*
 * One pipeline: INFO server and every SCRIPT LOAD are written, then the
 * replies read, all by deadline_ms (poll on the socket: signals do not
 * stretch it). A server older than the oldest supported one, else the first
 * refusal (NOPERM for an ACL user without script|load), is the status.
 */
int rlock__scripts_load(redisContext *ctx, int64_t deadline_ms, rlock__script_set *set) {
    char at[320];
    int status = RLOCK_OK;
    load_where(ctx, at, sizeof(at));
    const char *info[] = {"INFO", "server"};
    if (redisAppendCommandArgv(ctx, 2, info, NULL) != REDIS_OK)
        return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", at);
    for (int i = 0; i < set->count; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", set->defs[i].body};
        if (redisAppendCommandArgv(ctx, 3, argv, NULL) != REDIS_OK)
            return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", at);
    }
    if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
        return fail_load_io(ctx, errno, at);
    redisReply *version = NULL;
    if (rlock__io_read(ctx, deadline_ms, &version) != RLOCK_OK)
        return fail_load_io(ctx, errno, at);
    status = check_version(version, at);
    freeReplyObject(version);
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

/* The longest "$<length>\r\n" (or "*<count>\r\n") header: a mark, 20 digits, CRLF. */
#define HEADER_MAX 23

/* Writes "<mark><n>\r\n" at p; returns the end. */
static char *put_header(char *p, char mark, uint64_t n) {
    *p++ = mark;
    p += rlock__fmt_u64(p, n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/*
 * The most bytes one command may take: sdsIncrLen grows a length by an int
 * (hiredis's own formatting returns an int length too). Far above any
 * command of ours (names are at most RLOCK_MAX_NAME_LEN, groups
 * RLOCK_GROUP_MAX locks), so only a caller's bug reaches it.
 */
#define COMMAND_MAX ((size_t)INT_MAX)

/* The bytes n arguments take at most, headers and CRLFs included; > COMMAND_MAX: too many. */
static size_t args_room(int n, const size_t *len) {
    size_t room = 0;
    for (int i = 0; i < n && room <= COMMAND_MAX; i++)
        room += len[i] > COMMAND_MAX ? SIZE_MAX - room : HEADER_MAX + len[i] + 2;
    return room;
}

/* Writes n arguments as RESP bulk strings at p; returns the end. */
static char *put_args(char *p, int n, const char **argv, const size_t *len) {
    for (int i = 0; i < n; i++) {
        p = put_header(p, '$', len[i]);
        memcpy(p, argv[i], len[i]);
        p += len[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    return p;
}

/*
 * What redisAppendCommandArgv appends -- the RESP array of the head's
 * arguments and then argv's -- written straight into ctx's output buffer,
 * grown once. hiredis 0.14 builds a separate string with a generic
 * sdscatfmt call per part and then copies it (about 4 000 instructions per
 * EVALSHA of a lock's, under callgrind; this, a few hundred: docs/design.md
 * section 6). Never touches the buffer on failure (RLOCK_ENOMEM: no memory,
 * or over COMMAND_MAX bytes).
 */
static int append_resp(redisContext *ctx, int nhead, const char **head, const size_t *headlen,
                       int argc, const char **argv, const size_t *argvlen) {
    size_t head_room = args_room(nhead, headlen), argv_room = args_room(argc, argvlen);
    if (head_room > COMMAND_MAX - HEADER_MAX || argv_room > COMMAND_MAX - HEADER_MAX - head_room)
        return RLOCK_ENOMEM;
    sds buf = sdsMakeRoomFor(ctx->obuf, HEADER_MAX + head_room + argv_room);
    if (buf == NULL)
        return RLOCK_ENOMEM;
    ctx->obuf = buf;
    char *start = buf + sdslen(buf), *p = put_header(start, '*', (uint64_t)(nhead + argc));
    p = put_args(p, nhead, head, headlen);
    p = put_args(p, argc, argv, argvlen);
    sdsIncrLen(buf, (int)(p - start));
    return RLOCK_OK;
}

int rlock__append_argv(redisContext *ctx, int argc, const char **argv, const size_t *argvlen) {
    return append_resp(ctx, 0, argv, argvlen, argc, argv, argvlen); /* no head */
}

int rlock__append_cmd(redisContext *ctx, const rlock__script_set *set, const rlock__cmd *cmd,
                      int use_body) {
    char numkeys[24];
    if (cmd->script < 0)
        return rlock__append_argv(ctx, cmd->argc, cmd->argv, cmd->argvlen);
    const char *head[] = {use_body ? "EVAL" : "EVALSHA",
                          use_body ? set->defs[cmd->script].body : set->sha[cmd->script], numkeys};
    size_t headlen[] = {use_body ? 4 : 7, strlen(head[1]),
                        rlock__fmt_u64(numkeys, (uint64_t)cmd->nkeys)};
    return append_resp(ctx, 3, head, headlen, cmd->argc, cmd->argv, cmd->argvlen);
}
