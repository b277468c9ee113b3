/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_observe.c - seeing a redis-sentinel:// client (issue 14): its
 * connections to the sentinels (failover events) and to the master are all
 * named rlock:<host>:<pid>:<id8>, none of ours is left unnamed; its
 * registration hash is on the master, and after a failover it is written
 * again on the new one; close deletes it. A master, two replicas and three
 * sentinels of its own.
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

static h_conns conns_on(const h_server *s, const char *client_id) {
    redisContext *c = h_server_redis(s);
    h_conns n = h_client_list(c, client_id);
    redisFree(c);
    return n;
}

static void test_sentinel_names_and_registration(void **state) {
    h_sentinels *hs = *state;
    h_server *master = h_sentinels_role_master(hs);
    int unnamed_master = conns_on(master, "-").unnamed, unnamed_sentinel[3];
    char key[128], id[40];
    rlock_config cfg;
    for (int i = 0; i < 3; i++)
        unnamed_sentinel[i] = conns_on(hs->sentinel[i], "-").unnamed;
    h_config(&cfg);
    cfg.url = hs->url;
    cfg.watchdog_timeout_ms = H_MS(3000);
    rlock_client *c = h_open_config(&cfg);
    snprintf(id, sizeof id, "%s", rlock_client_id(c));
    snprintf(key, sizeof key, "rlock:client:%s", id);
    rlock *l = h_get(c, h_unique_name("observe"));
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);

    h_conns on_master = conns_on(master, id);
    printf("      master: %d named, unnamed %d -> %d\n", on_master.named, unnamed_master,
           on_master.unnamed);
    assert_true(on_master.named >= 1);
    assert_int_equal(on_master.unnamed, unnamed_master);
    /* The failover-event subscriptions are the monitor thread's, made after the open
     * returned (and retried each second): wait for one before counting. */
    H_WAIT_FOR(conns_on(hs->sentinel[0], id).named + conns_on(hs->sentinel[1], id).named +
                       conns_on(hs->sentinel[2], id).named >= 1,
               5000);
    int named_on_sentinels = 0;
    for (int i = 0; i < 3; i++) {
        /* The once-a-second poll opens a connection to one sentinel in turn: caught between
         * its accept and its first command (which carries its name), it is unnamed for a
         * moment. One of ours left unnamed stays so: wait for the count to come back. */
        h_conns n = conns_on(hs->sentinel[i], id);
        long long until = h_now_ms() + H_MS(2000);
        while (n.unnamed != unnamed_sentinel[i] && h_now_ms() < until) {
            h_sleep_ms(50);
            n = conns_on(hs->sentinel[i], id);
        }
        printf("      sentinel %d: %d named, unnamed %d -> %d\n", i, n.named, unnamed_sentinel[i],
               n.unnamed);
        assert_int_equal(n.unnamed, unnamed_sentinel[i]);
        named_on_sentinels += n.named;
    }
    assert_true(named_on_sentinels >= 1); /* the failover-event subscriptions */
    redisContext *m = h_server_redis(master);
    assert_int_equal(h_cmd_int(m, "HLEN %s", key), 8);
    H_ASSERT_BETWEEN(h_cmd_int(m, "WAIT 2 5000"), 2, 2); /* the lock survives the failover */
    redisFree(m);

    /* A failover: the new master gets the registration at the next rewrite. */
    h_server *promoted = h_sentinels_failover(hs);
    redisContext *p = h_server_redis(promoted);
    H_WAIT_FOR(h_cmd_int(p, "EXISTS %s", key) == 1, 3 * 3000);
    assert_int_equal(h_cmd_int(p, "HLEN %s", key), 8);
    H_WAIT_FOR(rlock_is_held_by_current_thread(l) == 1, 10000);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_close(c);
    assert_int_equal(h_exists(p, key, strlen(key)), 0);
    assert_int_equal(conns_on(promoted, id).named, 0);
    redisFree(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SENTINEL_TEST(test_sentinel_names_and_registration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
