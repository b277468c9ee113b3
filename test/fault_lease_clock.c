/*
 * fault_lease_clock.c - lease truth under real faults (issue 8, classes 5-8
 * and 13). Each test says what the library did before.
 *
 *   lease by clock   Redis SIGSTOPped right after a renewal: the holder is told
 *                    its lock is lost when the lease runs out by its own clock,
 *                    while Redis is still stopped; is_held answers 0 at once.
 *                    RENEWAL_FAILED events (lease left, falling) and
 *                    CONNECTION_LOST come first; RECONNECTED after the resume.
 *   slow callback    on_lock_lost blocks for 4 s: another lock of the client is
 *                    renewed all along.
 *   stall boundary   stalls of T/2 at three phases lose nothing (any stall under
 *                    11T/18 is safe); a stall of 1.3 T loses the lock, reported
 *                    once during the stall.
 *   refused SUBSCRIBE  an ACL user without SUBSCRIBE waits by polling: it gets the
 *                    lock within ~100 ms of the unlock, not at the holder's TTL,
 *                    and is told (SUBSCRIBE_REFUSED).
 *
 * One redis-server per test; durations scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- event recorder ----------------------------------------------------- */

#define MAX_EVENTS 512

struct recorded {
    int kind;
    char name[128];
    long long lease_left_ms;
    long long at_ms;
};

struct events {
    pthread_mutex_t mu;
    int n;
    struct recorded ev[MAX_EVENTS];
    int lost_calls;
    /* on_lock_lost for this name blocks block_ms (the slow callback test). */
    char block_name[128];
    long long block_ms;
};

static void events_init(struct events *e)
{
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
}

static void on_event(const rlock_event *ev, void *arg)
{
    struct events *e = arg;
    pthread_mutex_lock(&e->mu);
    if (e->n < MAX_EVENTS) {
        struct recorded *r = &e->ev[e->n++];
        r->kind = ev->kind;
        snprintf(r->name, sizeof r->name, "%s", ev->name ? ev->name : "");
        r->lease_left_ms = ev->lease_left_ms;
        r->at_ms = h_now_ms();
        assert_non_null(ev->detail);
    }
    pthread_mutex_unlock(&e->mu);
}

static void on_lost(const char *name, void *arg)
{
    struct events *e = arg;
    long long block = 0;
    pthread_mutex_lock(&e->mu);
    e->lost_calls++;
    if (e->block_name[0] != '\0' && strcmp(name, e->block_name) == 0)
        block = e->block_ms;
    pthread_mutex_unlock(&e->mu);
    if (block > 0)
        h_sleep_ms(block); /* a callback that blocks */
}

/* Number of events of kind (for name, if not NULL); *first_ms the first's time. */
static int count_events(struct events *e, int kind, const char *name, long long *first_ms)
{
    int n = 0;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n; i++) {
        if (e->ev[i].kind != kind || (name != NULL && strcmp(e->ev[i].name, name) != 0))
            continue;
        if (n++ == 0 && first_ms != NULL)
            *first_ms = e->ev[i].at_ms;
    }
    pthread_mutex_unlock(&e->mu);
    return n;
}

static int lost_calls(struct events *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->lost_calls;
    pthread_mutex_unlock(&e->mu);
    return n;
}

static rlock_client *open_recording(const char *url, long long wd, struct events *e)
{
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd;
    cfg.command_timeout_ms = (int)H_MS(500);
    cfg.on_lock_lost = on_lost;
    cfg.on_event = on_event;
    cfg.callback_arg = e;
    return h_open_config(&cfg);
}

/* Waits until the watchdog has just renewed name (its PTTL jumps back up). */
static void wait_for_renewal(redisContext *r, const char *name, long long wd)
{
    long long last = h_pttl(r, name, strlen(name)), deadline = h_now_ms() + 2 * wd;
    while (h_now_ms() < deadline) {
        long long now = h_pttl(r, name, strlen(name));
        if (now > last + 20)
            return;
        last = now;
        h_sleep_ms(2);
    }
    H_FAIL("no renewal of %s within %lld ms", name, 2 * wd);
}

/* ---- class 5 and 6: the lease by the client's clock, and warnings -------- */

static void test_lease_ends_by_client_clock(void **state)
{
    h_server *srv = *state;
    const long long wd = H_MS(3000), interval = wd / 3;
    const char *name = h_unique_name("clock");
    redisContext *r = h_server_redis(srv);
    struct events ev;
    rlock_client *c;
    rlock *l, *other;
    h_actor *owner = h_actor_start();
    long long t_stop, t_lost = 0, t_held, t_reconnect;
    int held;

    events_init(&ev);
    c = open_recording(h_server_url(srv), wd, &ev);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);
    wait_for_renewal(r, name, wd);

    h_server_pause(srv);
    t_stop = h_now_ms();
    /* Before: nothing until Redis answered again. */
    H_WAIT_FOR(count_events(&ev, RLOCK_EVENT_LOCK_LOST, name, &t_lost) == 1, wd + 1000);
    H_WAIT_FOR(lost_calls(&ev) == 1, 500);
    long long t0 = h_now_ms();
    held = (int)h_actor_call(owner, h_op_is_held, l); /* Redis still stopped */
    t_held = h_now_ms() - t0;

    /* Warnings came first: renewal failures with the lease left, falling. */
    int failed = 0;
    long long prev_left = wd + 1;
    pthread_mutex_lock(&ev.mu);
    for (int i = 0; i < ev.n; i++) {
        if (ev.ev[i].kind != RLOCK_EVENT_RENEWAL_FAILED)
            continue;
        failed++;
        assert_true(ev.ev[i].at_ms <= t_lost);
        assert_true(ev.ev[i].lease_left_ms > 0 && ev.ev[i].lease_left_ms <= prev_left);
        prev_left = ev.ev[i].lease_left_ms;
    }
    pthread_mutex_unlock(&ev.mu);
    int conn_lost = count_events(&ev, RLOCK_EVENT_CONNECTION_LOST, NULL, NULL);
    printf("      WD %lld ms: Redis stopped right after a renewal; lost reported %lld ms later "
           "(still stopped), after %d RENEWAL_FAILED (last lease left %lld ms) and %d "
           "CONNECTION_LOST; is_held = %d in %lld ms\n",
           wd, t_lost - t_stop, failed, prev_left, conn_lost, held, t_held);
    H_ASSERT_BETWEEN(t_lost - t_stop, wd - interval - H_MS(100), wd + H_MS(300));
    assert_int_equal(held, 0);
    H_ASSERT_BETWEEN(t_held, 0, 50);
    assert_true(failed >= 1);
    assert_int_equal(conn_lost, 1);

    h_server_resume(srv);
    t0 = h_now_ms();
    other = h_get(c, h_unique_name("clock-after"));
    H_ASSERT_RC(rlock_try_lock(other, H_MS(2000), 10000), RLOCK_OK);
    H_WAIT_FOR(count_events(&ev, RLOCK_EVENT_RECONNECTED, NULL, &t_reconnect) == 1, 2000);
    H_ASSERT_RC(rlock_unlock(other), RLOCK_OK);
    /* The lost hold is never renewed again, nor reported twice. */
    h_sleep_ms(2 * interval);
    assert_int_equal(lost_calls(&ev), 1);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_unlock, l), RLOCK_ENOTOWNER);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_free(other);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- class 7: a slow callback does not stall renewal --------------------- */

static void test_slow_callback(void **state)
{
    h_server *srv = *state;
    const long long wd = H_MS(1500);
    const char *y = h_unique_name("slow-y"), *z = h_unique_name("slow-z");
    redisContext *r = h_server_redis(srv);
    struct events ev;
    rlock_client *c;
    rlock *ly, *lz;
    h_actor *a = h_actor_start(), *b = h_actor_start();
    long long min_pttl = wd, end;
    char *field = NULL;
    long long count = 0;

    events_init(&ev);
    snprintf(ev.block_name, sizeof ev.block_name, "%s", y);
    ev.block_ms = H_MS(4000);
    c = open_recording(h_server_url(srv), wd, &ev);
    ly = h_get(c, y);
    lz = h_get(c, z);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, ly), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(b, h_op_lock, lz), RLOCK_OK);

    h_cmd_ok(r, "DEL %s", y);
    H_WAIT_FOR(lost_calls(&ev) == 1, wd + 1000); /* the callback now blocks 4 s */
    /* Before: callbacks ran on the watchdog thread: Z was not renewed and lost. */
    end = h_now_ms() + ev.block_ms;
    while (h_now_ms() < end) {
        long long pttl = h_pttl(r, z, strlen(z));
        if (pttl < min_pttl)
            min_pttl = pttl;
        h_sleep_ms(50);
    }
    printf("      on_lock_lost blocked %lld ms; the other lock's lowest PTTL meanwhile %lld of "
           "%lld ms\n", ev.block_ms, min_pttl, wd);
    assert_true(min_pttl > wd / 3);
    assert_int_equal(h_lock_fields(r, z, strlen(z), &field, &count), 1);
    assert_int_equal(count, 1);
    free(field);
    assert_int_equal(count_events(&ev, RLOCK_EVENT_LOCK_LOST, z, NULL), 0);
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, lz), RLOCK_OK);

    h_actor_stop(a);
    h_actor_stop(b);
    rlock_free(ly);
    rlock_free(lz);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- class 8: what a stall costs ----------------------------------------- */

static void test_stall_boundary(void **state)
{
    h_server *srv = *state;
    const long long wd = H_MS(3000), phases[] = {H_MS(100), H_MS(700), H_MS(950)};
    const char *name = h_unique_name("stall");
    redisContext *r = h_server_redis(srv);
    struct events ev;
    rlock_client *c;
    rlock *l;
    h_actor *owner = h_actor_start();
    long long t_stop, t_lost = 0;

    events_init(&ev);
    c = open_recording(h_server_url(srv), wd, &ev);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);

    /* T/2 at three phases after a renewal: below 11T/18, never lost. */
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        wait_for_renewal(r, name, wd);
        h_sleep_ms(phases[i]);
        h_server_pause(srv);
        h_sleep_ms(wd / 2);
        h_server_resume(srv);
        h_sleep_ms(wd / 3 + H_MS(300)); /* the next round renews */
        H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
        assert_int_equal(lost_calls(&ev), 0);
        printf("      stall of %lld ms, %lld ms after a renewal: kept (PTTL %lld)\n", wd / 2,
               phases[i], h_pttl(r, name, strlen(name)));
    }

    /* 1.3 T: lost, told during the stall, once. */
    wait_for_renewal(r, name, wd);
    h_server_pause(srv);
    t_stop = h_now_ms();
    h_sleep_ms(wd + 3 * wd / 10);
    assert_int_equal(count_events(&ev, RLOCK_EVENT_LOCK_LOST, name, &t_lost), 1);
    h_server_resume(srv);
    printf("      stall of %lld ms: lost, reported %lld ms into the stall\n",
           wd + 3 * wd / 10, t_lost - t_stop);
    H_ASSERT_BETWEEN(t_lost - t_stop, wd / 2, wd + H_MS(300));
    h_sleep_ms(wd / 3 + H_MS(300));
    assert_int_equal(lost_calls(&ev), 1);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_unlock, l), RLOCK_ENOTOWNER);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- class 13: a refused SUBSCRIBE --------------------------------------- */

static void test_subscribe_refused(void **state)
{
    h_server *srv = *state;
    const char *name = h_unique_name("nosub");
    redisContext *r = h_server_redis(srv);
    struct events ev;
    rlock_client *admin, *c;
    rlock *al, *l;
    h_actor *waiter = h_actor_start();
    struct h_try t;
    char url[256];
    long long t_unlock, waited;

    h_cmd_ok(r, "ACL SETUSER nosub on >pw ~* &* +@all -subscribe");
    snprintf(url, sizeof url, "redis://nosub:pw@127.0.0.1:%d", h_server_port(srv));
    events_init(&ev);
    c = open_recording(url, H_MS(3000), &ev);
    admin = h_open_url(h_server_url(srv), 0, 0);
    al = h_get(admin, name);
    l = h_get(c, name);
    t = (struct h_try){l, H_MS(10000), 20000};

    H_ASSERT_RC(rlock_try_lock(al, 0, 20000), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(count_events(&ev, RLOCK_EVENT_SUBSCRIBE_REFUSED, name, NULL) == 1, 2000);
    h_sleep_ms(H_MS(500));
    t_unlock = h_now_ms();
    H_ASSERT_RC(rlock_unlock(al), RLOCK_OK);
    /* Before: the refusal was ignored and the waiter slept to the 20 s TTL. */
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    waited = h_actor_finished_ms(waiter) - t_unlock;
    printf("      SUBSCRIBE refused: the waiter acquired %lld ms after the unlock (holder TTL "
           "20 s)\n", waited);
    H_ASSERT_BETWEEN(waited, 0, H_MS(400));
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(h_cmd_int(r, "PUBSUB NUMPAT") + h_numsub(r, name, strlen(name)), 0);

    h_actor_stop(waiter);
    rlock_free(l);
    rlock_free(al);
    rlock_client_close(c);
    rlock_client_close(admin);
    redisFree(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lease_ends_by_client_clock, h_server_fixture_start, h_server_fixture_stop),
        cmocka_unit_test_setup_teardown(test_slow_callback, h_server_fixture_start, h_server_fixture_stop),
        cmocka_unit_test_setup_teardown(test_stall_boundary, h_server_fixture_start, h_server_fixture_stop),
        cmocka_unit_test_setup_teardown(test_subscribe_refused, h_server_fixture_start, h_server_fixture_stop),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
