/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_hiredis_contract.c - what rlock's net layer assumes of hiredis beyond
 * its documented calls (docs/design.md, "What rlock assumes of hiredis"),
 * one test per assumption, so that a hiredis release that changes one fails
 * here, loudly, and not as a hang or a corrupt command somewhere else. CI
 * runs it against Debian's hiredis 0.14.1 and against hiredis 1.2.0.
 *
 *   obuf     redisAppendCommand* leave the command, and nothing else, in
 *            ctx->obuf, an sds rlock sends and trims itself (io.c: send
 *            with MSG_NOSIGNAL, sdsrange/sdsclear, or a fresh sdsempty());
 *            hiredis appends to whatever sds is there next time.
 *   fd       ctx->fd is the connected socket (poll, send, shutdown, peer).
 *   reader   ctx->reader->privdata is NULL after connect and ignored by
 *            hiredis's default reply functions (connect.c marks a CLIENT
 *            SETNAME reply owed there), for every reply type.
 *   reads    with REDIS_BLOCK cleared, redisBufferRead takes EAGAIN as "no
 *            data yet" (REDIS_OK), and redisGetReplyFromReader hands out
 *            replies already read, one at a time.
 *   errors   an I/O error rlock records itself (ctx->err, ctx->errstr) makes
 *            hiredis's next read fail and is kept as rlock wrote it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "net/conn.h"

/* A connection to the suite's server made as rlock makes every connection. */
static redisContext *connect_as_rlock(void) {
    redisContext *probe = h_redis();
    rlock__endpoint ep = {.host = probe->tcp.host, .port = probe->tcp.port};
    redisContext *ctx = NULL;
    H_ASSERT_RC(rlock__connect(&ep, NULL, 2000, h_now_ms() + 5000, &ctx), RLOCK_OK);
    assert_non_null(ctx);
    redisFree(probe);
    return ctx;
}

/* One command through rlock's own send and read; the reply (the caller frees it). */
static redisReply *round_trip(redisContext *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    assert_int_equal(redisvAppendCommand(ctx, fmt, ap), REDIS_OK);
    va_end(ap);
    assert_int_equal(rlock__io_flush(ctx, h_now_ms() + 5000), RLOCK_OK);
    redisReply *reply = NULL;
    assert_int_equal(rlock__io_read(ctx, h_now_ms() + 5000, &reply), RLOCK_OK);
    assert_non_null(reply);
    return reply;
}

static void test_obuf_is_the_pending_command(void **state) {
    (void)state;
    redisContext *ctx = connect_as_rlock();
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    assert_int_equal(sdslen(ctx->obuf), 0);
    assert_int_equal(redisAppendCommand(ctx, "PING"), REDIS_OK);
    assert_int_equal(sdslen(ctx->obuf), strlen(ping));
    assert_memory_equal(ctx->obuf, ping, strlen(ping));
    assert_true(sdsalloc(ctx->obuf) >= sdslen(ctx->obuf));
    /* rlock sends it; hiredis's buffer is empty after, the reply comes back. */
    assert_int_equal(rlock__io_flush(ctx, h_now_ms() + 5000), RLOCK_OK);
    assert_int_equal(sdslen(ctx->obuf), 0);
    redisReply *reply = NULL;
    assert_int_equal(rlock__io_read(ctx, h_now_ms() + 5000, &reply), RLOCK_OK);
    assert_int_equal(reply->type, REDIS_REPLY_STATUS);
    assert_string_equal(reply->str, "PONG");
    freeReplyObject(reply);
    /* A buffer rlock swapped for a fresh sds is the one hiredis appends to next. */
    sdsfree(ctx->obuf);
    ctx->obuf = sdsempty();
    reply = round_trip(ctx, "ECHO %s", "contract");
    assert_int_equal(reply->type, REDIS_REPLY_STRING);
    assert_string_equal(reply->str, "contract");
    freeReplyObject(reply);
    redisFree(ctx);
}

static void test_fd_is_the_socket(void **state) {
    (void)state;
    redisContext *ctx = connect_as_rlock();
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    assert_true(ctx->fd >= 0);
    assert_int_equal(getpeername(ctx->fd, (struct sockaddr *)&peer, &len), 0);
    assert_int_equal(ntohs(peer.sin_port), ctx->tcp.port);
    redisFree(ctx);
}

/* The next reply by hiredis's own calls only (rlock's read path reads privdata itself). */
static redisReply *plain_read(redisContext *ctx) {
    void *raw = NULL;
    long long deadline = h_now_ms() + 5000;
    for (;;) {
        assert_int_equal(redisGetReplyFromReader(ctx, &raw), REDIS_OK);
        if (raw != NULL)
            return raw;
        assert_int_equal(rlock__io_wait(ctx->fd, POLLIN, deadline), RLOCK_OK);
        assert_int_equal(redisBufferRead(ctx), REDIS_OK);
    }
}

static void test_reader_privdata_is_ours(void **state) {
    (void)state;
    redisContext *ctx = connect_as_rlock();
    static int mark;
    assert_null(ctx->reader->privdata);
    ctx->reader->privdata = &mark;
    const char *name = h_unique_name("contract");
    const char *commands[] = {"PING", "INCR %s", "GET %s", "HGETALL %s:none", "GET %s:none",
                              "HGET %s x"};
    const int types[] = {REDIS_REPLY_STATUS, REDIS_REPLY_INTEGER, REDIS_REPLY_STRING,
                         REDIS_REPLY_ARRAY,  REDIS_REPLY_NIL,     REDIS_REPLY_ERROR};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        assert_int_equal(redisAppendCommand(ctx, commands[i], name), REDIS_OK);
        assert_int_equal(rlock__io_flush(ctx, h_now_ms() + 5000), RLOCK_OK);
        redisReply *reply = plain_read(ctx);
        assert_int_equal(reply->type, types[i]);
        assert_ptr_equal(ctx->reader->privdata, &mark);
        freeReplyObject(reply);
    }
    ctx->reader->privdata = NULL;
    redisReply *reply = round_trip(ctx, "DEL %s", name);
    freeReplyObject(reply);
    redisFree(ctx);
}

static void test_reads_nonblocking(void **state) {
    (void)state;
    redisContext *ctx = connect_as_rlock();
    void *raw = NULL;
    assert_int_equal(ctx->flags & REDIS_BLOCK, 0);
    /* Nothing sent: the read finds nothing (EAGAIN or the slice's timeout), which is no error. */
    assert_int_equal(redisBufferRead(ctx), REDIS_OK);
    assert_int_equal(ctx->err, 0);
    assert_int_equal(redisGetReplyFromReader(ctx, &raw), REDIS_OK);
    assert_null(raw);
    /* Two replies in one read: handed out one at a time. */
    assert_int_equal(redisAppendCommand(ctx, "ECHO a"), REDIS_OK);
    assert_int_equal(redisAppendCommand(ctx, "ECHO b"), REDIS_OK);
    assert_int_equal(rlock__io_flush(ctx, h_now_ms() + 5000), RLOCK_OK);
    redisReply *first = NULL, *second = NULL;
    assert_int_equal(rlock__io_read(ctx, h_now_ms() + 5000, &first), RLOCK_OK);
    assert_int_equal(rlock__io_read(ctx, h_now_ms() + 5000, &second), RLOCK_OK);
    assert_string_equal(first->str, "a");
    assert_string_equal(second->str, "b");
    freeReplyObject(first);
    freeReplyObject(second);
    redisFree(ctx);
}

static void test_recorded_error_sticks(void **state) {
    (void)state;
    redisContext *ctx = connect_as_rlock();
    void *raw = NULL;
    ctx->err = REDIS_ERR_IO;
    snprintf(ctx->errstr, sizeof ctx->errstr, "%s", "recorded by rlock");
    assert_int_equal(redisBufferRead(ctx), REDIS_ERR);
    assert_int_equal(redisAppendCommand(ctx, "PING"), REDIS_OK); /* buffered, never sent */
    assert_int_equal(redisBufferRead(ctx), REDIS_ERR);
    assert_int_equal(redisGetReplyFromReader(ctx, &raw), REDIS_OK);
    assert_null(raw);
    assert_int_equal(ctx->err, REDIS_ERR_IO);
    assert_string_equal(ctx->errstr, "recorded by rlock");
    redisFree(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_obuf_is_the_pending_command),
        cmocka_unit_test(test_fd_is_the_socket),
        cmocka_unit_test(test_reader_privdata_is_ours),
        cmocka_unit_test(test_reads_nonblocking),
        cmocka_unit_test(test_recorded_error_sticks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
