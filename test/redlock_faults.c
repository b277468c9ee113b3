/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock_faults.c - the Redlock under master failures, on 3 and 5
 * redis-servers of its own (make test-redlock):
 *
 *   - a master down and another SIGSTOPped at once (5 masters): acquired
 *     without waiting for the paused one (the others are a quorum), the
 *     validity honoured;
 *   - a master of the holder's quorum killed and restarted EMPTY only after
 *     the lease (antirez's delayed restart): nobody else gets the lock
 *     before the holder's lease has ended (3 and 5 masters);
 *   - the same master restarted empty AT ONCE: a second owner gets the lock
 *     while the first one's validity lasts. This is the documented hazard
 *     (docs/failure-modes.md), shown here so that nobody relies on it;
 *   - 4 processes x 4 threads contending, a master killed during the run
 *     and restarted (empty, after the lease): exclusion exact, every
 *     holder inside its validity, progress while the master is down.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "harness.h"

#define MAX_MASTERS 5
#define REPLY_BOUND_MS 300 /* the clients' command_timeout_ms */

static long long drift(long long lease_ms) {
    return lease_ms / 100 + 2;
}

/* n servers and a Redlock over them through clients of its own. */
typedef struct masters {
    int n;
    h_server *srv[MAX_MASTERS];
} masters;

typedef struct rl_set {
    int n;
    rlock_client *c[MAX_MASTERS];
    rlock_redlock *rl;
} rl_set;

static void rl_open(rl_set *s, const masters *m, const char *name) {
    s->n = m->n;
    for (int i = 0; i < m->n; i++)
        s->c[i] = h_open_url(h_server_url(m->srv[i]), 30000, (int)H_MS(REPLY_BOUND_MS));
    H_ASSERT_RC(rlock_redlock_new(s->c, (size_t)m->n, name, &s->rl), RLOCK_OK);
}

static void rl_close(rl_set *s) {
    rlock_redlock_free(s->rl);
    for (int i = 0; i < s->n; i++)
        rlock_client_close(s->c[i]);
}

/* 5 masters: one down, one paused -- the quorum of 3 is all that is left. */
static void test_down_and_paused(void **state) {
    const char *name = h_unique_name("redlock-down-paused");
    const long long lease = H_MS(3000); /* room for reply bounds, however scaled */
    masters m = {.n = 5};
    rl_set a, b;
    long long validity, ignored;
    (void)state;
    h_servers_start(m.n, m.srv);
    rl_open(&a, &m, name);
    rl_open(&b, &m, name);
    H_ASSERT_RC(rlock_redlock_try_lock(a.rl, 0, lease, &validity), RLOCK_OK); /* connections up */
    H_ASSERT_RC(rlock_redlock_unlock(a.rl), RLOCK_OK);
    h_server_kill(m.srv[0]);
    h_server_pause(m.srv[1]);
    long long before = h_now_ms();
    H_ASSERT_RC(rlock_redlock_try_lock(a.rl, 0, lease, &validity), RLOCK_OK);
    long long took = h_now_ms() - before;
    print_message("      5 masters, one down and one paused: acquired in %lld ms, validity %lld\n",
                  took, validity);
    /* The three that answer are a quorum: the paused one is not waited for. */
    H_ASSERT_BETWEEN(took, 0, H_MS(REPLY_BOUND_MS) / 2);
    H_ASSERT_BETWEEN(validity, lease - drift(lease) - took, lease - drift(lease));
    long long valid_until = h_now_ms() + validity;
    /* Each attempt waits for the paused master: stop early enough to unlock within the lease. */
    while (h_now_ms() + H_MS(2 * REPLY_BOUND_MS) + 200 < valid_until) {
        H_ASSERT_RC(rlock_redlock_try_lock(b.rl, 0, lease, &ignored), RLOCK_BUSY);
        h_sleep_ms(100);
    }
    H_ASSERT_RC(rlock_redlock_unlock(a.rl), RLOCK_OK);
    h_server_resume(m.srv[1]);
    rl_close(&a);
    rl_close(&b);
    h_servers_stop(m.n, m.srv);
}

/*
 * The holder A holds on exactly a quorum (the other masters are down when
 * it acquires); then one master of its quorum is killed and the others come
 * back empty. B is a second Redlock of the same masters. The ends of A's
 * validity and of its lease are h_now_ms() times.
 */
typedef struct hazard {
    masters m;
    rl_set a, b;
    long long lease;
    long long valid_until, lease_end;
} hazard;

static void hazard_setup(hazard *h, int n, const char *name) {
    long long validity;
    int quorum = n / 2 + 1;
    h->m.n = n;
    h->lease = 2000;
    h_servers_start(n, h->m.srv);
    rl_open(&h->a, &h->m, name);
    rl_open(&h->b, &h->m, name);
    for (int i = quorum; i < n; i++)
        h_server_kill(h->m.srv[i]);
    long long before = h_now_ms();
    H_ASSERT_RC(rlock_redlock_try_lock(h->a.rl, 0, h->lease, &validity), RLOCK_OK);
    h->valid_until = h_now_ms() + validity;
    h->lease_end = before + h->lease;
    h_server_kill(h->m.srv[0]); /* A's hold there is gone with it */
    for (int i = quorum; i < n; i++)
        h_server_restart(h->m.srv[i]); /* empty; they never had A's hold */
}

static void hazard_teardown(hazard *h) {
    rl_close(&h->a);
    rl_close(&h->b);
    h_servers_stop(h->m.n, h->m.srv);
}

/* Delayed restart: the killed master stays down until the holder's lease has ended. */
static void delayed_restart(int n) {
    hazard h;
    long long ignored;
    hazard_setup(&h, n, h_unique_name("redlock-delayed"));
    int refused = 0;
    while (h_now_ms() < h.lease_end) {
        int rc = rlock_redlock_try_lock(h.b.rl, 0, h.lease, &ignored);
        if (rc == RLOCK_OK && h_now_ms() < h.lease_end)
            H_FAIL("%d masters: a second owner got the lock %lld ms before the holder's lease "
                   "ended (master down, not restarted)", n, h.lease_end - h_now_ms());
        if (rc == RLOCK_OK) { /* begun before the end, run after it: the holder's keys were gone */
            H_ASSERT_RC(rlock_redlock_unlock(h.b.rl), RLOCK_OK);
            break;
        }
        if (rc != RLOCK_BUSY)
            print_message("      %s\n", rlock_last_error());
        H_ASSERT_RC(rc, RLOCK_BUSY);
        refused++;
        h_sleep_ms(50);
    }
    h_sleep_ms(h.lease_end + 50 - h_now_ms());
    h_server_restart(h.m.srv[0]); /* after the longest lease: nothing it forgot is still valid */
    H_ASSERT_RC(rlock_redlock_try_lock(h.b.rl, 1000, h.lease, &ignored), RLOCK_OK);
    print_message("      %d masters: %d attempts refused while the master was down; granted "
                  "after its delayed restart\n", n, refused);
    assert_true(refused > 0);
    H_ASSERT_RC(rlock_redlock_unlock(h.b.rl), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_unlock(h.a.rl), RLOCK_ENOTOWNER); /* its lease is over */
    hazard_teardown(&h);
}

static void test_delayed_restart_3(void **state) {
    (void)state;
    delayed_restart(3);
}

static void test_delayed_restart_5(void **state) {
    (void)state;
    delayed_restart(5);
}

/* Immediate empty restart: what it gives (docs/failure-modes.md) -- two owners at once. */
static void immediate_restart(int n) {
    hazard h;
    long long ignored;
    hazard_setup(&h, n, h_unique_name("redlock-immediate"));
    h_server_restart(h.m.srv[0]); /* at once, empty: it forgot the holder's hold */
    int rc = rlock_redlock_try_lock(h.b.rl, 0, h.lease, &ignored);
    long long left = h.valid_until - h_now_ms();
    print_message("      %d masters, a master of the quorum restarted empty at once: a second "
                  "owner's try_lock = %s with %lld ms of the first one's validity left\n",
                  n, rlock_status_name(rc), left);
    /* The hazard is real: the algorithm cannot see a forgotten hold. */
    H_ASSERT_RC(rc, RLOCK_OK);
    assert_true(left > 0);
    H_ASSERT_RC(rlock_redlock_unlock(h.b.rl), RLOCK_OK);
    hazard_teardown(&h);
}

static void test_immediate_restart_3(void **state) {
    (void)state;
    immediate_restart(3);
}

static void test_immediate_restart_5(void **state) {
    (void)state;
    immediate_restart(5);
}

/* ---- exclusion under a kill and a delayed restart ------------------------------------------ */

#define CONTEST_LEASE_MS 2000

typedef struct contest_arg {
    int n;
    char url[MAX_MASTERS][64];
    char name[128];
} contest_arg;

typedef struct contest_ctx {
    rl_set s;
} contest_ctx;

static void *contest_open(const void *arg, int process) {
    static contest_ctx ctx; /* one per process: each child has its own copy */
    const contest_arg *a = arg;
    (void)process;
    ctx.s.n = a->n;
    for (int i = 0; i < a->n; i++) {
        rlock_config cfg;
        h_excl_config(&cfg, a->url[i]);
        cfg.command_timeout_ms = (int)H_MS(REPLY_BOUND_MS);
        if (rlock_client_open(&cfg, &ctx.s.c[i]) != RLOCK_OK)
            return NULL;
    }
    if (rlock_redlock_new(ctx.s.c, (size_t)a->n, a->name, &ctx.s.rl) != RLOCK_OK)
        return NULL;
    return &ctx;
}

static int contest_acquire(void *ctx, long long *valid_ms) {
    return rlock_redlock_try_lock(((contest_ctx *)ctx)->s.rl, 2000, CONTEST_LEASE_MS, valid_ms);
}

static int contest_release(void *ctx) {
    return rlock_redlock_unlock(((contest_ctx *)ctx)->s.rl);
}

static void contest_close(void *ctx) {
    rl_close(&((contest_ctx *)ctx)->s);
}

static void exclusion_with_kill(int n) {
    static contest_arg arg; /* read by the forked processes */
    masters m = {.n = n};
    h_exclusion ex;
    h_excl_result r;
    h_excl_ops ops = {contest_open, contest_acquire, contest_release, contest_close, &arg};
    h_servers_start(n, m.srv);
    arg.n = n;
    for (int i = 0; i < n; i++)
        snprintf(arg.url[i], sizeof arg.url[i], "%s", h_server_url(m.srv[i]));
    snprintf(arg.name, sizeof arg.name, "%s", h_unique_name("redlock-excl"));
    h_excl_start_ops(&ex, &ops, 4, 4);
    h_excl_wait_more(&ex, 200, 20000);
    h_server_kill(m.srv[1]);
    long long killed = h_now_ms();
    long long before_down = h_excl_acquisitions(&ex);
    h_excl_wait_more(&ex, 100, 20000); /* a quorum is left: still going */
    /* Delayed restart: down for longer than the lease. */
    h_sleep_ms(killed + CONTEST_LEASE_MS + 500 - h_now_ms());
    long long while_down = h_excl_acquisitions(&ex) - before_down;
    h_server_restart(m.srv[1]);
    h_excl_wait_more(&ex, 200, 20000);
    h_excl_stop(&ex, 30000, &r);
    print_message("      %d masters, 4 processes x 4 threads, master 1 killed and restarted "
                  "%lld ms later: %ld acquisitions while it was down\n",
                  n, (long long)(CONTEST_LEASE_MS + 500), (long)while_down);
    h_excl_print(&r);
    assert_int_equal(r.overruns, 0); /* every holder finished within its validity */
    assert_int_equal(r.overlaps, 0);
    assert_int_equal(r.counter, r.acquisitions);
    assert_int_equal(r.bad_unlocks, 0);
    assert_true(while_down >= 100);
    h_servers_stop(n, m.srv);
}

static void test_exclusion_kill_3(void **state) {
    (void)state;
    exclusion_with_kill(3);
}

static void test_exclusion_kill_5(void **state) {
    (void)state;
    exclusion_with_kill(5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_down_and_paused),
        cmocka_unit_test(test_delayed_restart_3),
        cmocka_unit_test(test_delayed_restart_5),
        cmocka_unit_test(test_immediate_restart_3),
        cmocka_unit_test(test_immediate_restart_5),
        cmocka_unit_test(test_exclusion_kill_3),
        cmocka_unit_test(test_exclusion_kill_5),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
