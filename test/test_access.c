/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_access.c - who may do what, and saying why not (issue 8): the
 * least-privilege ACL documented in docs/failure-modes.md is enough to lock,
 * wait and unlock; and wrong password, unknown host, refused port and an ACL
 * refusal are told apart by status and detail (rlock_last_error_info).
 * Ownership truth under loss, ACL-refused unlocks, not-a-lock hashes and
 * config ranges are in test_truth_*.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* An ACL user name of this run (h_unique_name has ':', which a url's userinfo cannot). */
static const char *unique_user(const char *prefix) {
    static char names[4][64];
    static int next;
    char *name = names[next++ % 4];
    snprintf(name, sizeof names[0], "%s%d_%d", prefix, (int)getpid(), next);
    return name;
}

/* h_url() with user:password@ inserted (static storage). */
static const char *url_as(const char *user, const char *password) {
    static char url[256];
    return h_url_auth(url, sizeof url, h_url(), user, password);
}

/*
 * The least-privilege ACL of docs/failure-modes.md is enough: lock, wait on
 * the channel, unlock, force_unlock, with key access to the lock names only
 * (the channel is a script argument, not a key) -- and to the client's
 * registration hash, with its connections named.
 */
static void test_least_privilege_acl(void **state) {
    const char *user = unique_user("locker");
    char name[128];
    redisContext *r = h_redis();
    rlock_client *a, *b;
    rlock *la, *lb;
    h_actor *waiter = h_actor_start();
    struct h_try t;
    (void)state;

    h_cmd_ok(r, "ACL SETUSER %s on >secret ~locks:* resetchannels &redisson_lock__channel:* +evalsha +eval "
                "+script|load +hget +hexists +hlen +pttl +select +ping +subscribe +unsubscribe "
                "+publish +hincrby +hset +pexpire +del +exists +type +hkeys ~rlock:client:* "
                "+client|setname", user);
    snprintf(name, sizeof name, "locks:%s", user);
    a = h_open_url(url_as(user, "secret"), 0, 0);
    b = h_open_url(url_as(user, "secret"), 0, 0);
    la = h_get(a, name);
    lb = h_get(b, name);
    t = (struct h_try){lb, H_MS(5000), 10000};
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    /* The queries and the watchdog's RENEW use only the commands above (no HMGET). */
    H_ASSERT_RC(rlock_hold_count(la), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(la), 1);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 2000);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_force_unlock(la), 1);
    H_ASSERT_RC(rlock_is_locked(la), 0);
    /* Its last two rules: connections named, the registration written (test_observe.c). */
    for (rlock_client *c = a; c != NULL; c = c == a ? b : NULL) {
        rlock_stats st = h_stats(c);
        assert_int_equal(st.name_refusals, 0);
        assert_int_equal(st.registration_failures, 0);
    }

    h_actor_stop(waiter);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cmd_ok(r, "ACL DELUSER %s", user);
    redisFree(r);
}

/* ---- errors a person (and a program) can act on ------------------------ */

/* A 127.0.0.1 port nothing listens on. */
static int closed_port(void) {
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    getsockname(fd, (struct sockaddr *)&addr, &len);
    port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

static void test_errors_told_apart(void **state) {
    const char *user = unique_user("errs");
    redisContext *r = h_redis();
    rlock_error_info info;
    char url[256];
    int port = closed_port();
    (void)state;

    h_cmd_ok(r, "ACL SETUSER %s on >right ~* &* +@all -evalsha -eval", user);
    H_ASSERT_RC(h_open_status(url_as(user, "wrong"), 0, &info), RLOCK_EAUTH);
    assert_int_equal(strncmp(info.redis_error, "WRONGPASS", 9), 0);

    H_ASSERT_RC(h_open_status("redis://no-such-host.invalid:6379", 0, &info), RLOCK_EIO);
    assert_int_equal(info.host_not_found, 1);
    assert_non_null(strstr(info.message, "no-such-host.invalid"));

    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    H_ASSERT_RC(h_open_status(url, 0, &info), RLOCK_EIO);
    assert_int_equal(info.sys_errno, ECONNREFUSED);
    assert_int_equal(info.host_not_found, 0);
    snprintf(url, sizeof url, "127.0.0.1:%d", port);
    assert_non_null(strstr(info.message, url));

    /* Allowed in, but not to run scripts: refused by the ACL at open (issue 25, item 8),
       not at the first lock. */
    H_ASSERT_RC(h_open_status(url_as(user, "right"), 0, &info), RLOCK_ENOPERM);
    printf("      open as a user without EVALSHA -> %s: %s\n", rlock_status_name(info.status),
           info.message);
    assert_int_equal(strncmp(info.redis_error, "NOPERM", 6), 0);
    assert_non_null(strstr(info.message, "least-privilege ACL"));

    /* Bad arguments say which. */
    H_ASSERT_RC(rlock_unlock(NULL), RLOCK_EINVAL);
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_EINVAL);
    assert_true(strlen(info.message) > 0);

    h_cmd_ok(r, "ACL DELUSER %s", user);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_least_privilege_acl),
        cmocka_unit_test(test_errors_told_apart),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
