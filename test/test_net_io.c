/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_net_io.c - the net layer's own wire code, below the lock calls:
 *
 *   RESP by hand   rlock__append_argv / rlock__append_cmd write what
 *                  hiredis's redisFormatCommandArgv writes, byte for byte
 *                  (random argument vectors: empty, binary, every length
 *                  digit count), after whatever the output buffer already
 *                  holds (a command partly sent); a real Redis stores and
 *                  returns binary and empty values written so; a command
 *                  too long for hiredis's int lengths is refused untouched.
 *   reading        rlock__io_read on a socket of ours (a socketpair, the
 *                  socket set up as every connection's: REDIS_BLOCK
 *                  cleared, reads blocking for a slice): a reply in pieces;
 *                  half a reply and then nothing ends at the deadline; a
 *                  peer that closes ends it at once; shutdown() from another
 *                  thread (rlock_client_close's abort) wakes a read blocked
 *                  in read() at once; SIGALRM every 2 ms (SA_RESTART) never
 *                  stretches the deadline; and a deadline just over the
 *                  read slice is kept as poll() keeps it (a receive timeout
 *                  ends on a timer tick, up to a tick late).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"
#include "net/route.h"

/* ---- RESP by hand ------------------------------------------------------------------ */

/* A context that is only an output buffer (no socket is touched). */
static redisContext *buffer_context(void) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    redisContext *ctx = redisConnectFd(sv[0]);
    assert_non_null(ctx);
    return ctx;
}

/* Asserts that ctx's output buffer is prefix followed by hiredis's formatting of argv. */
static void assert_obuf_is(const redisContext *ctx, const char *prefix, size_t prefix_len, int argc,
                           const char **argv, const size_t *argvlen) {
    char *want = NULL;
    int len = redisFormatCommandArgv(&want, argc, argv, argvlen);
    assert_true(len > 0);
    assert_int_equal(sdslen(ctx->obuf), prefix_len + (size_t)len);
    assert_memory_equal(ctx->obuf, prefix, prefix_len);
    assert_memory_equal(ctx->obuf + prefix_len, want, (size_t)len);
    redisFreeCommand(want);
}

static unsigned next_rand(unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

/* Lengths around every digit-count change of the header, empty ones included. */
static size_t random_length(unsigned *seed) {
    static const size_t edges[] = {0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 65536, 100000};
    unsigned r = next_rand(seed);
    if (r % 3 == 0)
        return edges[(r / 3) % (sizeof(edges) / sizeof(edges[0]))];
    return r % 64;
}

#define MAX_ARGS 300

static void test_resp_matches_hiredis(void **state) {
    static char bytes[100000];
    const char *argv[MAX_ARGS];
    size_t argvlen[MAX_ARGS];
    unsigned seed = 20240611;
    (void)state;
    for (size_t i = 0; i < sizeof(bytes); i++) /* every byte value, CR, LF and NUL included */
        bytes[i] = (char)(next_rand(&seed) & 0xff);
    redisContext *ctx = buffer_context();
    for (int round = 0; round < 2000; round++) {
        int argc = 1 + (int)(next_rand(&seed) % (round % 10 == 0 ? MAX_ARGS : 8));
        for (int i = 0; i < argc; i++) {
            argvlen[i] = random_length(&seed);
            argv[i] = bytes + next_rand(&seed) % (sizeof(bytes) - argvlen[i] + 1);
        }
        sdsclear(ctx->obuf);
        assert_int_equal(rlock__append_argv(ctx, argc, argv, argvlen), RLOCK_OK);
        assert_obuf_is(ctx, "", 0, argc, argv, argvlen);
    }
    redisFree(ctx);
}

/* A script call: EVALSHA sha numkeys args (or EVAL body numkeys args), as hiredis would. */
static void test_resp_script_call(void **state) {
    static const rlock__script defs[] = {{.name = "ONE", .body = "return redis.call('PING')"}};
    rlock__script_set set = {.defs = defs, .count = 1};
    const char *args[] = {"{k}", "", "a\r\nb\0c", "123"};
    const size_t lens[] = {3, 0, 7, 3};
    rlock__cmd cmd = {.script = 0, .argc = 4, .nkeys = 2, .argv = args, .argvlen = lens};
    (void)state;
    memset(set.sha[0], 'f', 40);
    set.sha[0][40] = '\0';
    redisContext *ctx = buffer_context();
    for (int use_body = 0; use_body < 2; use_body++) {
        const char *full[] = {use_body ? "EVAL" : "EVALSHA", use_body ? defs[0].body : set.sha[0],
                              "2", args[0], args[1], args[2], args[3]};
        size_t full_len[] = {strlen(full[0]), strlen(full[1]), 1, lens[0], lens[1], lens[2],
                             lens[3]};
        sdsclear(ctx->obuf);
        assert_int_equal(rlock__append_cmd(ctx, &set, &cmd, use_body), RLOCK_OK);
        assert_obuf_is(ctx, "", 0, 7, full, full_len);
    }
    redisFree(ctx);
}

/* A command partly sent before (a flush cut short) stays first; ours follows it whole. */
static void test_resp_after_partial_command(void **state) {
    static const char partial[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nval"; /* its tail unsent */
    const char *argv[] = {"HSET", "key", "", "x\0y"};
    const size_t argvlen[] = {4, 3, 0, 3};
    (void)state;
    redisContext *ctx = buffer_context();
    ctx->obuf = sdscatlen(ctx->obuf, partial, sizeof(partial) - 1);
    assert_int_equal(rlock__append_argv(ctx, 4, argv, argvlen), RLOCK_OK);
    assert_obuf_is(ctx, partial, sizeof(partial) - 1, 4, argv, argvlen);
    /* hiredis's own append on the same context after ours: both whole, in order */
    size_t ours = sdslen(ctx->obuf);
    assert_int_equal(redisAppendCommandArgv(ctx, 4, argv, argvlen), REDIS_OK);
    assert_obuf_is(ctx, ctx->obuf, ours, 4, argv, argvlen);
    redisFree(ctx);
}

/*
 * Over INT_MAX bytes in one command: refused (sds grows its length by an
 * int), the buffer untouched. The lengths are claimed, never read: the
 * check comes before any byte is copied.
 */
static void test_resp_too_long_refused(void **state) {
    const char *argv[] = {"SET", "k", "v", "w"};
    const size_t argvlen[] = {3, 1, (size_t)INT_MAX / 2, (size_t)INT_MAX / 2 + 64};
    const size_t huge[] = {3, (size_t)-1};
    (void)state;
    redisContext *ctx = buffer_context();
    ctx->obuf = sdscat(ctx->obuf, "*1\r\n$4\r\nPING\r\n");
    assert_int_equal(rlock__append_argv(ctx, 4, argv, argvlen), RLOCK_ENOMEM);
    assert_int_equal(rlock__append_argv(ctx, 2, argv, huge), RLOCK_ENOMEM); /* no wrap */
    assert_int_equal(sdslen(ctx->obuf), 14);
    assert_memory_equal(ctx->obuf, "*1\r\n$4\r\nPING\r\n", 14);
    redisFree(ctx);
}

/* Written by hand, read back by a real Redis: binary and empty values intact. */
static void test_resp_redis_round_trip(void **state) {
    const char *key = h_unique_name("net-io-resp");
    static const char value[] = "a\r\n$3\r\n*1\0\r\nz";
    const char *set_argv[] = {"SET", key, value}, *get_argv[] = {"GET", key};
    const char *empty_argv[] = {"HSET", key, "", ""};
    size_t set_len[] = {3, strlen(key), sizeof(value) - 1}, get_len[] = {3, strlen(key)};
    size_t empty_len[] = {4, strlen(key), 0, 0};
    redisReply *reply = NULL;
    (void)state;
    redisContext *r = h_redis();
    assert_int_equal(rlock__append_argv(r, 3, set_argv, set_len), RLOCK_OK);
    assert_int_equal(rlock__append_argv(r, 2, get_argv, get_len), RLOCK_OK);
    assert_int_equal(redisGetReply(r, (void **)&reply), REDIS_OK);
    assert_int_equal(reply->type, REDIS_REPLY_STATUS);
    freeReplyObject(reply);
    assert_int_equal(redisGetReply(r, (void **)&reply), REDIS_OK);
    assert_int_equal(reply->type, REDIS_REPLY_STRING);
    assert_int_equal(reply->len, sizeof(value) - 1);
    assert_memory_equal(reply->str, value, sizeof(value) - 1);
    freeReplyObject(reply);
    h_cmd_int(r, "DEL %s", key);
    assert_int_equal(rlock__append_argv(r, 4, empty_argv, empty_len), RLOCK_OK);
    assert_int_equal(redisGetReply(r, (void **)&reply), REDIS_OK);
    assert_int_equal(reply->type, REDIS_REPLY_INTEGER);
    assert_int_equal(reply->integer, 1);
    freeReplyObject(reply);
    reply = h_cmd(r, "HGET %s %b", key, "", (size_t)0);
    assert_int_equal(reply->type, REDIS_REPLY_STRING);
    assert_int_equal(reply->len, 0);
    freeReplyObject(reply);
    h_cmd_int(r, "DEL %s", key);
    redisFree(r);
}

/* ---- reading ------------------------------------------------------------------------ */

/* Our end of a socketpair set up as every connection is (connect.c); *peer the other end. */
static redisContext *pair_context(int *peer) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    redisContext *ctx = redisConnectFd(sv[0]);
    assert_non_null(ctx);
    ctx->flags &= ~REDIS_BLOCK;
    assert_int_equal(rlock__io_block_reads(ctx->fd), RLOCK_OK);
    *peer = sv[1];
    return ctx;
}

/* Reads one reply by now + ms; its status, the time it took in *took_us. */
static int timed_read(redisContext *ctx, long long ms, redisReply **reply, long long *took_us) {
    int64_t deadline = rlock__now_ms() + ms;
    long long t0 = h_now_us();
    int status = rlock__io_read(ctx, deadline, reply);
    *took_us = h_now_us() - t0;
    return status;
}

/* Writes what after ms, from a thread of its own (or shuts the socket down: what NULL). */
struct later {
    int fd;
    long long ms;
    const char *what;
    pthread_t thread;
};

static void *later_main(void *arg) {
    struct later *l = arg;
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM); /* test_read_signals's are for the reading thread */
    pthread_sigmask(SIG_BLOCK, &alarm, NULL);
    h_sleep_ms(l->ms);
    if (l->what == NULL)
        shutdown(l->fd, SHUT_RDWR);
    else if (write(l->fd, l->what, strlen(l->what)) < 0)
        perror("later: write");
    return NULL;
}

static void later_start(struct later *l, int fd, long long ms, const char *what) {
    *l = (struct later){.fd = fd, .ms = ms, .what = what};
    assert_int_equal(pthread_create(&l->thread, NULL, later_main, l), 0);
}

static void test_read_reply_in_pieces(void **state) {
    int peer;
    redisReply *reply = NULL;
    long long took;
    struct later l;
    (void)state;
    redisContext *ctx = pair_context(&peer);
    assert_int_equal(write(peer, "*2\r\n$2\r\nO", 9), 9);
    later_start(&l, peer, 30, "K\r\n:42\r\n");
    assert_int_equal(timed_read(ctx, H_MS(2000), &reply, &took), RLOCK_OK);
    pthread_join(l.thread, NULL);
    assert_int_equal(reply->type, REDIS_REPLY_ARRAY);
    assert_string_equal(reply->element[0]->str, "OK");
    assert_int_equal(reply->element[1]->integer, 42);
    freeReplyObject(reply);
    close(peer);
    redisFree(ctx);
}

static void test_read_half_reply_then_stall(void **state) {
    int peer;
    redisReply *reply = NULL;
    long long took;
    const long long bound = H_MS(300);
    (void)state;
    redisContext *ctx = pair_context(&peer);
    assert_int_equal(write(peer, "$10\r\nhalf", 9), 9);
    assert_int_equal(timed_read(ctx, bound, &reply, &took), RLOCK_EIO);
    print_message("      half a reply, then nothing: RLOCK_EIO (%s) after %lld us, bound %lld ms\n",
                  strerror(errno), took, bound);
    assert_int_equal(errno, ETIMEDOUT);
    assert_null(reply);
    H_ASSERT_BETWEEN(took / 1000, bound - 1, bound + H_MS(250));
    close(peer);
    redisFree(ctx);
}

/*
 * Shuts a socket down 20 ms into a read (the peer's: the server closes the
 * idle connection; ours, from another thread: rlock_client_close's abort);
 * the read must end at once with RLOCK_EIO, not at the end of its slice.
 */
static void shut_down_during_read(int ours, const char *what) {
    int peer;
    redisReply *reply = NULL;
    long long took;
    struct later l;
    redisContext *ctx = pair_context(&peer);
    later_start(&l, ours ? ctx->fd : peer, 20, NULL);
    assert_int_equal(timed_read(ctx, H_MS(20000), &reply, &took), RLOCK_EIO);
    pthread_join(l.thread, NULL);
    print_message("      %s 20 ms into a read blocked in read(): RLOCK_EIO after %lld us (%s)\n",
                  what, took, ctx->errstr);
    assert_int_equal(ctx->err, REDIS_ERR_EOF);
    H_ASSERT_BETWEEN(took / 1000, 0, H_MS(90)); /* before the first read's 100 ms slice */
    close(peer);
    redisFree(ctx);
}

static void test_read_peer_closes(void **state) {
    (void)state;
    shut_down_during_read(0, "the peer shut down");
}

static void test_read_aborted_by_shutdown(void **state) {
    (void)state;
    shut_down_during_read(1, "shutdown() of our socket by another thread");
}

/*
 * SIGALRM every 2 ms (setitimer, SA_RESTART) at this thread (the writer
 * thread blocks it): a silent peer's read still ends at its deadline; a
 * reply that comes is read.
 */
static void test_read_signals(void **state) {
    int peer;
    redisReply *reply = NULL;
    long long took, took_reply;
    const long long bound = H_MS(300);
    struct later l;
    (void)state;
    redisContext *ctx = pair_context(&peer);
    h_alarms_start(2000);
    int silent = timed_read(ctx, bound, &reply, &took);
    later_start(&l, peer, 150, "+OK\r\n");
    int answered = timed_read(ctx, H_MS(5000), &reply, &took_reply);
    long alarms = h_alarms_stop();
    pthread_join(l.thread, NULL);
    print_message("      %ld SIGALRM at 2 ms intervals: a silent peer's read ended after %lld us "
                  "(bound %lld ms); a reply sent 150 ms in was read after %lld us\n",
                  alarms, took, bound, took_reply);
    assert_int_equal(silent, RLOCK_EIO);
    H_ASSERT_BETWEEN(took / 1000, bound - 1, bound + H_MS(250));
    assert_int_equal(answered, RLOCK_OK);
    assert_string_equal(reply->str, "OK");
    assert_true(alarms > 100);
    freeReplyObject(reply);
    close(peer);
    redisFree(ctx);
}

/* Reads from a silent peer by a deadline 101 ms away (to within 0.1 ms); how late it ended (us). */
static long long overshoot_101(redisContext *ctx) {
    redisReply *reply = NULL;
    for (int64_t ms = rlock__now_ms(); rlock__now_ms() == ms;)
        ; /* just after a millisecond tick */
    int64_t deadline = rlock__now_ms() + 101;
    long long t0 = h_now_us();
    assert_int_equal(rlock__io_read(ctx, deadline, &reply), RLOCK_EIO);
    return h_now_us() - t0 - 101000;
}

/*
 * A deadline a few ms past the read slice (100 ms) is kept as poll() keeps
 * it, not left to the slice's receive timeout: that fires on a timer tick,
 * up to a tick or two late (2-4 ms at HZ 250, 10-20 at HZ 100), and the
 * first wait goes to read() only when the deadline is further than the
 * slice plus that. Shown on a socket whose receive timeout is 1 s (a tick
 * very late): were the first wait in read(), the read would end 900 ms
 * past its deadline. The real slice's lateness here is printed.
 */
static void test_read_deadline_past_slice(void **state) {
    int peer;
    (void)state;
    redisContext *ctx = pair_context(&peer);
    long long real = overshoot_101(ctx);
    struct timeval late = {.tv_sec = 1};
    assert_int_equal(setsockopt(ctx->fd, SOL_SOCKET, SO_RCVTIMEO, &late, sizeof(late)), 0);
    long long very_late = overshoot_101(ctx);
    print_message("      deadline 101 ms away, a silent peer: ended %lld us past it; with a "
                  "receive timeout of 1 s, %lld us past it\n", real, very_late);
    H_ASSERT_BETWEEN(very_late / 1000, -1, H_MS(250));
    close(peer);
    redisFree(ctx);
}

/* ---- the oldest server -------------------------------------------------------------- */

/*
 * The version INFO server names at open: 6.2 and later (and Valkey, which names the Redis it
 * is compatible with) pass, older ones are refused with their version; no version named
 * (INFO refused by the ACL) refuses nothing. The real servers of CI (6.2 to Valkey 8) pass it
 * at every open.
 */
static void test_oldest_server(void **state) {
    char v[32];
    (void)state;
    assert_int_equal(rlock__server_too_old("# Server\r\nredis_version:6.0.20\r\n", v, sizeof v), 1);
    assert_string_equal(v, "6.0.20");
    assert_int_equal(rlock__server_too_old("redis_version:5.0.14\r\nredis_git_sha1:0\r\n", v, sizeof v), 1);
    assert_string_equal(v, "5.0.14");
    assert_int_equal(rlock__server_too_old("redis_version:6.2.14\r\n", v, sizeof v), 0);
    assert_int_equal(rlock__server_too_old("redis_version:7.0.15\r\n", v, sizeof v), 0);
    assert_int_equal(rlock__server_too_old("redis_version:10.0.0\r\n", v, sizeof v), 0);
    assert_int_equal(rlock__server_too_old("redis_version:7.2.4\r\nvalkey_version:8.0.1\r\n", v, sizeof v), 0);
    assert_int_equal(rlock__server_too_old("# Server\r\n", v, sizeof v), 0);
    assert_string_equal(v, "");
    assert_int_equal(rlock__server_too_old(NULL, v, sizeof v), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_matches_hiredis),
        cmocka_unit_test(test_oldest_server),
        cmocka_unit_test(test_resp_script_call),
        cmocka_unit_test(test_resp_after_partial_command),
        cmocka_unit_test(test_resp_too_long_refused),
        cmocka_unit_test(test_resp_redis_round_trip),
        cmocka_unit_test(test_read_reply_in_pieces),
        cmocka_unit_test(test_read_half_reply_then_stall),
        cmocka_unit_test(test_read_peer_closes),
        cmocka_unit_test(test_read_aborted_by_shutdown),
        cmocka_unit_test(test_read_signals),
        cmocka_unit_test(test_read_deadline_past_slice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
