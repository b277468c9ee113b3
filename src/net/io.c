/*
 * io.c - reading and writing a hiredis context within an absolute deadline.
 *
 * Every context is non-blocking (REDIS_BLOCK cleared) for its whole life,
 * and every wait -- connecting, writing, reading -- is a poll() on its
 * socket with the time left to an absolute deadline, recomputed after each
 * wake-up. hiredis's own blocking read restarts on EINTR with its full
 * socket timeout, so a signal every few ms would stretch a call for ever;
 * here no signal pattern can. Writes are send(MSG_NOSIGNAL), not hiredis's
 * write(): application threads run them with their own signal mask, and a
 * socket shut down by close or reset by the peer must be an error, not a
 * SIGPIPE that ends the process.
 *
 * Threads: whichever thread holds the context; no shared state.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "net.h"

/* Milliseconds left to deadline_ms for poll(): -1 = no deadline, 0 = passed. */
static int ms_left(int64_t deadline_ms) {
    if (deadline_ms == RLOCK__NO_DEADLINE)
        return -1;
    int64_t left = deadline_ms - rlock__now_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

int rlock__io_wait(int fd, short events, int64_t deadline_ms) {
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        int timeout = ms_left(deadline_ms);
        int n = poll(&pfd, 1, timeout);
        if (n > 0)
            return RLOCK_OK;
        if (n == 0) {
            errno = ETIMEDOUT;
            return RLOCK_EIO;
        }
        if (errno != EINTR)
            return RLOCK_EIO;
    }
}

/*
 * redisBufferWrite of hiredis 0.14, but with send(MSG_NOSIGNAL): hiredis
 * uses write(), which raises SIGPIPE on a socket shut down (by close, to
 * abort a command) or reset by the peer, and application threads run this
 * with their own signal mask: the default action would end the process.
 * The failure is recorded in ctx as hiredis would (err, errstr).
 */
static int buffer_write(redisContext *ctx, int *done) {
    size_t len;
    ssize_t n = 0;
    if (ctx->err != 0)
        return REDIS_ERR;
    len = sdslen(ctx->obuf);
    if (len > 0)
        n = send(ctx->fd, ctx->obuf, len > INT_MAX ? INT_MAX : len, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ctx->err = REDIS_ERR_IO;
        snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", strerror(err));
        errno = err;
        return REDIS_ERR;
    }
    if (n > 0) {
        /* As hiredis: an emptied buffer is replaced, so a big pipeline's memory goes. */
        sds fresh = (size_t)n == len ? sdsempty() : NULL;
        if (fresh != NULL) {
            sdsfree(ctx->obuf);
            ctx->obuf = fresh;
        } else {
            sdsrange(ctx->obuf, (int)n, -1);
        }
    }
    *done = sdslen(ctx->obuf) == 0;
    return REDIS_OK;
}

int rlock__io_flush(redisContext *ctx, int64_t deadline_ms) {
    int done = 0;
    for (;;) {
        if (buffer_write(ctx, &done) != REDIS_OK)
            return RLOCK_EIO;
        if (done)
            return RLOCK_OK;
        if (rlock__io_wait(ctx->fd, POLLOUT, deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
    }
}

int rlock__io_read(redisContext *ctx, int64_t deadline_ms, redisReply **reply) {
    *reply = NULL;
    for (;;) {
        void *raw = NULL;
        if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK)
            return RLOCK_EIO;
        /* Only a fresh connection owes its name's reply (the reader's user field): tested
         * here, off the call, for the common case. */
        if (raw != NULL && ctx->reader->privdata != NULL && rlock__setup_reply(ctx, raw)) {
            freeReplyObject(raw);
            continue;
        }
        if (raw != NULL) {
            *reply = raw;
            return RLOCK_OK;
        }
        if (rlock__io_wait(ctx->fd, POLLIN, deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
        if (redisBufferRead(ctx) != REDIS_OK)
            return RLOCK_EIO;
    }
}

