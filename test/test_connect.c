/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_connect.c - the ways a client reaches Redis: a unix socket (with a
 * db), AUTH with a password, AUTH with an ACL user and password, SELECT, and
 * the refusals of each. These need server settings the shared test server
 * must not have (a unix socket, a password), so this file starts its own
 * redis-server, bound to 127.0.0.1 and killed when the test process dies.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static char dir[] = "/tmp/rlock-connect.XXXXXX";
static char sock[256];
static int port;
static pid_t server;

/* Starts redis-server with a unix socket on a free port; 0 on success. */
static int start_server(void) {
    char port_str[16];
    for (int attempt = 0; attempt < 20; attempt++) {
        port = 20000 + (int)((unsigned)getpid() * 7919u + (unsigned)attempt * 104729u) % 40000;
        snprintf(port_str, sizeof port_str, "%d", port);
        server = fork();
        if (server == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            execlp("redis-server", "redis-server", "--port", port_str, "--bind", "127.0.0.1",
                   "--unixsocket", sock, "--unixsocketperm", "700", "--dir", dir, "--save", "",
                   "--appendonly", "no", "--logfile", "redis.log", (char *)NULL);
            _exit(127);
        }
        for (int i = 0; i < 200; i++) { /* up to 2 s for the socket to answer */
            redisContext *c = redisConnectUnix(sock);
            int up = c != NULL && c->err == 0;
            if (c != NULL)
                redisFree(c);
            if (up)
                return 0;
            if (waitpid(server, NULL, WNOHANG) == server)
                break; /* port taken: try another */
            h_sleep_ms(10);
        }
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    return -1;
}

static int group_setup(void **state) {
    (void)state;
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    return start_server();
}

static int group_teardown(void **state) {
    char cmd[512];
    (void)state;
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A raw connection over the socket, authenticated if a password is set. */
static redisContext *admin(const char *password) {
    redisContext *c = redisConnectUnix(sock);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    if (password != NULL)
        freeReplyObject(redisCommand(c, "AUTH %s", password));
    return c;
}

static int open_url(const char *url, rlock_client **out) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    return rlock_client_open(&cfg, out);
}

/* Opens url, takes and releases a lock, and checks it lived in db. */
static void lock_in_db(const char *url, int db, const char *password) {
    rlock_client *c = NULL;
    const char *name = h_unique_name("connect");
    H_ASSERT_RC(open_url(url, &c), RLOCK_OK);
    rlock *l = h_get(c, name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    redisContext *r = admin(password);
    freeReplyObject(redisCommand(r, "SELECT %d", db));
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    redisFree(r);
    rlock_free(l);
    rlock_client_close(c);
}

static void test_unix_socket(void **state) {
    char url[512];
    (void)state;
    snprintf(url, sizeof url, "unix://%s", sock);
    lock_in_db(url, 0, NULL);
    snprintf(url, sizeof url, "unix://%s?db=5", sock);
    lock_in_db(url, 5, NULL);
}

static void test_acl_user(void **state) {
    char url[512];
    rlock_client *c = NULL;
    (void)state;
    redisContext *r = admin(NULL);
    redisReply *reply = redisCommand(r, "ACL SETUSER alice on >al1ce:pw ~* &* +@all");
    assert_int_equal(reply->type, REDIS_REPLY_STATUS);
    freeReplyObject(reply);
    redisFree(r);
    /* ':' in the password is %-encoded in the url. */
    snprintf(url, sizeof url, "redis://alice:al1ce%%3Apw@127.0.0.1:%d/2", port);
    lock_in_db(url, 2, NULL);
    snprintf(url, sizeof url, "redis://alice:wrong@127.0.0.1:%d", port);
    H_ASSERT_RC(open_url(url, &c), RLOCK_EAUTH);
    assert_null(c);
    assert_int_equal(strncmp(rlock_last_error(), "AUTH as user alice", 18), 0);
    assert_non_null(strstr(rlock_last_error(), "WRONGPASS"));
}

/* Runs last: it puts a password on the default user. */
static void test_password(void **state) {
    char url[512];
    rlock_client *c = NULL;
    (void)state;
    redisContext *r = admin(NULL);
    freeReplyObject(redisCommand(r, "CONFIG SET requirepass %s", "p@ss word"));
    redisFree(r);
    snprintf(url, sizeof url, "redis://:p%%40ss%%20word@127.0.0.1:%d", port);
    lock_in_db(url, 0, "p@ss word");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port); /* no password given */
    H_ASSERT_RC(open_url(url, &c), RLOCK_EAUTH);
    assert_non_null(strstr(rlock_last_error(), "NOAUTH"));
    snprintf(url, sizeof url, "redis://:nope@127.0.0.1:%d", port);
    H_ASSERT_RC(open_url(url, &c), RLOCK_EAUTH);
    assert_null(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unix_socket),
        cmocka_unit_test(test_acl_user),
        cmocka_unit_test(test_password),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
