/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_lease_stall.c - lease truth against a real, stopped redis-server
 * (issue 8, classes 5, 6 and 8). Every test fails on the library before
 * issue 8 (each says what that code did) and checks the contract of rlock.h:
 *
 *   class 5   test_lease_gone_without_redis: Redis SIGSTOPped right after a
 *             renewal and kept stopped. The holder is told (LOCK_LOST event and
 *             on_lock_lost, once) when its lease runs out by its own clock,
 *             although Redis never answers (command timeout 10 s, far past the
 *             lease); is_held then answers 0 at once, Redis still stopped.
 *   class 6   test_warned_before_loss: the same stall with a short command
 *             timeout: RENEWAL_FAILED events (lease left > 0, never rising, with
 *             detail) come before the LOCK_LOST; one CONNECTION_LOST during the
 *             outage, one RECONNECTED after it.
 *   class 8   test_stall_boundary: stalls of T/2 at three phases after a renewal
 *             lose nothing; a stall of 1.3 T loses the lock, reported once during
 *             the stall; unlock then answers RLOCK_ENOTOWNER.
 *
 * One redis-server per test (h_server_fixture_*); every duration goes through
 * h_scaled() (TEST_TIMEOUT_SCALE; x2 under ASan, x4 under TSan). Each test
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

/* Waits until the watchdog has just renewed name (within two renewal
 * rounds and a second); returns the PTTL seen right after the renewal. */
static long long wait_renewal(redisContext *c, const char *name, long long wd) {
    return h_wait_renewal(c, name, 20, 2 * wd + h_scaled(1000));
}

/* ---- class 5: the lease is gone by the client's clock ---------------------- */

/*
 * Before issue 8 the watchdog learnt of a loss only from a RENEW reply: with
 * Redis stopped nothing was reported until Redis answered again ("NOT told"
 * after 5 s here), and is_held_by_current_thread asked the stopped Redis
 * (HEXISTS), blocking for the command timeout and its re-sends ("(blocked)"
 * at the 1 s bound). There was no on_event at all.
 */
static void test_lease_gone_without_redis(void **state) {
    h_server *srv = *state;
    const long long wd = H_MS(3000);
    const char *name = h_unique_name("lease-clock");
    redisContext *r = h_server_redis(srv);
    struct h_evlog rec;
    rlock_client *c;
    rlock *l;
    h_actor *owner = h_actor_start();
    long long pttl_at_stop, t0, t_lost = 0, t_is, dt_is;
    int lost_idx = -1, held, stopped_during_is;

    h_evlog_init(&rec);
    /* A command timeout far longer than the lease: the report must not wait
     * for a reply (Redis never answers while stopped). */
    c = h_evlog_open(h_server_url(srv), wd, H_MS(10000), &rec);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* Stop Redis just after a renewal round and keep it stopped. */
    wait_renewal(r, name, wd);
    pttl_at_stop = h_pttl(r, name, strlen(name));
    t0 = h_now_ms();
    h_server_pause(srv);

    /* Told by the event or by on_lock_lost (the old library had only the latter). */
    int told = H_POLL_UNTIL(h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL) >= 1 ||
                                h_evlog_lost_count(&rec, name) >= 1,
                            3000 + 2000);
    long long t_told = h_now_ms();
    /* Right away, from the owner thread: no round trip (Redis is stopped). */
    t_is = h_now_ms();
    h_actor_post(owner, h_op_is_held, l);
    /* Bounded: the old library asked the stopped Redis (command timeout x retries). */
    int is_done = H_POLL_UNTIL(h_actor_done(owner), 1000);
    held = is_done ? (int)h_actor_wait(owner, 0) : -1000;
    dt_is = (is_done ? h_actor_finished_ms(owner) : h_now_ms()) - t_is;
    stopped_during_is = h_server_stopped(srv);
    struct h_evlog_event lost = {0};
    if (h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, &t_lost, &lost_idx) >= 1)
        lost = h_evlog_get(&rec, lost_idx);

    /* Still stopped for a while: no second report. */
    h_sleep_ms(wd / 3);
    int lost_events = h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL);
    int lost_calls = h_evlog_lost_count(&rec, name);
    int still_stopped = h_server_stopped(srv);

    printf("      WD %lld ms, command timeout %lld ms: Redis stopped right after a renewal "
           "(PTTL %lld); %s %lld ms later (LOCK_LOST event at %lld ms, lease_left %lld, "
           "status %s), Redis still stopped; is_held = %s in %lld ms; on_lock_lost x%d, "
           "LOCK_LOST x%d\n",
           wd, H_MS(10000), pttl_at_stop, told ? "told" : "NOT told", t_told - t0,
           lost_idx >= 0 ? t_lost - t0 : -1, lost.lease_left_ms, rlock_status_name(lost.status),
           held >= 0 ? (held ? "1" : "0") : is_done ? rlock_status_name(held) : "(blocked)",
           dt_is, lost_calls, lost_events);
    if (lost_events != 1 || lost_calls != 1 || held != 0)
        h_evlog_dump(&rec, t0);
    assert_true(told);

    assert_true(pttl_at_stop >= 2 * wd / 3); /* the lease left at t0 was >= ~2/3 WD */
    assert_true(still_stopped);
    assert_int_equal(lost_events, 1);
    /* No earlier than the lease can end, no later than its end + slack. */
    H_ASSERT_BETWEEN(t_lost - t0, H_MS(1500), wd + H_MS(400));
    assert_true(lost.lease_left_ms <= 0); /* "run out" */
    assert_true(lost.has_name);
    assert_true(lost.has_detail && lost.detail[0] != '\0');
    assert_int_equal(lost_calls, 1);
    assert_int_equal(held, 0);
    H_ASSERT_BETWEEN(dt_is, 0, H_MS(50));
    assert_true(stopped_during_is);

    /* After the resume: the lost hold is never renewed again; the key expires
     * (a renewal queued in the stopped server finds it expired) and stays gone. */
    h_server_resume(srv);
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, 3000 + 1000);
    h_sleep_ms(wd / 3 + H_MS(300));
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL), 1);
    assert_int_equal(h_evlog_lost_count(&rec, NULL), 1);
    /* Its last unlock: the loss was already reported; nothing is changed. */
    H_ASSERT_RC((int)h_actor_call(owner, h_op_unlock, l), RLOCK_ENOTOWNER);
    assert_int_equal(h_evlog_lost_count(&rec, NULL), 1);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_client_close(c);
    h_evlog_destroy(&rec);
    redisFree(r);
}

/* ---- class 6: warned before the loss ------------------------------------- */

/* Of test_warned_before_loss: every RENEWAL_FAILED event names name and came
 * during the stall (from t0), before the LOCK_LOST (event lost_idx, at t_lost),
 * with a positive lease left that never rises, an error status and a detail.
 * Returns how many there were; *prev_left gets the last lease left. */
static int check_warnings(struct h_evlog *rec, const char *name, long long wd, long long t0,
                          long long t_lost, int lost_idx, long long *prev_left) {
    int n = h_evlog_n(rec), failed = 0;
    *prev_left = wd + 1;
    for (int i = 0; i < n; i++) {
        struct h_evlog_event e = h_evlog_get(rec, i);
        if (e.kind != RLOCK_EVENT_RENEWAL_FAILED)
            continue;
        if (!e.has_name || strcmp(e.name, name) != 0) {
            h_evlog_dump(rec, t0);
            H_FAIL("RENEWAL_FAILED event %d names \"%s\", expected %s", i, e.name, name);
        }
        failed++;
        if (i > lost_idx || e.at_ms < t0 || e.at_ms > t_lost || e.lease_left_ms <= 0 ||
            e.lease_left_ms > *prev_left || !e.has_detail || e.detail[0] == '\0' ||
            e.status >= 0) {
            h_evlog_dump(rec, t0);
            H_FAIL("RENEWAL_FAILED event %d (at %+lld ms, lease_left %lld, previous %lld, "
                   "status %s, detail \"%s\") is not a warning before the loss (LOCK_LOST "
                   "event %d at %+lld ms)",
                   i, e.at_ms - t0, e.lease_left_ms, *prev_left, rlock_status_name(e.status),
                   e.detail, lost_idx, t_lost - t0);
        }
        *prev_left = e.lease_left_ms;
    }
    return failed;
}

/*
 * Before issue 8 a failed renewal round was silent (no event hook existed:
 * rlock_config had no on_event), the watchdog retried only a whole interval
 * later, and the loss itself came after Redis answered again.
 */
static void test_warned_before_loss(void **state) {
    h_server *srv = *state;
    const long long wd = H_MS(3000), cmd = H_MS(500);
    const char *name = h_unique_name("lease-warn");
    redisContext *r = h_server_redis(srv);
    struct h_evlog rec;
    rlock_client *c;
    rlock *l, *other;
    h_actor *owner = h_actor_start();
    long long t0, t_resume, t_lost = 0, t_conn = 0, t_rec = 0, prev_left;
    int lost_idx = -1, conn_idx = -1, rec_idx = -1, failed = 0;

    h_evlog_init(&rec);
    c = h_evlog_open(h_server_url(srv), wd, cmd, &rec);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);
    wait_renewal(r, name, wd);
    t0 = h_now_ms();
    h_server_pause(srv);

    H_WAIT_FOR(h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, &t_lost, &lost_idx) >= 1, 3000 + 2000);
    assert_true(h_server_stopped(srv));
    h_sleep_ms(H_MS(200)); /* nothing more about this lock may come now */
    h_server_resume(srv);
    t_resume = h_now_ms();

    /* A new lock of another name works, and the link is told to be back. */
    other = h_get(c, h_unique_name("lease-warn-after"));
    H_ASSERT_RC(rlock_try_lock(other, H_MS(3000), 10000), RLOCK_OK);
    H_WAIT_FOR(h_evlog_count(&rec, RLOCK_EVENT_RECONNECTED, NULL, &t_rec, &rec_idx) >= 1, 2000);
    H_ASSERT_RC(rlock_unlock(other), RLOCK_OK);
    h_sleep_ms(wd / 3 + H_MS(200)); /* a few more rounds: nothing new about X */

    /* The warnings: every RENEWAL_FAILED for X came during the stall, before the
     * LOCK_LOST, with a positive lease left that never rises, and a detail. */
    failed = check_warnings(&rec, name, wd, t0, t_lost, lost_idx, &prev_left);
    int conns = h_evlog_count(&rec, RLOCK_EVENT_CONNECTION_LOST, NULL, &t_conn, &conn_idx);
    int recs = h_evlog_count(&rec, RLOCK_EVENT_RECONNECTED, NULL, NULL, NULL);
    printf("      WD %lld ms, command timeout %lld ms: Redis stopped right after a renewal; "
           "%d RENEWAL_FAILED (last lease left %lld ms), LOCK_LOST at %lld ms, "
           "CONNECTION_LOST x%d (first at %lld ms), RECONNECTED x%d %lld ms after the resume\n",
           wd, cmd, failed, prev_left, t_lost - t0, conns, t_conn - t0, recs, t_rec - t_resume);
    if (failed == 0 || conns != 1 || recs != 1)
        h_evlog_dump(&rec, t0);

    assert_true(failed >= 1);
    assert_int_equal(h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL), 1);
    assert_int_equal(h_evlog_lost_count(&rec, name), 1);
    /* One CONNECTION_LOST, during the outage; one RECONNECTED, after it. */
    assert_int_equal(conns, 1);
    H_ASSERT_BETWEEN(t_conn, t0, t_resume);
    struct h_evlog_event ce = h_evlog_get(&rec, conn_idx);
    assert_int_equal(ce.lease_left_ms, -1);
    assert_true(ce.has_detail && ce.detail[0] != '\0');
    assert_true(ce.status < 0);
    assert_int_equal(recs, 1);
    assert_true(rec_idx > conn_idx);
    assert_true(t_rec >= t_resume);
    struct h_evlog_event re = h_evlog_get(&rec, rec_idx);
    assert_int_equal(re.lease_left_ms, -1);
    assert_true(re.has_detail);

    H_ASSERT_RC((int)h_actor_call(owner, h_op_unlock, l), RLOCK_ENOTOWNER);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_free(other);
    rlock_client_close(c);
    h_evlog_destroy(&rec);
    redisFree(r);
}
/* ---- class 8: what a stall costs ------------------------------------------ */

/* (a) of test_stall_boundary: a stall of short_stall ms starting phase ms
 * after a renewal loses nothing; the lock is held all along. */
static void stall_kept(h_server *srv, redisContext *r, const char *name, rlock_client *c,
                       struct h_evlog *rec, long long wd, long long phase, long long short_stall) {
    long long t0, t_resume, end;
    long long min_pttl = wd, pttl_before;
    int checks = 0;

    wait_renewal(r, name, wd);
    h_sleep_ms(phase);
    pttl_before = h_pttl(r, name, strlen(name));
    t0 = h_now_ms();
    h_server_pause(srv);
    h_sleep_ms(t0 + short_stall - h_now_ms());
    h_server_resume(srv);
    t_resume = h_now_ms();
    /* Held all along for T after the resume. */
    end = t_resume + wd;
    while (h_now_ms() < end) {
        long long p;
        H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
        p = h_pttl(r, name, strlen(name));
        if (p < min_pttl)
            min_pttl = p;
        checks++;
        h_sleep_ms(20);
    }
    printf("      (a) stall of %lld ms starting %lld ms after a renewal (PTTL %lld): kept; "
           "lowest PTTL in the %lld ms after the resume %lld ms (%d checks); LOCK_LOST x%d, "
           "RENEWAL_FAILED x%d so far\n",
           t_resume - t0, phase, pttl_before, wd, min_pttl, checks,
           h_evlog_count(rec, RLOCK_EVENT_LOCK_LOST, NULL, NULL, NULL),
           h_evlog_count(rec, RLOCK_EVENT_RENEWAL_FAILED, NULL, NULL, NULL));
    assert_true(min_pttl > 0);
    assert_int_equal(h_evlog_count(rec, RLOCK_EVENT_LOCK_LOST, NULL, NULL, NULL), 0);
    assert_int_equal(h_evlog_lost_count(rec, NULL), 0);
}

/*
 * T = watchdog_timeout_ms; renewal every T/3 guarantees about 2/3 T across a
 * stall (docs/failure-modes.md: any stall under 11T/18 loses nothing; one over
 * T always loses the lock).
 *
 * Before issue 8: the loss in a 1.3 T stall was reported only after Redis
 * answered again (the report during the stall below failed), and there was no
 * on_event.
 */
static void test_stall_boundary(void **state) {
    h_server *srv = *state;
    const long long wd = H_MS(3000), interval = wd / 3;
    const long long phases[] = {H_MS(100), H_MS(700), H_MS(950)};
    const long long short_stall = wd / 2, long_stall = wd + 3 * wd / 10;
    const char *name = h_unique_name("stall-boundary");
    redisContext *r = h_server_redis(srv);
    struct h_evlog rec;
    rlock_client *c;
    rlock *l;
    h_actor *owner = h_actor_start();
    long long t0, t_resume, t_lost = 0;
    int lost_idx = -1;

    h_evlog_init(&rec);
    /* A command timeout shorter than the stall: the rounds during it fail and
     * are retried (T/18 apart), the case the documented bound describes. */
    c = h_evlog_open(h_server_url(srv), wd, H_MS(300), &rec);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);

    /* (a) T/2 at three phases after a renewal: nothing is lost. */
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
        stall_kept(srv, r, name, c, &rec, wd, phases[i], short_stall);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_is_held, l), 1);

    /* (b) 1.3 T right after a renewal: lost, reported during the stall, once. */
    wait_renewal(r, name, wd);
    t0 = h_now_ms();
    h_server_pause(srv);
    h_sleep_ms(t0 + long_stall - h_now_ms());
    int lost_in_stall = h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, &t_lost, &lost_idx);
    int calls_in_stall = h_evlog_lost_count(&rec, name);
    assert_true(h_server_stopped(srv));
    h_server_resume(srv);
    t_resume = h_now_ms();

    /* After the resume the field is gone (or expires), and stays gone. */
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, 3000 + 1000);
    long long t_gone = h_now_ms();
    h_sleep_ms(interval + H_MS(300));
    int exists_later = h_exists(r, name, strlen(name));
    int unlock_rc = (int)h_actor_call(owner, h_op_unlock, l);

    printf("      (b) stall of %lld ms right after a renewal: LOCK_LOST x%d during it, %lld ms "
           "into it (on_lock_lost x%d); key gone %lld ms after the resume; unlock = %s\n",
           t_resume - t0, lost_in_stall, lost_in_stall ? t_lost - t0 : -1, calls_in_stall,
           t_gone - t_resume, rlock_status_name(unlock_rc));
    if (lost_in_stall != 1)
        h_evlog_dump(&rec, t0);
    assert_int_equal(lost_in_stall, 1);
    assert_int_equal(calls_in_stall, 1);
    H_ASSERT_BETWEEN(t_lost - t0, H_MS(1500), wd + H_MS(400));
    assert_int_equal(exists_later, 0);
    assert_int_equal(h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL), 1);
    assert_int_equal(h_evlog_lost_count(&rec, NULL), 1);
    H_ASSERT_RC(unlock_rc, RLOCK_ENOTOWNER); /* already reported: nothing to release */
    assert_int_equal(h_evlog_lost_count(&rec, NULL), 1);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_client_close(c);
    h_evlog_destroy(&rec);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_lease_gone_without_redis),
        H_SERVER_TEST(test_warned_before_loss),
        H_SERVER_TEST(test_stall_boundary),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_stall*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
