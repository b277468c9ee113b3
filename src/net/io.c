/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io.c - reading and writing a hiredis context within an absolute deadline.
 *
 * Every context is non-blocking for hiredis (REDIS_BLOCK cleared) for its
 * whole life, and every wait -- connecting, writing, reading -- is bounded
 * by an absolute deadline, with the time left recomputed after each
 * wake-up. hiredis's own blocking read restarts on EINTR with its full
 * socket timeout, so a signal every few ms would stretch a call for ever;
 * here no signal pattern can. Writes are send(MSG_NOSIGNAL | MSG_DONTWAIT),
 * not hiredis's write(): application threads run them with their own
 * signal mask, and a socket shut down by close or reset by the peer must be
 * an error, not a SIGPIPE that ends the process.
 *
 * Reading a reply first waits in read() itself (TLS: in its first recv,
 * tls_bio.c), not in poll(): a lock's reply comes in one piece (TLS: one
 * record), so a round trip is one send and one read, as for
 * a blocking hiredis client (poll first costs a system call more per round
 * trip: ~1 us of client CPU per command, bench_cluster -c). For that the
 * socket blocks for reads (rlock__io_block_reads: O_NONBLOCK cleared,
 * SO_RCVTIMEO of READ_SLICE_MS), and that first read is made only when the
 * deadline is further away than one slice and its lateness (SLICE_LATE_MS:
 * a receive timeout ends on a timer tick). Anything else -- less time left,
 * the slice passed, a reply in several pieces, a signal (a read with a
 * receive timeout is never restarted) -- waits in poll() with the exact time
 * left. A socket still non-blocking only costs that first read's EAGAIN.
 *
 * Threads: whichever thread holds the context; no shared state.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "conn.h"

/* Milliseconds left to deadline_ms for poll(): -1 = no deadline, 0 = passed. */
static int ms_left(int64_t deadline_ms) {
    if (deadline_ms == RLOCK__NO_DEADLINE)
        return -1;
    int64_t left = deadline_ms - rlock__now_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* The longest a read waits in read(); then, if the reply is still to come, in poll(). */
#define READ_SLICE_MS 100
/*
 * How late a receive timeout may end: the kernel rounds it up to timer ticks
 * and wakes on a tick (2-4 ms late at HZ 250, up to 20 ms at HZ 100;
 * poll() uses high-resolution timers). A deadline closer than the slice plus
 * this is waited for in poll(), or it could be overrun by that much.
 */
#define SLICE_LATE_MS 20

int rlock__io_block_reads(int fd) {
    struct timeval slice = {.tv_sec = READ_SLICE_MS / 1000, .tv_usec = READ_SLICE_MS % 1000 * 1000};
    int flags = fcntl(fd, F_GETFL);
    /* The receive timeout first: a blocking socket without one could outwait any deadline. */
    if (flags < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof(slice)) != 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        return RLOCK_EIO;
    return RLOCK_OK;
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

int rlock__io_wait_any(struct pollfd *fds, int n, int64_t deadline_ms) {
    for (;;) {
        int ready = poll(fds, (nfds_t)n, ms_left(deadline_ms));
        if (ready > 0)
            return ready;
        if (ready == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (errno != EINTR)
            return -1;
    }
}

/* An output buffer up to this size is kept when emptied (a lock's commands fit). */
#define KEEP_OUTPUT_BUFFER 4096

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
    rlock__tls_conn *tls = len > 0 ? rlock__tls_of(ctx) : NULL;
    if (tls != NULL)
        n = rlock__tls_send(ctx, tls, ctx->obuf, len);
    else if (len > 0)
        n = send(ctx->fd, ctx->obuf, len > INT_MAX ? INT_MAX : len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && tls != NULL && errno != EAGAIN)
        return REDIS_ERR; /* recorded in ctx by tls.c, in TLS's words */
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ctx->err = REDIS_ERR_IO;
        snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", strerror(err));
        errno = err;
        return REDIS_ERR;
    }
    if ((size_t)n == len && sdsalloc(ctx->obuf) <= KEEP_OUTPUT_BUFFER) {
        sdsclear(ctx->obuf); /* kept: the next command needs no allocation */
    } else if (n > 0) {
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
        if (rlock__io_wait(ctx->fd, rlock__io_events(ctx, POLLOUT), deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
    }
}

/*
 * What came on ctx, into its reader. wait: the first read may wait for the
 * peer, one slice at most; a plaintext read always may (its socket blocks
 * reads), but is only made when poll() said readable or wait is set.
 */
static int fill(redisContext *ctx, int wait) {
    rlock__tls_conn *tls = rlock__tls_of(ctx);
    if (tls == NULL)
        return redisBufferRead(ctx);
    return ctx->err != 0 ? REDIS_ERR : rlock__tls_fill(ctx, tls, wait);
}

int rlock__io_read(redisContext *ctx, int64_t deadline_ms, redisReply **reply) {
    int left = ms_left(deadline_ms);
    /* The first wait, in read(). */
    int in_read = left < 0 || left > READ_SLICE_MS + SLICE_LATE_MS;
    *reply = NULL;
    for (;;) {
        void *raw = NULL;
        if (rlock__io_next(ctx, &raw) != REDIS_OK)
            return RLOCK_EIO;
        if (raw != NULL) {
            *reply = raw;
            return RLOCK_OK;
        }
        if (!in_read &&
            rlock__io_wait(ctx->fd, rlock__io_events(ctx, POLLIN), deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
        /* hiredis (REDIS_BLOCK cleared) and tls.c take EAGAIN -- the slice passed -- and EINTR
         * as "later". */
        if (fill(ctx, in_read) != REDIS_OK)
            return RLOCK_EIO;
        in_read = 0;
    }
}

int rlock__io_fill(redisContext *ctx) {
    return fill(ctx, 0);
}

short rlock__io_events(const redisContext *ctx, short usual) {
    const rlock__tls_conn *tls = rlock__tls_of(ctx);
    return tls == NULL ? usual : rlock__tls_events(tls, usual);
}
