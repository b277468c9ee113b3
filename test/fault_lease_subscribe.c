/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_lease_subscribe.c - lease truth with a refused SUBSCRIBE (issue 8,
 * class 13): an ACL user without SUBSCRIBE waits by polling (acquires within
 * ~100 ms of the unlock, not at the holder's 20 s TTL), is told
 * (SUBSCRIBE_REFUSED), leaves no channel. The test fails on the library
 * before issue 8 (it says what that code did) and checks the contract of
 * rlock.h.
 *
 * One redis-server per test (h_server_fixture_*); every duration goes through
 * h_scaled() (TEST_TIMEOUT_SCALE; x2 under ASan, x4 under TSan). The test
 * prints one line of what it measured. The callbacks are recorded by the
 * harness's event log (harness/eventlog.h).
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

/* ---- class 13: a refused SUBSCRIBE ---------------------------------------- */

/* 1 if PUBSUB CHANNELS * lists any redisson lock channel; copies the first. */
static int any_lock_channel(redisContext *c, char *first, size_t size) {
    redisReply *rep = h_cmd(c, "PUBSUB CHANNELS *");
    int found = 0;
    if (rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        H_FAIL("PUBSUB CHANNELS: unexpected reply");
    }
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type == REDIS_REPLY_STRING && strstr(e->str, "redisson_lock__channel") != NULL) {
            if (!found)
                snprintf(first, size, "%s", e->str);
            found = 1;
        }
    }
    freeReplyObject(rep);
    return found;
}

/*
 * Before issue 8 the subscriber ignored the NOPERM reply to SUBSCRIBE: the
 * waiter waited command_timeout_ms for a confirmation, tried once, then slept
 * until the holder's TTL (20 s here; still waiting when the 3 s bound below
 * ran out); no event existed, and the channel record leaked.
 */
static void test_subscribe_refused_polls(void **state) {
    h_server *srv = *state;
    const char *name = h_unique_name("nosub");
    const long long lease = H_MS(20000);
    redisContext *r = h_server_redis(srv);
    struct h_evlog rec;
    rlock_client *admin, *u;
    rlock *al, *ul;
    h_actor *waiter = h_actor_start();
    struct h_try t;
    char url[256], chan[256] = "";
    long long t_post, t_unlock, t_acq, t_ev = 0, close_ms;
    int ev_idx = -1, rc;

    h_cmd_ok(r, "ACL SETUSER u on >pw ~* &* +@all -subscribe");
    h_url_auth(url, sizeof url, h_server_url(srv), "u", "pw");
    h_evlog_init(&rec);
    admin = h_open_url(h_server_url(srv), 0, 0);
    /* Command timeout 300 ms, shorter than the admin's 500 ms hold: the old
     * library waited that long for a SUBSCRIBE confirmation that never came,
     * tried once (BUSY), then slept until the holder's TTL. */
    u = h_evlog_open(url, H_MS(3000), H_MS(300), &rec);
    al = h_get(admin, name);
    ul = h_get(u, name);

    /* The admin (default user) holds X with a 20 s lease (scaled). */
    H_ASSERT_RC(rlock_try_lock(al, 0, lease), RLOCK_OK);
    t = (struct h_try){ul, H_MS(10000), lease};
    t_post = h_now_ms();
    h_actor_post(waiter, h_op_try_lock, &t);
    h_sleep_ms(H_MS(500));
    assert_false(h_actor_done(waiter)); /* it waits: X is held */
    t_unlock = h_now_ms();
    H_ASSERT_RC(rlock_unlock(al), RLOCK_OK);
    /* Bounded: the old library slept until the holder's 20 s TTL. */
    int finished = H_POLL_UNTIL(h_actor_done(waiter), 3000);
    rc = finished ? (int)h_actor_wait(waiter, 1000) : 1000;
    t_acq = finished ? h_actor_finished_ms(waiter) : h_now_ms();
    H_POLL_UNTIL(h_evlog_count(&rec, RLOCK_EVENT_SUBSCRIBE_REFUSED, NULL, NULL, NULL) >= 1, 2000);
    struct h_evlog_event ev = {0};
    if (h_evlog_count(&rec, RLOCK_EVENT_SUBSCRIBE_REFUSED, NULL, &t_ev, &ev_idx) >= 1)
        ev = h_evlog_get(&rec, ev_idx);
    int refused = h_evlog_count(&rec, RLOCK_EVENT_SUBSCRIBE_REFUSED, NULL, NULL, NULL);

    printf("      SUBSCRIBE refused (ACL -subscribe): try_lock(wait %lld, lease %lld) = %s "
           "%lld ms after the unlock (%lld ms after it began; holder's TTL %lld ms); "
           "SUBSCRIBE_REFUSED x%d, %lld ms after the wait began: name=%s status=%s "
           "detail=\"%.100s\"\n",
           t.wait_ms, lease, finished ? rlock_status_name(rc) : "(still waiting)",
           t_acq - t_unlock, t_acq - t_post, lease, refused, refused ? t_ev - t_post : -1,
           ev.has_name ? ev.name : "(null)", rlock_status_name(ev.status), ev.detail);
    assert_true(finished);
    H_ASSERT_RC(rc, RLOCK_OK);
    /* Polled every 100 ms: within ~400 ms of the unlock, never at the TTL. */
    H_ASSERT_BETWEEN(t_acq - t_unlock, 0, H_MS(400));
    H_ASSERT_BETWEEN(t_acq - t_post, H_MS(500), H_MS(500) + H_MS(400));
    assert_true(refused >= 1);
    assert_true((ev.has_name && strcmp(ev.name, name) == 0) || strstr(ev.detail, "NOPERM"));
    assert_true(ev.has_detail && ev.detail[0] != '\0');
    assert_int_equal(ev.lease_left_ms, -1);
    H_ASSERT_RC(ev.status, RLOCK_ENOPERM); /* an ACL refusal */
    assert_int_equal(refused, 1); /* docs: one event; the channel is not asked again */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(u), 1);

    /* u's unlock works; nothing is left behind. */
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, ul), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    if (any_lock_channel(r, chan, sizeof chan))
        H_FAIL("PUBSUB CHANNELS * still lists %s", chan);
    assert_int_equal(h_numsub(r, name, strlen(name)), 0);

    h_actor_stop(waiter);
    rlock_free(ul);
    rlock_free(al);
    close_ms = h_timed_close(u, 5000);
    rlock_client_close(admin);
    printf("      the u client closed in %lld ms\n", close_ms);
    h_evlog_destroy(&rec);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_subscribe_refused_polls),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_subscribe*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
