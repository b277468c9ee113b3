/*
 * sentinel_rlockctl.c - rlockctl on a redis-sentinel:// url: a master, two
 * replicas and three sentinels of the test's own (test/harness/sentinel.c).
 *
 *   list, show, unlock   find the lock at the master the sentinels name
 *                        (never at a replica), show its owner, force-unlock it
 *   after a failover     the same commands reach the new master
 *
 * One set-up per test; durations scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SENTINEL_TEST(test_sentinel_url),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
