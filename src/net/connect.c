/*
 * connect.c - one connection to one server: a non-blocking connect bounded
 * by the call, then AUTH (password, or ACL user and password) and SELECT,
 * each by the same deadline; and the error detail of a failure, naming
 * host:port (or the socket path) and the errno behind it.
 *
 * Threads: any thread that connects (application threads through the pool,
 * the subscriber thread); no shared state.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "net.h"

const char *rlock__endpoint_str(const rlock__endpoint *ep, char *buf, size_t size) {
    if (ep->unix_path != NULL)
        snprintf(buf, size, "%s", ep->unix_path);
    else if (strchr(ep->host, ':') != NULL)
        snprintf(buf, size, "[%s]:%d", ep->host, ep->port);
    else
        snprintf(buf, size, "%s:%d", ep->host, ep->port);
    return buf;
}

/*
 * The errno behind a hiredis I/O error (hiredis 0.14 keeps only its text):
 * matched against the errors a connection can meet. 0 if none matches.
 */
static int errno_of(const redisContext *ctx) {
    static const int candidates[] = {ECONNREFUSED, ETIMEDOUT,  EHOSTUNREACH, ENETUNREACH,
                                     ECONNRESET,   EPIPE,      ENOENT,       EACCES,
                                     EADDRNOTAVAIL, ECONNABORTED, EAGAIN,    ENOTCONN};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
        if (strstr(ctx->errstr, strerror(candidates[i])) != NULL)
            return candidates[i];
    return 0;
}

int rlock__fail_io(const rlock__endpoint *ep, const redisContext *ctx, int sys_errno,
                   const char *what) {
    char at[RLOCK__WHERE_MAX];
    rlock__endpoint_str(ep, at, sizeof(at));
    if (ctx != NULL && ctx->err != 0 && sys_errno == 0) {
        int err = errno_of(ctx);
        if (err != 0)
            return rlock__fail(RLOCK_EIO, err, "%s %s", what, at);
        return rlock__fail(RLOCK_EIO, 0, "%s %s: %s", what, at, ctx->errstr);
    }
    return rlock__fail(RLOCK_EIO, sys_errno, "%s %s", what, at);
}

/* Runs one setup command (AUTH, SELECT) by deadline_ms; error replies mapped. */
static int setup_command(const rlock__endpoint *ep, redisContext *ctx, int argc,
                         const char **argv, int64_t deadline_ms) {
    redisReply *reply = NULL;
    char at[RLOCK__WHERE_MAX], what[RLOCK__WHERE_MAX + 64];
    int status = RLOCK_OK;
    if (redisAppendCommandArgv(ctx, argc, argv, NULL) != REDIS_OK)
        return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", argv[0]);
    if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK ||
        rlock__io_read(ctx, deadline_ms, &reply) != RLOCK_OK) {
        int err = errno;
        snprintf(what, sizeof(what), "%s at", argv[0]);
        return rlock__fail_io(ep, ctx, ctx->err != 0 ? 0 : err, what);
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(what, sizeof(what), "%s%s%s at %s", argv[0],
                 argc == 3 ? " as user " : "", argc == 3 ? argv[1] : "",
                 rlock__endpoint_str(ep, at, sizeof(at)));
        status = rlock__fail_reply(reply, what);
    }
    freeReplyObject(reply);
    return status;
}

static int authenticate(const rlock__endpoint *ep, redisContext *ctx, int64_t deadline_ms) {
    char db[24];
    int status = RLOCK_OK;
    if (ep->password != NULL) {
        const char *auth_user[] = {"AUTH", ep->user, ep->password};
        const char *auth[] = {"AUTH", ep->password};
        status = ep->user != NULL ? setup_command(ep, ctx, 3, auth_user, deadline_ms)
                                  : setup_command(ep, ctx, 2, auth, deadline_ms);
    }
    if (status == RLOCK_OK && ep->db != 0) {
        rlock__fmt_u64(db, (uint64_t)ep->db);
        const char *select[] = {"SELECT", db};
        status = setup_command(ep, ctx, 2, select, deadline_ms);
    }
    return status;
}

/* Completes a non-blocking connect by deadline_ms (SO_ERROR tells the outcome). */
static int finish_connect(const rlock__endpoint *ep, redisContext *ctx, int64_t deadline_ms) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (rlock__io_wait(ctx->fd, POLLOUT, deadline_ms) != RLOCK_OK)
        return rlock__fail_io(ep, NULL, errno, "connect to");
    if (getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    return err != 0 ? rlock__fail_io(ep, NULL, err, "connect to") : RLOCK_OK;
}

/* A hiredis context that failed before any socket: a name that did not resolve? */
static int failed_resolving(const rlock__endpoint *ep, const redisContext *ctx) {
    return ep->unix_path == NULL && ctx->err == REDIS_ERR_OTHER;
}

int rlock__connect(const rlock__endpoint *ep, int connect_timeout_ms, int64_t deadline_ms,
                   redisContext **out) {
    int64_t connect_by = rlock__deadline_after(connect_timeout_ms);
    int status = RLOCK_EIO;

    *out = NULL;
    if (connect_by > deadline_ms)
        connect_by = deadline_ms;
    redisContext *ctx = ep->unix_path != NULL ? redisConnectUnixNonBlock(ep->unix_path)
                                              : redisConnectNonBlock(ep->host, ep->port);
    if (ctx == NULL)
        return rlock__fail(RLOCK_ENOMEM, 0, "connect: out of memory");
    if (ctx->err != 0) {
        status = rlock__fail_io(ep, ctx, 0, failed_resolving(ep, ctx) ? "resolve" : "connect to");
        if (failed_resolving(ep, ctx))
            rlock__fail_host_not_found();
        goto fail;
    }
    if ((status = finish_connect(ep, ctx, connect_by)) != RLOCK_OK)
        goto fail;
    rlock__io_block_reads(ctx->fd); /* best effort: refused, a read costs a system call more */
    if (ep->unix_path == NULL)
        redisEnableKeepAlive(ctx);
    if ((status = authenticate(ep, ctx, connect_by)) != RLOCK_OK)
        goto fail;
    *out = ctx;
    return RLOCK_OK;
fail:
    redisFree(ctx);
    return status;
}

int rlock__run_private(redisContext *ctx, const rlock__endpoint *ep, int argc,
                        const char **argv, int64_t deadline_ms, redisReply **reply) {
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
