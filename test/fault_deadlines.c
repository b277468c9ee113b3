/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_deadlines.c - time bounds that nothing may stretch (issue 8, classes
 * 9 to 12): a call to a stalled Redis returns within its bound whatever the
 * pool's queue, a hanging connect or a storm of signals, and a command that
 * never reached Redis is sent again even at wait 0.
 *
 *   pool exhaustion  8 threads share pool_size 1 against a SIGSTOPped Redis:
 *                    each try_lock(wait 0) returns RLOCK_EIO within its own
 *                    command_timeout_ms (before: the 8th waited for the 7
 *                    ahead of it, up to 8 x the bound).
 *   hanging connect  the pooled connection is gone and the server's accept
 *                    queue is full (SYNs dropped): try_lock(wait 200) returns
 *                    within wait + command_timeout_ms, not after
 *                    connect_timeout_ms (3 s).
 *   signals          a thread receiving a signal every 2 ms (SA_RESTART)
 *                    calls try_lock(wait 0) against a SIGSTOPped Redis: it
 *                    returns RLOCK_EIO within its bound (before: hiredis's read
 *                    restarted with its full socket timeout on every EINTR,
 *                    so the call never returned while signals flowed).
 *   interval timer   SIGALRM every 1 ms (setitimer, SA_RESTART) through lock,
 *                    try_lock and unlock: right answers from a healthy Redis,
 *                    RLOCK_EIO within the bound from a SIGSTOPped one.
 *   idle kill        redis `timeout 1` closes idle connections: after an idle
 *                    spell, try_lock(wait 0) succeeds on a fresh connection
 *                    (before: RLOCK_EIO on a healthy Redis).
 *
 * One redis-server per test; durations scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
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
#include "proxy.h"

static rlock_client *open_client(const char *url, int pool_size, long long command_ms,
                                 long long connect_ms) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.pool_size = pool_size;
    cfg.command_timeout_ms = (int)command_ms;
    cfg.connect_timeout_ms = (int)connect_ms;
    cfg.retry_attempts = 0;
    return h_open_config(&cfg);
}

/* ---- class 9: pool exhaustion ------------------------------------------- */

#define POOL_THREADS 8

static void test_pool_exhaustion(void **state) {
    h_server *srv = *state;
    const long long bound = H_MS(300);
    rlock_client *c = open_client(h_server_url(srv), 1, bound, H_MS(2000));
    struct h_timed_try tries[POOL_THREADS];
    pthread_t threads[POOL_THREADS];
    rlock *l = h_get(c, h_unique_name("pool"));
    long long worst = 0;

    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_OK); /* the one connection is up */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    h_server_pause(srv);
    for (int i = 0; i < POOL_THREADS; i++) {
        tries[i] = (struct h_timed_try){.lock = l, .wait_ms = 0, .lease_ms = 10000};
        assert_int_equal(pthread_create(&threads[i], NULL, h_timed_try_main, &tries[i]), 0);
    }
    for (int i = 0; i < POOL_THREADS; i++) {
        pthread_join(threads[i], NULL);
        H_ASSERT_RC(tries[i].rc, RLOCK_EIO);
        if (tries[i].elapsed_ms > worst)
            worst = tries[i].elapsed_ms;
    }
    h_server_resume(srv);
    printf("pool exhaustion: %d threads, pool_size 1, bound %lld ms: slowest RLOCK_EIO after "
           "%lld ms\n", POOL_THREADS, bound, worst);
    H_ASSERT_BETWEEN(worst, 0, bound + H_MS(250));

    rlock_free(l);
    rlock_client_close(c);
}

/* ---- class 10: a connect that hangs ------------------------------------- */

/* A listening socket on port whose accept queue is full: new SYNs are dropped. */
static int full_listener(int port, int *fillers, int nfillers) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 0) != 0)
        H_FAIL("listen on %d: %s", port, strerror(errno));
    for (int i = 0; i < nfillers; i++) { /* fill the backlog; never accepted */
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fillers[i], (struct sockaddr *)&addr, sizeof addr);
    }
    h_sleep_ms(50);
    return fd;
}

static void test_connect_hangs(void **state) {
    h_server *srv = *state;
    const long long bound = H_MS(300), wait = H_MS(200);
    h_proxy *px = h_proxy_start(h_server_port(srv));
    int port = h_proxy_port(px), fillers[4], listener, rc;
    char url[128];
    rlock_client *c;
    rlock *l;
    long long t0, elapsed;

    rlock_config cfg;
    snprintf(url, sizeof url, "%s", h_proxy_url(px));
    h_config(&cfg);
    cfg.url = url;
    cfg.pool_size = 1;
    cfg.command_timeout_ms = (int)bound;
    cfg.connect_timeout_ms = 3000;
    cfg.retry_attempts = 3; /* re-sends (and so a new connect) while the wait lasts */
    c = h_open_config(&cfg);
    l = h_get(c, h_unique_name("connect"));
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    /* The pooled connection dies with the proxy; its port now drops SYNs. */
    h_proxy_stop(px);
    listener = full_listener(port, fillers, 4);
    t0 = h_now_ms();
    rc = rlock_try_lock(l, wait, 10000);
    elapsed = h_now_ms() - t0;
    printf("hanging connect: try_lock(wait %lld) = %s after %lld ms (connect_timeout 3000 ms, "
           "command_timeout %lld ms): %s\n", wait, rlock_status_name(rc), elapsed, bound,
           rlock_last_error());
    H_ASSERT_RC(rc, RLOCK_EIO);
    H_ASSERT_BETWEEN(elapsed, 0, wait + bound + H_MS(250));

    rlock_free(l);
    rlock_client_close(c);
    for (int i = 0; i < 4; i++)
        close(fillers[i]);
    close(listener);
}

/* ---- class 11: signals -------------------------------------------------- */

static void on_signal(int sig) {
    (void)sig;
}

struct pelter {
    pthread_t target;
    atomic_int stop;
    long sent;
};

/* Sends the target SIGUSR1 every 2 ms until told to stop. */
static void *pelter_main(void *arg) {
    struct pelter *p = arg;
    while (!atomic_load(&p->stop)) {
        pthread_kill(p->target, SIGUSR1);
        p->sent++;
        h_sleep_ms(2);
    }
    return NULL;
}

static void test_signals(void **state) {
    h_server *srv = *state;
    const long long bound = H_MS(300);
    struct sigaction sa, old;
    rlock_client *c = open_client(h_server_url(srv), 2, bound, H_MS(2000));
    struct h_timed_try t = {.lock = h_get(c, h_unique_name("signals")), .lease_ms = 10000};
    struct pelter p = {0};
    pthread_t caller, pelter;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* as a profiler or a timer library would */
    sigaction(SIGUSR1, &sa, &old);
    H_ASSERT_RC(rlock_try_lock(t.lock, 0, 10000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(t.lock), RLOCK_OK);

    h_server_pause(srv);
    assert_int_equal(pthread_create(&caller, NULL, h_timed_try_main, &t), 0);
    p.target = caller;
    assert_int_equal(pthread_create(&pelter, NULL, pelter_main, &p), 0);
    /* Generous: the old code never returned while the signals flowed. */
    int returned = H_POLL_UNTIL(h_timed_try_done(&t), 5 * bound + 2000);
    atomic_store(&p.stop, 1);
    pthread_join(pelter, NULL);
    pthread_join(caller, NULL); /* returns once the signals stop, in any case */
    h_server_resume(srv);
    sigaction(SIGUSR1, &old, NULL);
    printf("signals: %ld SIGUSR1 sent at 2 ms intervals; try_lock(wait 0) = %s after %lld ms "
           "(bound %lld ms)\n", p.sent, rlock_status_name(t.rc), t.elapsed_ms, bound);
    assert_true(returned);
    H_ASSERT_RC(t.rc, RLOCK_EIO);
    H_ASSERT_BETWEEN(t.elapsed_ms, 0, bound + H_MS(250));

    rlock_free(t.lock);
    rlock_client_close(c);
}

/* ---- class 11b: a process-wide interval timer ----------------------------- */

/* A call on a stalled Redis returns within bound; how long it took. */
#define H_ASSERT_WITHIN(call, want, bound)                                                        \
    do {                                                                                           \
        long long t0_ = h_now_ms();                                                                \
        H_ASSERT_RC((call), (want));                                                               \
        H_ASSERT_BETWEEN(h_now_ms() - t0_, 0, (bound) + H_MS(250));                                \
    } while (0)

/*
 * SIGALRM every millisecond from setitimer (SA_RESTART), as a profiler or a
 * timer library would, through lock, try_lock and unlock: on a healthy
 * Redis every call answers right (an interrupted read or write is "later",
 * never a failure); on a stopped one every call returns RLOCK_EIO within
 * its bound (a read with a receive timeout is never restarted, and every
 * wait recomputes the time left).
 */
static void test_interval_timer(void **state) {
    h_server *srv = *state;
    const long long bound = H_MS(300);
    const char *busy_name = h_unique_name("itimer-busy");
    redisContext *r = h_server_redis(srv);
    rlock_client *c = open_client(h_server_url(srv), 2, bound, H_MS(2000));
    rlock *l = h_get(c, h_unique_name("itimer")), *other = h_get(c, h_unique_name("itimer-2"));
    rlock *busy = h_get(c, busy_name);
    int cycles = 0;

    h_foreign_lock(r, busy_name, 60000);
    h_alarms_start(1000);

    long long t0 = h_now_ms();
    for (; h_now_ms() - t0 < 1000; cycles++) { /* a healthy Redis */
        H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_try_lock(busy, 0, 10000), RLOCK_BUSY);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    }
    H_ASSERT_WITHIN(rlock_try_lock(busy, H_MS(100), 10000), RLOCK_BUSY, H_MS(100));

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_server_pause(srv);
    H_ASSERT_WITHIN(rlock_try_lock(other, 0, 10000), RLOCK_EIO, bound);
    H_ASSERT_WITHIN(rlock_lock(other), RLOCK_EIO, bound);
    H_ASSERT_WITHIN(rlock_unlock(l), RLOCK_EIO, bound);
    h_server_resume(srv);
    long alarms = h_alarms_stop();
    printf("interval timer: %ld SIGALRM at 1 ms intervals; %d lock/try_lock/unlock cycles right "
           "on a healthy Redis, then try_lock, lock and unlock on a stopped one each RLOCK_EIO "
           "within %lld ms\n", alarms, cycles, bound);
    assert_true(alarms > 500);

    /* The unlock whose outcome was unknown, completed: its RELEASE, written before the
       stop, ran when Redis resumed (RLOCK_ENOTOWNER now), or this one runs it. */
    int rc = rlock_unlock(l);
    assert_true(rc == RLOCK_ENOTOWNER || rc == RLOCK_OK);
    assert_int_equal(rlock_is_held_by_current_thread(l), 0);
    assert_int_equal(h_exists(r, rlock_name(l), strlen(rlock_name(l))), 0);
    rlock_free(l);
    rlock_free(other);
    rlock_free(busy);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- class 12: idle connections closed by the server -------------------- */

static void test_idle_connection_killed(void **state) {
    h_server *srv = *state;
    redisContext *r = h_server_redis(srv);
    rlock_client *c = open_client(h_server_url(srv), 2, H_MS(2000), H_MS(2000));
    rlock *l = h_get(c, h_unique_name("idle"));
    long long t0;
    int rc;

    h_cmd_ok(r, "CONFIG SET timeout 1");
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    h_sleep_ms(2500); /* the server closes the idle pooled connections */
    t0 = h_now_ms();
    rc = rlock_try_lock(l, 0, 10000);
    printf("idle kill: after 2.5 s idle with `timeout 1`, try_lock(wait 0) = %s in %lld ms\n",
           rlock_status_name(rc), h_now_ms() - t0);
    H_ASSERT_RC(rc, RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_pool_exhaustion),
        H_SERVER_TEST(test_connect_hangs),
        H_SERVER_TEST(test_signals),
        H_SERVER_TEST(test_interval_timer),
        H_SERVER_TEST(test_idle_connection_killed),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
