/*
 * test_handoff.c - in-process hand-offs (rlock_config.local_handoffs).
 *
 * When a thread's last unlock finds another thread of the same client asleep
 * waiting for the lock, the TRANSFER script moves the lock to it directly:
 *   - the waiter returns RLOCK_OK holding the lock (its own owner field,
 *     count 1, the TTL of *its* lease), nothing is published, and it takes
 *     no round trip of its own; a watchdog waiter is then renewed, a lease
 *     waiter is not;
 *   - local_handoffs bounds the run: a waiter of another client (standing in
 *     for another process) still gets the lock while threads of one client
 *     take it in turn, and local_handoffs 0 turns hand-offs off;
 *   - an offer in flight is seen through: a waiter whose deadline passes
 *     while its TRANSFER is running still gets the lock; a waiter cancelled
 *     then gives the lock back at once (nothing left held until the lease);
 *     a waiter woken by close while offered ends cleanly either way.
 * CLIENT PAUSE WRITE holds the TRANSFER script in Redis to open that window
 * deterministically.
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

static rlock_client *open_handoffs(long long watchdog_ms, int local_handoffs)
{
    rlock_config cfg;
    h_config(&cfg);
    cfg.watchdog_timeout_ms = watchdog_ms;
    cfg.local_handoffs = local_handoffs;
    return h_open_config(&cfg);
}

static long long publishes(redisContext *r)
{
    return h_commandstat_calls(r, "publish");
}

static long long scripts(redisContext *r)
{
    return h_script_calls(r);
}

/* Until the waiter has made its attempts and sleeps. */
static void wait_asleep(redisContext *r, long long quiet_ms)
{
    h_scripts_quiet(r, quiet_ms, 10000);
}

/* A watchdog waiter gets the lock straight from the unlocking thread. */
static void test_handoff_watchdog_waiter(void **state)
{
    rlock_client *c = open_handoffs(900, 4);
    const char *name = h_unique_name("handoff");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *waiter = h_actor_start();
    long long pub0, scripts0, t0;
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, l);
    wait_asleep(r, 200);
    pub0 = publishes(r);
    scripts0 = scripts(r);
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    print_message("      waiter returned %lld ms after the unlock began\n",
                  h_actor_finished_ms(waiter) - t0);
    /* One script (TRANSFER) moved it; nothing was published. */
    assert_int_equal(scripts(r) - scripts0, 1);
    assert_int_equal(publishes(r) - pub0, 0);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_int_equal(h_actor_call(waiter, h_op_is_held, l), 1);
    assert_int_equal(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 1, 900);
    /* The caller no longer holds it. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    /* The new owner is renewed: still held three watchdog timeouts later. */
    h_sleep_ms(2700);
    assert_int_equal(h_actor_call(waiter, h_op_is_held, l), 1);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 1, 900);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(publishes(r) - pub0, 1);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* A lease waiter gets its own lease and no renewal. */
static void test_handoff_lease_waiter(void **state)
{
    rlock_client *c = open_handoffs(30000, 4);
    const char *name = h_unique_name("handoff-lease");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *waiter = h_actor_start();
    struct h_try t = {l, 10000, 700};
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 20000, 30000);
    h_actor_post(waiter, h_op_try_lock, &t);
    wait_asleep(r, 200);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 1, 700);
    /* Not renewed: gone after its lease. */
    H_WAIT_FOR(!h_exists(r, name, strlen(name)), 3000);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_ENOTOWNER);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* A reentrant holder's partial unlock hands nothing over. */
static void test_handoff_only_last_hold(void **state)
{
    rlock_client *c = open_handoffs(30000, 4);
    const char *name = h_unique_name("handoff-reentrant");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *waiter = h_actor_start();
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, l);
    wait_asleep(r, 200);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_hold_count(l), 1);
    h_sleep_ms(100);
    assert_false(h_actor_done(waiter));
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}


static void *lock_then_exit(void *lock)
{
    return (void *)(intptr_t)rlock_lock(lock); /* exits holding it */
}

/*
 * A thread that queued (no attempt of its own), got the lock by a hand-off
 * and exited without unlocking: renewal stops and the lock expires.
 */
static void test_handoff_receiver_exits(void **state)
{
    rlock_client *c = open_handoffs(900, 4);
    const char *name = h_unique_name("handoff-exit");
    redisContext *r = h_redis();
    rlock *l = h_get(c, name);
    h_actor *first = h_actor_start();
    pthread_t th;
    void *ret = NULL;
    long long t0;
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_actor_post(first, h_op_lock, l);
    wait_asleep(r, 150);
    /* Queues behind the first waiter without an attempt of its own. */
    assert_int_equal(pthread_create(&th, NULL, lock_then_exit, l), 0);
    h_sleep_ms(30); /* well inside its first sleep (100 ms): no attempt yet */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(first, 5000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(first, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(pthread_join(th, &ret), 0);
    H_ASSERT_RC((int)(intptr_t)ret, RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    t0 = h_now_ms();
    H_WAIT_FOR(!h_exists(r, name, strlen(name)), 5000);
    print_message("      the exited receiver's lock expired %lld ms after its thread ended "
                  "(watchdog timeout 900 ms)\n", h_now_ms() - t0);

    h_actor_stop(first);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/*
 * Locks "X" and "{X}" share one channel (Redisson's naming). A waiter for
 * "{X}" must never be handed "X", nor queue "X" callers behind it.
 */
static void test_handoff_same_channel_other_lock(void **state)
{
    rlock_client *c = open_handoffs(30000, 4);
    const char *name = h_unique_name("handoff-chan");
    char braced[256];
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    rlock *la, *lb;
    size_t clen_a, clen_b;
    char *ca, *cb;
    (void)state;

    snprintf(braced, sizeof braced, "{%s}", name);
    ca = h_channel(name, strlen(name), &clen_a);
    cb = h_channel(braced, strlen(braced), &clen_b);
    assert_true(clen_a == clen_b && memcmp(ca, cb, clen_a) == 0);
    la = h_get(c, name);
    lb = h_get(c, braced);
    h_cmd_ok(r, "HSET %s other-owner:1 1", braced);
    h_cmd_ok(r, "PEXPIRE %s 30000", braced);

    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, lb);
    wait_asleep(r, 200);
    /* Not queued behind the "{X}" waiter: re-entry and a second thread work as usual. */
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    h_sleep_ms(200);
    assert_false(h_actor_done(waiter));
    assert_int_equal(h_cmd_int(r, "HEXISTS %s other-owner:1", braced), 1);
    H_ASSERT_RC(rlock_try_lock(la, 1000, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    assert_false(h_actor_done(waiter));

    h_cmd_ok(r, "DEL %s", braced);
    h_cmd_ok(r, "PUBLISH %b 0", cb, clen_b);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, braced, rlock_client_id(c), 1);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lb), RLOCK_OK);

    free(ca);
    free(cb);
    h_actor_stop(waiter);
    rlock_free(la);
    rlock_free(lb);
    redisFree(r);
    rlock_client_close(c);
}

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

static void *churn_main(void *p)
{
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

static void run_bounded(int local_handoffs)
{
    rlock_client *busy = open_handoffs(30000, local_handoffs);
    rlock_client *other = open_handoffs(30000, local_handoffs);
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
    pub0 = publishes(r);
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
    pubs = publishes(r) - pub0;
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

static void test_handoff_bounded(void **state)
{
    (void)state;
    run_bounded(2);
}

static void test_handoff_off(void **state)
{
    (void)state;
    run_bounded(0);
}

/*
 * Opens the window between offer and outcome: CLIENT PAUSE WRITE holds every
 * script in Redis, so the holder's TRANSFER waits pause_ms while the waiter
 * is already chosen.
 */
struct offered {
    rlock_client *c;
    redisContext *r;
    rlock *lock;
    h_actor *holder;
    const char *name;
};

static void offered_setup(struct offered *o, const char *prefix)
{
    o->c = open_handoffs(30000, 4);
    o->name = h_unique_name(prefix);
    o->r = h_redis();
    o->lock = h_get(o->c, o->name);
    o->holder = h_actor_start();
    H_ASSERT_RC((int)h_actor_call(o->holder, h_op_lock, o->lock), RLOCK_OK);
}

/* Starts the holder's unlock with scripts paused for pause_ms. */
static void offered_unlock(struct offered *o, long long pause_ms)
{
    h_cmd_ok(o->r, "CLIENT PAUSE %lld WRITE", pause_ms);
    h_actor_post(o->holder, h_op_unlock, o->lock);
}

static void offered_teardown(struct offered *o)
{
    h_actor_stop(o->holder);
    rlock_free(o->lock);
    redisFree(o->r);
    rlock_client_close(o->c);
}

/* The waiter's wait ends while the lock is being handed to it: it gets it. */
static void test_handoff_deadline_while_offered(void **state)
{
    struct offered o;
    h_actor *waiter = h_actor_start();
    struct h_try t;
    long long t0, took;
    (void)state;

    offered_setup(&o, "handoff-deadline");
    t = (struct h_try){o.lock, 400, -1};
    t0 = h_now_ms();
    h_actor_post(waiter, h_op_try_lock, &t);
    wait_asleep(o.r, 150);
    offered_unlock(&o, 800);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    took = h_actor_finished_ms(waiter) - t0;
    print_message("      try_lock(wait 400 ms) returned RLOCK_OK after %lld ms "
                  "(the hand-off to it was held up by an 800 ms pause)\n", took);
    H_ASSERT_BETWEEN(took, 400, H_MS(5000));
    H_ASSERT_RC((int)h_actor_wait(o.holder, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(o.r, o.name, rlock_client_id(o.c), 1);
    assert_int_equal(h_actor_call(waiter, h_op_is_held, o.lock), 1);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, o.lock), RLOCK_OK);
    assert_int_equal(h_exists(o.r, o.name, strlen(o.name)), 0);

    h_actor_stop(waiter);
    offered_teardown(&o);
}

#if !defined(__SANITIZE_ADDRESS__) /* google/sanitizers#1399, as in test_cancel.c */
static void *lock_thread(void *lock)
{
    return (void *)(intptr_t)rlock_lock(lock);
}
#endif

/* A waiter cancelled while offered gives the lock back at once. */
static void test_handoff_cancel_while_offered(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    print_message("      skipped under ASan (false positive on pthread_cancel unwinding "
                  "through pthread_cleanup_push)\n");
    skip();
#else
    struct offered o;
    pthread_t th;
    void *ret = NULL;
    long long pub0, t0;

    offered_setup(&o, "handoff-cancel");
    assert_int_equal(pthread_create(&th, NULL, lock_thread, o.lock), 0);
    wait_asleep(o.r, 150);
    pub0 = publishes(o.r);
    offered_unlock(&o, 500);
    h_sleep_ms(100);
    t0 = h_now_ms();
    assert_int_equal(pthread_cancel(th), 0);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    print_message("      cancelled waiter ended %lld ms after the cancel "
                  "(it waited for the paused TRANSFER, then released)\n", h_now_ms() - t0);
    H_ASSERT_RC((int)h_actor_wait(o.holder, 5000), RLOCK_OK);
    /* Given back at once (not left until its 30 s lease), with a wake-up. */
    assert_int_equal(h_exists(o.r, o.name, strlen(o.name)), 0);
    assert_int_equal(publishes(o.r) - pub0, 1);
    H_WAIT_FOR(h_numsub(o.r, o.name, strlen(o.name)) == 0, 2000);
    /* The client goes on working. */
    H_ASSERT_RC(rlock_try_lock(o.lock, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(o.lock), RLOCK_OK);

    offered_teardown(&o);
#endif
}

/* Close while a waiter is offered: both calls end, nothing hangs or leaks. */
static void test_handoff_close_while_offered(void **state)
{
    struct offered o;
    h_actor *waiter = h_actor_start();
    long long rc, t0;
    (void)state;

    offered_setup(&o, "handoff-close");
    h_actor_post(waiter, h_op_lock, o.lock);
    wait_asleep(o.r, 150);
    offered_unlock(&o, 400);
    h_sleep_ms(100);
    t0 = h_now_ms();
    rlock_client_close(o.c);
    rc = h_actor_wait(waiter, 5000);
    print_message("      close took %lld ms; the offered waiter returned %s, the unlock %s\n",
                  h_now_ms() - t0, rlock_status_name((int)rc),
                  rlock_status_name((int)h_actor_wait(o.holder, 5000)));
    /* Either the hand-off completed before close aborted it, or it did not. */
    assert_true(rc == RLOCK_OK || rc == RLOCK_ECLOSED);
    h_actor_stop(waiter);
    h_actor_stop(o.holder);
    rlock_free(o.lock);
    redisFree(o.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoff_watchdog_waiter),
        cmocka_unit_test(test_handoff_lease_waiter),
        cmocka_unit_test(test_handoff_only_last_hold),
        cmocka_unit_test(test_handoff_receiver_exits),
        cmocka_unit_test(test_handoff_same_channel_other_lock),
        cmocka_unit_test(test_handoff_off),
        cmocka_unit_test(test_handoff_bounded),
        cmocka_unit_test(test_handoff_deadline_while_offered),
        cmocka_unit_test(test_handoff_cancel_while_offered),
        cmocka_unit_test(test_handoff_close_while_offered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
