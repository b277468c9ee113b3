/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_rlockctl.c - rlockctl on a redis-sentinel:// url: a master, two
 * replicas and three sentinels of the test's own (test/harness/sentinel.c).
 *
 *   list, show, unlock   find the lock at the master the sentinels name
 *                        (never at a replica), show its owner, force-unlock it
 *   after a failover     the same commands reach the new master
 *   watch                goes on through the master's death and a
 *                        failover: listens again at the new master, and
 *                        hears the unlocks there
 *
 * One set-up per test; durations scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static rlock_client *open_on(const char *url) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    return h_open_config(&cfg);
}

/* Waits until both replicas have everything written so far (WAIT on the master). */
static void replicate(const h_server *master) {
    redisContext *m = h_server_redis(master);
    H_ASSERT_BETWEEN(h_cmd_int(m, "WAIT 2 5000"), 2, 2);
    redisFree(m);
}

/* list, show --json and their owner, at whichever master the sentinels name now. */
static void expect_listed(const h_sentinels *hs, const char *name, const char *pattern,
                          const char *owner_id) {
    h_tool t;
    h_tool_run(&t, hs->url, "list", pattern, NULL);
    h_tool_expect(&t, 0, name);
    h_tool_free(&t);
    h_tool_run(&t, hs->url, "show", name, "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".owners[0].client_id", owner_id);
    h_jq_expect(t.out, ".kind", "plain");
    h_tool_free(&t);
}

static void test_sentinel_url(void **state) {
    h_sentinels *hs = *state;
    char name[160], pattern[170];
    snprintf(name, sizeof(name), "%s", h_unique_name("ctl-sentinel"));
    snprintf(pattern, sizeof(pattern), "%s*", name);
    rlock_client *c = open_on(hs->url);
    rlock *l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    replicate(h_sentinels_role_master(hs));
    expect_listed(hs, name, pattern, rlock_client_id(c));

    h_server *promoted = h_sentinels_failover(hs);
    /* rlockctl may ask any sentinel, and the old master answers as one until the sentinels
     * demote it (seconds later): until every sentinel names the new master, rlockctl could
     * unlock at the old one (CI saw it: the key came back from the new master). */
    h_sentinels_wait_named(hs, promoted, 10000);
    H_WAIT_FOR(rlock_is_held_by_current_thread(l) == 1, 10000);
    redisContext *m = h_server_redis(promoted);
    assert_int_equal(h_exists(m, name, strlen(name)), 1);
    expect_listed(hs, name, pattern, rlock_client_id(c));

    h_tool t;
    h_tool_run(&t, hs->url, "unlock", name, "--yes", NULL);
    h_tool_expect(&t, 0, "force-unlocked");
    h_tool_free(&t);
    assert_int_equal(h_exists(m, name, strlen(name)), 0);
    h_tool_run(&t, hs->url, "show", name, NULL);
    h_tool_expect(&t, 1, NULL);
    h_tool_free(&t);
    redisFree(m);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_close(c);
}

/* ---- watch through a failover ------------------------------------------------------- */

#define WATCH_INTERVAL_MS 250
#define WATCH_LAST 12 /* the screens compared at the end: 3 s or more */

/* Two clients handing a lock back and forth; errors (during the failover) are waited out. */
typedef struct churn {
    rlock *lock[2];
    pthread_t th[2];
    atomic_int stop;
} churn;

typedef struct churn_arg {
    churn *ch;
    int i;
} churn_arg;

/* An unlock that did not complete (RLOCK_EIO during the failover) is sent again, as the
 * header asks: else the next try_lock re-enters and the lock is never let go. */
static void *churn_main(void *arg) {
    churn_arg *a = arg;
    rlock *l = a->ch->lock[a->i];
    while (!atomic_load(&a->ch->stop)) {
        if (rlock_try_lock(l, 200, 5000) != RLOCK_OK) {
            h_sleep_ms(20);
            continue;
        }
        h_sleep_ms(5);
        int rc;
        while ((rc = rlock_unlock(l)) != RLOCK_OK && rc != RLOCK_ENOTOWNER && rc != RLOCK_ELOST)
            h_sleep_ms(20);
    }
    return NULL;
}

/* rlockctl watch on a thread of its own: it only records (the harness fails on the main one). */
typedef struct watch_run {
    const char *url, *name;
    int screens;
    h_tool t;
} watch_run;

static void *watch_main(void *arg) {
    watch_run *w = arg;
    char screens[16], interval[16];
    snprintf(screens, sizeof(screens), "%d", w->screens);
    snprintf(interval, sizeof(interval), "%d", WATCH_INTERVAL_MS);
    h_tool_run(&w->t, w->url, "watch", w->name, "--interval", interval, "-n", screens, NULL);
    return NULL;
}

/* The "N messages heard" of each screen header, in order; how many there are. */
static int heard_per_screen(const char *out, long long *heard, int max) {
    int n = 0;
    for (const char *p = out; n < max && (p = strstr(p, "-- rlockctl watch ")) != NULL; p++) {
        const char *end = strchr(p, '\n'), *h = strstr(p, " messages heard");
        if (h == NULL || end == NULL || h > end)
            H_FAIL("a screen header without its count:\n%s", out);
        while (h > p && h[-1] >= '0' && h[-1] <= '9')
            h--;
        heard[n++] = atoll(h);
    }
    return n;
}

/* The server the sentinels name as master, once it is not old; NULL after timeout_ms. */
static h_server *new_master(h_sentinels *hs, const h_server *old, long long timeout_ms) {
    long long deadline = h_now_ms() + h_scaled(timeout_ms);
    h_server *now = NULL;
    while ((now = h_sentinels_named_master(hs, 0)) == NULL || now == old) {
        if (h_now_ms() > deadline)
            return NULL;
        h_sleep_ms(50);
    }
    return now;
}

/*
 * The master killed (no SENTINEL FAILOVER: its listener's connection fails,
 * samples fail until the sentinels promote a replica) during a watch of a lock
 * two clients hand back and forth: the watch goes on, says it listens again,
 * and hears the unlocks at the new master.
 */
static void test_watch_through_failover(void **state) {
    h_sentinels *hs = *state;
    char name[160];
    snprintf(name, sizeof(name), "%s", h_unique_name("ctl-sentinel-watch"));
    rlock_client *c[2] = {open_on(hs->url), open_on(hs->url)};
    churn ch = {.lock = {h_get(c[0], name), h_get(c[1], name)}};
    churn_arg args[2] = {{&ch, 0}, {&ch, 1}};
    /* The failover takes ~4 s whatever the build; the screens after it, the scale's time. */
    long long run_ms = 8000 + h_scaled(4000);
    watch_run w = {.url = hs->url, .name = name, .screens = (int)(run_ms / WATCH_INTERVAL_MS)};
    h_server *old = h_sentinels_role_master(hs);
    pthread_t watcher;

    for (int i = 0; i < 2; i++)
        pthread_create(&ch.th[i], NULL, churn_main, &args[i]);
    long long start = h_now_ms();
    pthread_create(&watcher, NULL, watch_main, &w);
    h_sleep_ms(1500);
    h_server_kill(old);
    h_server *promoted = new_master(hs, old, 15000);
    long long switched_after = h_now_ms() - start;
    pthread_join(watcher, NULL);
    atomic_store(&ch.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(ch.th[i], NULL);

    if (promoted == NULL)
        H_FAIL("no replica was promoted within 15 s of the master's kill");
    if (switched_after > run_ms - 5000)
        H_FAIL("the failover took until %lld ms into a %lld ms watch: nothing left to check",
               switched_after, run_ms);
    long long heard[1000];
    int screens = heard_per_screen(w.t.out, heard, 1000);
    h_tool_expect(&w.t, 0, name);
    if (screens <= WATCH_LAST)
        H_FAIL("%d screens drawn:\n%s", screens, w.t.out);
    print_message("      new master named %lld ms into the watch; %d of %d screens drawn; "
                  "messages heard: screen %d %lld, last %lld\n", switched_after, screens,
                  w.screens, screens - WATCH_LAST, heard[screens - WATCH_LAST - 1],
                  heard[screens - 1]);
    if (strstr(w.t.err, "listening again") == NULL)
        H_FAIL("the listener's loss was not said:\n%s", w.t.err);
    if (heard[screens - 1] <= heard[screens - WATCH_LAST - 1])
        H_FAIL("no unlock heard in the last %d screens:\n%s", WATCH_LAST, w.t.out);
    h_tool_free(&w.t);
    for (int i = 0; i < 2; i++) {
        rlock_free(ch.lock[i]);
        rlock_client_close(c[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SENTINEL_TEST(test_sentinel_url),
        H_SENTINEL_TEST(test_watch_through_failover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
