/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_handoff_bounded.c - in-process hand-offs (rlock_config.local_handoffs):
 * local_handoffs bounds the run. A waiter of another client (standing in for
 * another process) still gets the lock while threads of one client take it
 * in turn, and local_handoffs 0 turns hand-offs off (every unlock publishes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/*
 * Threads of one client take the lock in turn as fast as they can; a waiter
 * of another client must still get it (every local_handoffs + 1-th unlock
 * publishes), and with local_handoffs 0 every unlock publishes.
 */
enum { CHURNERS = 3 };

struct churn {
    rlock *lock;
    atomic_int *stop;
    long long rounds;
    int errors;
};

static void *churn_main(void *p) {
    struct churn *ch = p;
    while (!atomic_load(ch->stop)) {
        if (rlock_lock(ch->lock) != RLOCK_OK) {
            ch->errors++;
            continue;
        }
        h_sleep_ms(1);
        if (rlock_unlock(ch->lock) != RLOCK_OK)
            ch->errors++;
        ch->rounds++;
    }
    return NULL;
}

static void run_bounded(int local_handoffs) {
    rlock_client *busy = h_open_handoffs(30000, local_handoffs);
    rlock_client *other = h_open_handoffs(30000, local_handoffs);
    const char *name = h_unique_name("handoff-bounded");
    redisContext *r = h_redis();
    rlock *lb = h_get(busy, name), *lo = h_get(other, name);
    /* static: a failed test may leave the threads running with them. */
    static struct churn ch[CHURNERS];
    static pthread_t th[CHURNERS];
    static atomic_int stop;
    long long rounds = 0, pub0, pubs, t0, waited;
    int i, j;

    atomic_store(&stop, 0);
    pub0 = h_commandstat_calls(r, "publish");
    for (i = 0; i < CHURNERS; i++) {
        ch[i] = (struct churn){.lock = lb, .stop = &stop};
        assert_int_equal(pthread_create(&th[i], NULL, churn_main, &ch[i]), 0);
    }
    h_sleep_ms(300);
    /* The other client's waiter gets the lock, repeatedly. */
    for (j = 0; j < 5; j++) {
        t0 = h_now_ms();
        int rc = rlock_try_lock(lo, H_MS(10000), -1);
        waited = h_now_ms() - t0;
        if (rc != RLOCK_OK) {
            atomic_store(&stop, 1);
            H_FAIL("local_handoffs %d: the other client's waiter: %s after %lld ms",
                   local_handoffs, rlock_status_name(rc), waited);
        }
        H_ASSERT_RC(rlock_unlock(lo), RLOCK_OK);
        print_message("      local_handoffs %d: the other client's waiter got it after %lld ms\n",
                      local_handoffs, waited);
        h_sleep_ms(20);
    }
    atomic_store(&stop, 1);
    for (i = 0; i < CHURNERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(ch[i].errors, 0);
        assert_true(ch[i].rounds > 0);
        rounds += ch[i].rounds;
    }
    pubs = h_commandstat_calls(r, "publish") - pub0;
    print_message("      %lld local acquisitions, %lld unlock messages\n", rounds, pubs);
    if (local_handoffs == 0)
        H_ASSERT_BETWEEN(pubs, rounds + 5, rounds + 5);
    else /* at least one release per local_handoffs + 1 unlocks, far fewer than all */
        H_ASSERT_BETWEEN(pubs, (rounds + 5) / (local_handoffs + 1), rounds);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(lb);
    rlock_free(lo);
    redisFree(r);
    rlock_client_close(busy);
    rlock_client_close(other);
}

static void test_handoff_bounded(void **state) {
    (void)state;
    run_bounded(2);
}

static void test_handoff_off(void **state) {
    (void)state;
    run_bounded(0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoff_off),
        cmocka_unit_test(test_handoff_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
