/*
 * sentinel_rlockctl.c - rlockctl on a redis-sentinel:// url: a master, two
 * replicas and three sentinels of the test's own (test/harness/sentinel.c).
 *
 *   list, show, unlock   find the lock at the master the sentinels name
 *                        (never at a replica), show its owner, force-unlock it
 *   after a failover     the same commands reach the new master
 *   watch                goes on through a failover and the old master's
 *                        death: listens again at the new master, and hears
 *                        the unlocks there
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

#define WATCH_SCREENS 80
#define WATCH_INTERVAL_MS 250

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

static void *churn_main(void *arg) {
    churn_arg *a = arg;
    while (!atomic_load(&a->ch->stop)) {
        if (rlock_try_lock(a->ch->lock[a->i], 200, 5000) == RLOCK_OK) {
            h_sleep_ms(5);
            rlock_unlock(a->ch->lock[a->i]);
        } else {
            h_sleep_ms(20);
        }
    }
    return NULL;
}

typedef struct watch_run {
    const char *url, *name;
    h_tool t;
} watch_run;

static void *watch_main(void *arg) {
    watch_run *w = arg;
    char screens[16], interval[16];
    snprintf(screens, sizeof(screens), "%d", WATCH_SCREENS);
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

static void test_watch_through_failover(void **state) {
    h_sentinels *hs = *state;
    char name[160];
    snprintf(name, sizeof(name), "%s", h_unique_name("ctl-sentinel-watch"));
    rlock_client *c[2] = {open_on(hs->url), open_on(hs->url)};
    churn ch = {.lock = {h_get(c[0], name), h_get(c[1], name)}};
    churn_arg args[2] = {{&ch, 0}, {&ch, 1}};
    for (int i = 0; i < 2; i++)
        pthread_create(&ch.th[i], NULL, churn_main, &args[i]);
    watch_run w = {.url = hs->url, .name = name};
    pthread_t watcher;
    long long start = h_now_ms();
    pthread_create(&watcher, NULL, watch_main, &w);

    h_sleep_ms(1500);
    h_server *old = h_sentinels_role_master(hs);
    h_server *promoted = h_sentinels_failover(hs);
    assert_ptr_not_equal(old, promoted);
    h_server_kill(old); /* the watch's listener was there: its connection fails */
    long long killed_after = h_now_ms() - start;
    pthread_join(watcher, NULL);
    atomic_store(&ch.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(ch.th[i], NULL);

    /* The last 12 screens (3 s or more) came at least a second after the kill. */
    long long run_ms = (long long)WATCH_SCREENS * WATCH_INTERVAL_MS;
    if (killed_after > run_ms - 4000)
        H_FAIL("the failover took until %lld ms into a %lld ms watch: nothing left to check",
               killed_after, run_ms);
    long long heard[WATCH_SCREENS];
    int screens = heard_per_screen(w.t.out, heard, WATCH_SCREENS);
    print_message("      old master killed %lld ms into the watch; messages heard: screen %d %lld, "
                  "last (%d) %lld\n", killed_after, screens - 12, heard[screens - 13], screens,
                  heard[screens - 1]);
    h_tool_expect(&w.t, 0, name);
    assert_int_equal(screens, WATCH_SCREENS);
    if (strstr(w.t.err, "listening again") == NULL)
        H_FAIL("the listener's loss was not said:\n%s", w.t.err);
    assert_true(heard[screens - 1] > heard[screens - 13]);
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
