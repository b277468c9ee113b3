/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_process.c - faults of the process that holds a lock.
 *
 *   scenario 1  holder process kill -9 (watchdog lock, then lease lock): another
 *               process acquires within timeout + 1 s, and not before the lease
 *               ends (user-needs F6).
 *   scenario 2  holder process SIGSTOPped for 1.5 x the watchdog timeout: a second
 *               process acquires; after SIGCONT the first gets on_lock_lost once,
 *               its unlock returns RLOCK_ENOTOWNER and publishes nothing, and the
 *               second owner's field and TTL are untouched (F1).
 *   F5          holder cut off from Redis (through the test proxy, which refuses
 *               every connection) for 1.5 x the lease: another client acquires;
 *               when the link comes back the old holder is told, once, and never
 *               re-creates the lock.
 *
 * Every scenario runs against a redis-server of its own (127.0.0.1, random port)
 * and prints one line of measured figures. All durations derive from the
 * watchdog timeout WD = 2 s, scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

/* ---- the holder process ---------------------------------------------- */

struct holder_args {
    const char *url;
    const char *name;
    long long wd_ms;    /* watchdog_timeout_ms of its client */
    long long lease_ms; /* RLOCK_LEASE_WATCHDOG or a lease */
};

/*
 * Child: opens its own client, takes the lock on its main thread, reports
 * "LOCKED <rc> <client id>", then answers commands, all on the same thread:
 *   LOST       -> "LOST <count> <monotonic ms of the last callback>"
 *   WAITLOST n -> waits up to n ms (scaled) for a first callback, then "LOST ..."
 *   HELD       -> "HELD <rlock_is_held_by_current_thread>"
 *   UNLOCK     -> "UNLOCK <rc>"
 *   QUIT       -> closes the client and exits 0
 */
static int holder_main(void *arg, int in, int out) {
    struct holder_args *a = arg;
    struct h_lost lost;
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock *l = NULL;
    char line[256];
    int rc;

    h_lost_init(&lost);
    h_config(&cfg);
    cfg.url = a->url;
    cfg.watchdog_timeout_ms = a->wd_ms;
    cfg.on_lock_lost = h_lost_cb;
    cfg.callback_arg = &lost;
    rc = rlock_client_open(&cfg, &c);
    if (rc != RLOCK_OK) {
        h_line_send(out, "LOCKED %d -", rc);
        return 2;
    }
    rc = rlock_get(c, a->name, &l);
    if (rc == RLOCK_OK)
        rc = a->lease_ms == RLOCK_LEASE_WATCHDOG ? rlock_lock(l) : rlock_lock_lease(l, a->lease_ms);
    h_line_send(out, "LOCKED %d %s", rc, rlock_client_id(c));
    while (h_line_recv(in, line, sizeof line, 600000) >= 0) {
        if (strcmp(line, "LOST") == 0) {
            h_line_send(out, "LOST %d %lld", h_lost_count(&lost), lost.last_ms);
        } else if (strncmp(line, "WAITLOST ", 9) == 0) {
            long long ms = atoll(line + 9);
            H_POLL_UNTIL(h_lost_count(&lost) > 0, ms);
            h_line_send(out, "LOST %d %lld", h_lost_count(&lost), lost.last_ms);
        } else if (strcmp(line, "HELD") == 0) {
            h_line_send(out, "HELD %d", rlock_is_held_by_current_thread(l));
        } else if (strcmp(line, "UNLOCK") == 0) {
            h_line_send(out, "UNLOCK %d", rlock_unlock(l));
        } else if (strcmp(line, "QUIT") == 0) {
            break;
        }
    }
    rlock_free(l);
    rlock_client_close(c);
    return 0;
}

/* Starts a holder and waits for "LOCKED 0 <id>"; copies the id. */
static void start_holder(h_child *ch, struct holder_args *a, char *id, size_t idsize) {
    char line[256];
    int rc = -100;
    char got[128] = "";
    h_child_start(ch, holder_main, a);
    h_child_recv(ch, line, sizeof line, 10000);
    if (sscanf(line, "LOCKED %d %127s", &rc, got) != 2 || rc != RLOCK_OK)
        H_FAIL("holder did not lock: \"%s\"", line);
    snprintf(id, idsize, "%s", got);
}

/* ---- scenario 1: kill -9 ---------------------------------------------- */

/*
 * A child process holds the lock (watchdog or lease lock, WD = 2 s) and is
 * killed; this process (the second one) waits for it on a helper thread while
 * the main thread checks that the dead holder's field stays until its lease
 * ends.
 */
static void kill9_case(int watchdog) {
    const long long wd = H_MS(2000);
    const char *name = h_unique_name(watchdog ? "kill9wd" : "kill9lease");
    struct holder_args a = {h_server_url(h_srv), name, wd, watchdog ? RLOCK_LEASE_WATCHDOG : wd};
    redisContext *r = h_server_redis(h_srv);
    rlock_client *pc;
    rlock *l;
    h_actor *act = h_actor_start();
    struct h_try t;
    h_child ch;
    char id[128];
    long long t_lock, t_kill, t_before, t_measured, pttl, lease_end, lease_end_min, t_acq;
    long long busy_checks = 0;
    int code;

    start_holder(&ch, &a, id, sizeof id);
    t_lock = h_now_ms();
    H_ASSERT_LOCK_IS(r, name, id, 1);
    if (watchdog) {
        /* Let the watchdog renew it past its first lease: proves renewal was on. */
        h_sleep_ms(wd + wd / 2);
        H_ASSERT_LOCK_IS(r, name, id, 1);
        H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 1, wd);
    }

    pc = h_open_url(h_server_url(h_srv), 0, 0);
    l = h_get(pc, name);
    t_kill = h_now_ms();
    code = h_child_kill(&ch);
    assert_int_equal(code, 1000 + SIGKILL);
    /* Nobody renews it now. Redis answered PTTL at some moment in
     * [t_before, t_measured]: the lease ends no earlier than t_before + pttl. */
    t_before = h_now_ms();
    pttl = h_pttl(r, name, strlen(name));
    t_measured = h_now_ms();
    assert_true(pttl > 0);
    lease_end = t_measured + pttl;
    lease_end_min = t_before + pttl;

    t.lock = l;
    t.wait_ms = wd + 1000;
    t.lease_ms = 30000;
    h_actor_post(act, h_op_try_lock, &t);
    /* Until the lease ends, the dead holder's field is the only one. */
    while (h_now_ms() < lease_end - 20 && !h_actor_done(act)) {
        H_ASSERT_LOCK_IS(r, name, id, 1);
        busy_checks++;
        h_sleep_ms(20);
    }
    H_ASSERT_RC((int)h_actor_wait(act, wd + 5000), RLOCK_OK);
    t_acq = h_actor_finished_ms(act);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(pc), 1);

    printf("scenario 1 (%s lock, WD %lld ms): holder killed %lld ms after locking; "
           "its TTL after the kill %lld ms; the other process acquired %lld ms after the kill "
           "(%lld ms after the lease ended; bound: not before the lease end, within %lld ms); "
           "%lld checks saw the dead holder's field until then\n",
           watchdog ? "watchdog" : "lease", wd, t_kill - t_lock, pttl, t_acq - t_kill,
           t_acq - lease_end_min, wd + 1000, busy_checks);
    /* Not before the lease ended (1 ms of PTTL rounding), within timeout + 1 s. */
    H_ASSERT_BETWEEN(t_acq, lease_end_min - 1, t_kill + wd + 1000);

    H_ASSERT_RC(h_actor_call(act, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    h_actor_stop(act);
    rlock_free(l);
    rlock_client_close(pc);
    redisFree(r);
}

static void test_kill9_watchdog(void **state) {
    (void)state;
    kill9_case(1);
}

static void test_kill9_lease(void **state) {
    (void)state;
    kill9_case(0);
}

/* ---- scenario 2: SIGSTOP longer than the lease ------------------------- */

static void test_holder_sigstop(void **state) {
    const long long wd = H_MS(2000), interval = wd / 3;
    const char *name = h_unique_name("sigstop");
    struct holder_args a = {h_server_url(h_srv), name, wd, RLOCK_LEASE_WATCHDOG};
    redisContext *r = h_server_redis(h_srv);
    rlock_client *pc;
    rlock *l;
    h_child ch;
    char id[128], line[256];
    long long t_stop, t_acq, t_cont, pttl0, t0, pttl1, t1, lost_ms = 0, pub0, pub1, drift;
    int lost = -1, rc = 0, held = -1;
    (void)state;

    start_holder(&ch, &a, id, sizeof id);
    H_ASSERT_LOCK_IS(r, name, id, 1);
    pc = h_open_url(h_server_url(h_srv), 0, 0);
    l = h_get(pc, name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 30000), RLOCK_BUSY);

    if (kill(ch.pid, SIGSTOP) != 0)
        H_FAIL("SIGSTOP: %s", strerror(errno));
    H_WAIT_FOR(h_proc_state(ch.pid) == 'T', 2000);
    t_stop = h_now_ms();

    /* The second process (this one) acquires once the lease runs out. */
    H_ASSERT_RC(rlock_try_lock(l, wd + wd / 2, 30000), RLOCK_OK);
    t_acq = h_now_ms();
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(pc), 1);
    pttl0 = h_pttl(r, name, strlen(name));
    t0 = h_now_ms();

    /* Keep the holder stopped for 1.5 x WD in all. */
    h_sleep_ms(t_stop + wd + wd / 2 - h_now_ms());
    if (kill(ch.pid, SIGCONT) != 0)
        H_FAIL("SIGCONT: %s", strerror(errno));
    t_cont = h_now_ms();

    /* The holder is told: its next renewal round (due at once) finds the field gone. */
    h_child_send(&ch, "WAITLOST %lld", interval + 2000);
    h_child_recv(&ch, line, sizeof line, interval + 5000);
    if (sscanf(line, "LOST %d %lld", &lost, &lost_ms) != 2 || lost != 1)
        H_FAIL("after SIGCONT the holder reports \"%s\", expected one on_lock_lost", line);
    /* ... exactly once: two more renewal intervals bring nothing new. */
    h_sleep_ms(2 * interval + 100);
    h_child_send(&ch, "LOST");
    h_child_recv(&ch, line, sizeof line, 5000);
    if (sscanf(line, "LOST %d", &lost) != 1 || lost != 1)
        H_FAIL("on_lock_lost count is \"%s\", expected 1", line);

    h_child_send(&ch, "HELD");
    h_child_recv(&ch, line, sizeof line, 5000);
    if (sscanf(line, "HELD %d", &held) != 1 || held != 0)
        H_FAIL("old holder: is_held_by_current_thread answered \"%s\", expected 0", line);

    pub0 = h_commandstat_calls(r, "publish");
    h_child_send(&ch, "UNLOCK");
    h_child_recv(&ch, line, sizeof line, 10000);
    if (sscanf(line, "UNLOCK %d", &rc) != 1)
        H_FAIL("bad reply \"%s\"", line);
    H_ASSERT_RC(rc, RLOCK_ENOTOWNER);
    pub1 = h_commandstat_calls(r, "publish");

    /* The second owner is untouched: its field, and a TTL that only ran down. */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(pc), 1);
    pttl1 = h_pttl(r, name, strlen(name));
    t1 = h_now_ms();
    drift = pttl1 - (pttl0 - (t1 - t0));

    printf("scenario 2 (WD %lld ms): holder stopped %lld ms; the second process acquired "
           "%lld ms after the stop; on_lock_lost once, %lld ms after SIGCONT; old holder's "
           "unlock = %s, PUBLISH calls +%lld; second owner's TTL %lld -> %lld ms over %lld ms "
           "(drift %+lld ms)\n",
           wd, t_cont - t_stop, t_acq - t_stop, lost_ms - t_cont, rlock_status_name(rc),
           pub1 - pub0, pttl0, pttl1, t1 - t0, drift);
    assert_int_equal(pub1 - pub0, 0);
    H_ASSERT_BETWEEN(t_acq - t_stop, 1, wd + interval + 200);
    H_ASSERT_BETWEEN(lost_ms - t_cont, 0, interval + H_MS(1000));
    H_ASSERT_BETWEEN(drift, -H_MS(50), 5);

    h_child_send(&ch, "QUIT");
    assert_int_equal(h_child_finish(&ch, 10000), 0);
    /* The old holder's client closed: still the second owner's lock. */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(pc), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    rlock_free(l);
    rlock_client_close(pc);
    redisFree(r);
}

/* ---- F5: holder cut off from Redis ------------------------------------- */

static void test_holder_cut_off(void **state) {
    const long long wd = H_MS(2000), interval = wd / 3;
    const char *name = h_unique_name("cutoff");
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    struct h_lost lost;
    rlock_config cfg;
    rlock_client *holder, *other;
    rlock *hl, *ol;
    struct h_proxy_stats st;
    long long t_cut, t_acq, t_back, pttl_other;
    (void)state;

    h_lost_init(&lost);
    h_config(&cfg);
    cfg.url = h_proxy_url(px);
    cfg.watchdog_timeout_ms = wd;
    cfg.command_timeout_ms = (int)H_MS(300);
    cfg.on_lock_lost = h_lost_cb;
    cfg.callback_arg = &lost;
    holder = h_open_config(&cfg);
    other = h_open_url(h_server_url(h_srv), 0, 0);
    hl = h_get(holder, name);
    ol = h_get(other, name);

    H_ASSERT_RC(rlock_lock(hl), RLOCK_OK);
    h_sleep_ms(interval + 100); /* one renewal through the proxy */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(holder), 1);

    /* Cut the holder off: every connection reset, new ones refused. */
    h_proxy_set_refuse(px, 1);
    t_cut = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(ol, wd + interval + 500, 30000), RLOCK_OK);
    t_acq = h_now_ms();
    /* The holder is told while still cut off, when its lease runs out by its
     * own clock (the last renewal it saw confirmed + the lease), not when the
     * link comes back: it must not go on believing it holds a lock another
     * client now has. */
    H_WAIT_FOR(h_lost_count(&lost) >= 1, wd + H_MS(500));
    H_ASSERT_BETWEEN(lost.last_ms - t_cut, wd - interval - H_MS(200), wd + H_MS(300));
    H_ASSERT_RC(rlock_is_held_by_current_thread(hl), 0); /* no round trip: still cut off */
    /* Keep it cut off for 1.5 x the lease in all. */
    h_sleep_ms(t_cut + wd + wd / 2 - h_now_ms());
    h_proxy_set_refuse(px, 0);
    t_back = h_now_ms();
    printf("F5 (WD %lld ms): holder cut off for %lld ms; another client acquired %lld ms "
           "after the cut; the holder was told %lld ms after the cut, while still cut off\n",
           wd, t_back - t_cut, t_acq - t_cut, lost.last_ms - t_cut);
    h_sleep_ms(2 * interval); /* renewal rounds after the link is back: no second report */
    assert_int_equal(h_lost_count(&lost), 1);
    assert_string_equal(lost.last_name, name);
    H_ASSERT_RC(rlock_is_held_by_current_thread(hl), 0);
    H_ASSERT_RC(rlock_unlock(hl), RLOCK_ENOTOWNER);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(other), 1);
    pttl_other = h_pttl(r, name, strlen(name));
    H_ASSERT_BETWEEN(pttl_other, 30000 - (h_now_ms() - t_acq) - H_MS(100), 30000);
    h_proxy_stats(px, &st);
    assert_true(st.refused + st.cuts >= 1);

    H_ASSERT_RC(rlock_unlock(ol), RLOCK_OK);
    /* The holder's client still works through the proxy. */
    H_ASSERT_RC(rlock_try_lock(hl, 1000, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(hl), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(hl);
    rlock_free(ol);
    rlock_client_close(holder);
    rlock_client_close(other);
    h_proxy_stop(px);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_watchdog),
        cmocka_unit_test(test_kill9_lease),
        cmocka_unit_test(test_holder_sigstop),
        cmocka_unit_test(test_holder_cut_off),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_kill9*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, h_server_fixture_start, h_server_fixture_stop);
}
