/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_sigpipe.c - a write on a dead connection is an error, never a
 * signal that kills the application (issue 8, class 12 and
 * rlock_client_close's "commands in flight are aborted").
 *
 * hiredis writes with write(): on a socket shut down locally, or reset by
 * the peer and already failed once, that raises SIGPIPE in the calling
 * thread, whose default action ends the process. Application threads run
 * rlock's commands with the application's signal mask, so rlock must not
 * raise it (library threads block every signal; callers' threads do not).
 *
 *   close during a connect  a thread's fresh connection completes (its
 *                           SELECT answered) after rlock_client_close has
 *                           begun: the connection is shut down at once and
 *                           the command in flight returns RLOCK_ECLOSED,
 *                           without SIGPIPE (before: its write raised
 *                           SIGPIPE -- a dead process with the default action).
 *
 * The test counts SIGPIPE with a handler (so a failure is reported, not a
 * dead test binary). One redis-server per test; durations scaled by
 * TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static atomic_int sigpipes;

static void count_sigpipe(int sig) {
    (void)sig;
    atomic_fetch_add(&sigpipes, 1);
}

static void *close_main(void *arg) {
    rlock_client_close(arg);
    return NULL;
}

static void test_close_during_connect(void **state) {
    h_server *srv = *state;
    redisContext *r = h_server_redis(srv);
    struct sigaction sa, old;
    rlock_config cfg;
    char url[160];
    pthread_t caller, closer;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = count_sigpipe;
    sigaction(SIGPIPE, &sa, &old);
    /* db 1: a fresh connection needs a SELECT round trip, which the paused server holds. */
    snprintf(url, sizeof url, "%s/1", h_server_url(srv));
    h_config(&cfg);
    cfg.url = url;
    cfg.pool_size = 1;
    cfg.command_timeout_ms = (int)H_MS(5000);
    cfg.connect_timeout_ms = (int)H_MS(5000);
    cfg.retry_attempts = 0;
    rlock_client *c = h_open_config(&cfg);
    struct h_timed_try t = {.lock = h_get(c, h_unique_name("sigpipe")), .lease_ms = 10000};

    /* The pooled connection is closed by the server; after 500 ms idle the pool sees it. */
    h_cmd_ok(r, "CLIENT KILL TYPE normal");
    h_sleep_ms(700);
    h_server_pause(srv);
    assert_int_equal(pthread_create(&caller, NULL, h_timed_try_main, &t), 0);
    h_sleep_ms(H_MS(300)); /* the caller's TCP connect is done; its SELECT waits */
    assert_int_equal(pthread_create(&closer, NULL, close_main, c), 0);
    h_sleep_ms(H_MS(300)); /* close has begun: it waits for the caller */
    h_server_resume(srv);  /* SELECT answered: the connection is born into a closing pool */
    pthread_join(caller, NULL);
    pthread_join(closer, NULL);
    sigaction(SIGPIPE, &old, NULL);

    printf("close during connect: try_lock(wait 0) = %s after %lld ms; SIGPIPE raised %d "
           "time(s)\n", rlock_status_name(t.rc), t.elapsed_ms, atomic_load(&sigpipes));
    assert_int_equal(atomic_load(&sigpipes), 0);
    H_ASSERT_RC(t.rc, RLOCK_ECLOSED);

    rlock_free(t.lock);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_close_during_connect),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
