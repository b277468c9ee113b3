/*
 * test_truth.c - ownership truth (issue 8): the library never tells a thread,
 * or leaves it believing, that it holds a lock it has lost; an unlock that
 * errs has released nothing; a hash that is not a lock is never taken for
 * one; and rlock_config's documented ranges are the real ones.
 *
 * Every test names, in a comment line starting "Old code:", what the library
 * before issue 8 did, and so why the test fails there.
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

/* Watchdog timeout of the ownership tests: renewal every WD/3. */
#define WD H_MS(1500)

/* ---- recorder: on_lock_lost and on_event, counted per name ------------- */

#define REC_NAMES 16

struct rec_name {
    char name[256];
    int lost;        /* on_lock_lost calls */
    int lost_events; /* RLOCK_EVENT_LOCK_LOST events */
};

struct rec {
    pthread_mutex_t mu;
    struct rec_name names[REC_NAMES];
    int nnames;
    int overflow;         /* names that did not fit, or NULL names on LOCK_LOST */
    int kinds[8];         /* events per kind */
    int bad_lost_event;   /* a LOCK_LOST event with a NULL name or NULL detail */
};

static void rec_init(struct rec *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

/* The slot for name (created); NULL if the table is full. Under r->mu. */
static struct rec_name *rec_slot(struct rec *r, const char *name) {
    int i;
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) == 0)
            return &r->names[i];
    if (r->nnames == REC_NAMES || strlen(name) >= sizeof r->names[0].name)
        return NULL;
    snprintf(r->names[r->nnames].name, sizeof r->names[0].name, "%s", name);
    return &r->names[r->nnames++];
}

static void rec_lost_cb(const char *name, void *arg) {
    struct rec *r = arg;
    struct rec_name *s;
    pthread_mutex_lock(&r->mu);
    s = name ? rec_slot(r, name) : NULL;
    if (s)
        s->lost++;
    else
        r->overflow++;
    pthread_mutex_unlock(&r->mu);
}

static void rec_event_cb(const rlock_event *ev, void *arg) {
    struct rec *r = arg;
    pthread_mutex_lock(&r->mu);
    if ((int)ev->kind >= 0 && (int)ev->kind < 8)
        r->kinds[(int)ev->kind]++;
    if (ev->kind == RLOCK_EVENT_LOCK_LOST) {
        struct rec_name *s = ev->name ? rec_slot(r, ev->name) : NULL;
        if (s)
            s->lost_events++;
        else
            r->overflow++;
        if (ev->name == NULL || ev->detail == NULL)
            r->bad_lost_event++;
    }
    pthread_mutex_unlock(&r->mu);
}

/* on_lock_lost calls for name. */
static int rec_lost(struct rec *r, const char *name) {
    int i, n = 0;
    pthread_mutex_lock(&r->mu);
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) == 0)
            n = r->names[i].lost;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* RLOCK_EVENT_LOCK_LOST events for name. */
static int rec_lost_events(struct rec *r, const char *name) {
    int i, n = 0;
    pthread_mutex_lock(&r->mu);
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) == 0)
            n = r->names[i].lost_events;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* LOCK_LOST reports (calls + events) for names other than name, plus junk. */
static int rec_others(struct rec *r, const char *name) {
    int i, n;
    pthread_mutex_lock(&r->mu);
    n = r->overflow + r->bad_lost_event;
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) != 0)
            n += r->names[i].lost + r->names[i].lost_events;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* A client on url (NULL: h_url()) with the recorder as on_lock_lost and on_event. */
static rlock_client *open_rec(const char *url, long long wd, struct rec *r) {
    rlock_config cfg;
    h_config(&cfg);
    if (url)
        cfg.url = url;
    cfg.watchdog_timeout_ms = wd;
    cfg.on_lock_lost = rec_lost_cb;
    cfg.on_event = rec_event_cb;
    cfg.callback_arg = r;
    return h_open_config(&cfg);
}

/* ---- 1. one client, two owners ----------------------------------------- */

/*
 * Thread A holds X (watchdog); thread B of the same client waits for X;
 * another client force-unlocks X; B acquires it. A's loss is reported exactly
 * once, A's unlock is ENOTOWNER and changes nothing, B's hold is renewed and
 * B releases it normally.
 * Old code: one hold entry per lock name; B's acquisition took over A's
 * entry, so the watchdog renewed B's field and A's loss was never reported
 * (on_lock_lost stayed 0, which fails the first wait for it below).
 */
static void test_one_client_two_owners(void **state) {
    struct rec rec;
    rlock_client *c, *admin;
    const char *name = h_unique_name("twoowners");
    size_t n = strlen(name);
    rlock *l, *la;
    redisContext *r = h_redis();
    h_actor *a = h_actor_start(), *b = h_actor_start();
    struct h_try bt;
    char *field_a, *field_b;
    long long t_lost;
    (void)state;

    rec_init(&rec);
    c = open_rec(NULL, WD, &rec);
    admin = h_open(30000, 0);
    l = h_get(c, name);
    la = h_get(admin, name);

    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    field_a = h_lock_owner(r, name);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* B waits (10 s, watchdog) and is subscribed before the forced unlock. */
    bt.lock = l;
    bt.wait_ms = H_MS(10000);
    bt.lease_ms = RLOCK_LEASE_WATCHDOG;
    h_actor_post(b, h_op_try_lock, &bt);
    H_WAIT_FOR(h_numsub(r, name, n) >= 1, 3000);
    assert_false(h_actor_done(b));

    H_ASSERT_RC(rlock_force_unlock(la), 1);
    H_ASSERT_RC((int)h_actor_wait(b, 5000), RLOCK_OK);
    field_b = h_lock_owner(r, name);
    assert_string_not_equal(field_a, field_b);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* A's loss: reported exactly once, to both callbacks. */
    H_WAIT_FOR(rec_lost(&rec, name) >= 1, WD + 1000);
    t_lost = h_now_ms();
    H_WAIT_FOR(rec_lost_events(&rec, name) >= 1, 1000);
    h_sleep_ms(2 * (WD / 3) + H_MS(100)); /* two more renewal rounds */
    assert_int_equal(rec_lost(&rec, name), 1);
    assert_int_equal(rec_lost_events(&rec, name), 1);
    assert_int_equal(rec_others(&rec, name), 0);

    /* A learns it holds nothing; nothing changes in Redis. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_is_held, l), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_int_equal(h_cmd_int(r, "HEXISTS %b %s", name, n, field_b), 1);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);

    /* B's hold lives on past the watchdog timeout: it is renewed. */
    while (h_now_ms() < t_lost + WD + WD / 3) {
        long long pttl = h_pttl(r, name, n);
        if (pttl <= 0)
            fail_msg("B's lock %s expired (pttl %lld): not renewed", name, pttl);
        h_sleep_ms(20);
    }
    assert_int_equal(h_cmd_int(r, "HEXISTS %b %s", name, n, field_b), 1);
    assert_true(h_pttl(r, name, n) > 0);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_is_held, l), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_hold_count, l), 1);
    assert_int_equal(rec_lost(&rec, name), 1);
    assert_int_equal(rec_lost_events(&rec, name), 1);

    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);
    /* A's view did not come back to life with B's release. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);
    h_sleep_ms(WD / 3 + H_MS(100));
    assert_int_equal(rec_lost(&rec, name), 1);
    assert_int_equal(rec_lost_events(&rec, name), 1);
    assert_int_equal(rec_others(&rec, name), 0);

    free(field_a);
    free(field_b);
    h_actor_stop(a);
    h_actor_stop(b);
    rlock_free(l);
    rlock_free(la);
    rlock_client_close(c);
    rlock_client_close(admin);
    redisFree(r);
}

/* ---- 2. reentrant acquire after a loss --------------------------------- */

/*
 * (a) A thread holds X twice with a 60 s lease; X is deleted from outside.
 * Its next rlock_lock returns RLOCK_ELOST and creates nothing; the call after
 * that acquires afresh with hold count 1. The loss is one LOCK_LOST event.
 * Old code: the acquire found no field, silently re-created X with count 1
 * and returned RLOCK_OK while the thread believed it held 3 levels.
 */
static void test_relock_after_loss_lease(void **state) {
    struct rec rec;
    rlock_client *c;
    const char *name = h_unique_name("relock");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    char *field;
    (void)state;

    rec_init(&rec);
    c = open_rec(NULL, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    h_cmd_ok(r, "DEL %b", name, n);

    H_ASSERT_RC(rlock_lock(l), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_WAIT_FOR(rec_lost_events(&rec, name) >= 1, 2000);

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    field = h_lock_owner(r, name);
    {
        char *v = h_cmd_str(r, "HGET %b %s", name, n, field);
        assert_non_null(v);
        assert_string_equal(v, "1");
        free(v);
    }
    free(field);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    h_sleep_ms(H_MS(300));
    assert_int_equal(rec_lost_events(&rec, name), 1);
    assert_int_equal(rec_others(&rec, name), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * (a') The same discovered by try_lock(wait 0): ELOST, nothing created, then
 * a fresh hold of count 1.
 * Old code: try_lock re-created X with count 1 and returned RLOCK_OK.
 */
static void test_try_lock_after_loss(void **state) {
    struct rec rec;
    rlock_client *c;
    const char *name = h_unique_name("retry0");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    rec_init(&rec);
    c = open_rec(NULL, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %b", name, n);

    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    H_WAIT_FOR(rec_lost_events(&rec, name) >= 1, 2000);
    h_sleep_ms(H_MS(300));
    assert_int_equal(rec_lost_events(&rec, name), 1);
    assert_int_equal(rec_others(&rec, name), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * (b) The unlock discovers the loss. Held twice (60 s lease), deleted from
 * outside: the first unlock, which would leave the thread believing it still
 * held one level, is RLOCK_ELOST; the next is RLOCK_ENOTOWNER; nothing is
 * re-created or published. Held once: the (last) unlock is RLOCK_ENOTOWNER
 * as rlock.h says, and the loss is still reported once as an event.
 * Old code: the first unlock returned RLOCK_ENOTOWNER (no ELOST existed) and
 * a lease lock's loss was never reported.
 */
static void test_unlock_discovers_loss(void **state) {
    struct rec rec;
    rlock_client *c;
    const char *name = h_unique_name("unlost2"), *name1 = h_unique_name("unlost1");
    size_t n = strlen(name), n1 = strlen(name1);
    rlock *l, *l1;
    redisContext *r = h_redis(), *sub, *sub1;
    char *msg;
    (void)state;

    rec_init(&rec);
    c = open_rec(NULL, WD, &rec);
    l = h_get(c, name);
    l1 = h_get(c, name1);

    /* Held twice. */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %b", name, n);
    sub = h_sub_open(h_url(), name, n);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, n), 0);
    H_WAIT_FOR(rec_lost_events(&rec, name) >= 1, 2000);

    /* Held once. */
    H_ASSERT_RC(rlock_lock_lease(l1, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %b", name1, n1);
    sub1 = h_sub_open(h_url(), name1, n1);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name1, n1), 0);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_ENOTOWNER);
    H_WAIT_FOR(rec_lost_events(&rec, name1) >= 1, 2000);

    /* Nothing was published for either (the unlocks changed nothing). */
    msg = h_sub_read(sub, 200);
    assert_null(msg);
    msg = h_sub_read(sub1, 1);
    assert_null(msg);
    redisFree(sub);
    redisFree(sub1);

    h_sleep_ms(H_MS(300));
    assert_int_equal(rec_lost_events(&rec, name), 1);
    assert_int_equal(rec_lost_events(&rec, name1), 1);

    /* Both start afresh. */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    rlock_free(l);
    rlock_free(l1);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * (c) Watchdog variant: held twice, deleted; the watchdog reports the loss
 * (on_lock_lost and one LOCK_LOST event named X); the thread's next
 * rlock_lock is still RLOCK_ELOST (no pretended continuity), the one after
 * acquires afresh with count 1, renewed again.
 * Old code: after the watchdog's report, rlock_lock re-created X with count
 * 1 and returned RLOCK_OK (the thread believing 3 levels).
 */
static void test_relock_after_loss_watchdog(void **state) {
    struct rec rec;
    rlock_client *c;
    const char *name = h_unique_name("relockwd");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    rec_init(&rec);
    c = open_rec(NULL, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    h_cmd_ok(r, "DEL %b", name, n);

    H_WAIT_FOR(rec_lost(&rec, name) >= 1, WD + 1000);
    assert_int_equal(rec_lost(&rec, name), 1);
    assert_int_equal(h_exists(r, name, n), 0);

    H_ASSERT_RC(rlock_lock(l), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_WAIT_FOR(rec_lost_events(&rec, name) >= 1, 1000);
    assert_int_equal(rec_lost(&rec, name), 1);
    assert_int_equal(rec_lost_events(&rec, name), 1);

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* The fresh hold is renewed past the watchdog timeout; no new report. */
    h_sleep_ms(WD + WD / 3);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_true(h_pttl(r, name, n) > 0);
    assert_int_equal(rec_lost(&rec, name), 1);
    assert_int_equal(rec_lost_events(&rec, name), 1);
    assert_int_equal(rec_others(&rec, name), 0);

    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- 3. an unlock that errs has not released --------------------------- */

/*
 * An ACL user that may use every key and command but no channel: locking
 * works, but the unlock cannot PUBLISH. rlock_unlock is RLOCK_ENOPERM with
 * Redis's NOPERM text, the lock is still held and renewed, never reported
 * lost; force_unlock is refused the same way and leaves it.
 * Old code: RELEASE deleted the key, then failed on PUBLISH: unlock returned
 * RLOCK_EREDIS with the lock gone, and the watchdog later reported it lost.
 */
static void test_unlock_refused_keeps_lock(void **state) {
    struct rec rec;
    h_server *own = NULL;
    const char *base = h_url();
    redisContext *admin;
    rlock_client *c;
    rlock *l;
    rlock_error_info info;
    char user[64], url[512];
    const char *name = h_unique_name("noperm");
    size_t n = strlen(name);
    long long t_end;
    (void)state;

    /* The suite's server if its url is plain redis://host:port, else our own. */
    if (strncmp(base, "redis://", 8) != 0 || strchr(base + 8, '@') || strchr(base + 8, '/')) {
        own = h_server_start();
        base = h_server_url(own);
        admin = h_server_redis(own);
    } else {
        admin = h_redis();
    }
    snprintf(user, sizeof user, "rlock-truth-%ld-%lld", (long)getpid(), h_now_us());
    h_cmd_ok(admin, "ACL SETUSER %s on >pw ~* resetchannels +@all", user);
    h_url_auth(url, sizeof url, base, user, "pw");

    rec_init(&rec);
    c = open_rec(url, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);

    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOPERM);
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_ENOPERM);
    assert_non_null(info.redis_error);
    if (strstr(info.redis_error, "NOPERM") == NULL)
        fail_msg("redis_error \"%s\" does not name NOPERM (message: %s)", info.redis_error,
                 info.message ? info.message : "(null)");
    /* Nothing changed: still ours, count 1, with a TTL. */
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_true(h_pttl(admin, name, n) > 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_hold_count(l), 1);

    /* Still held and renewed two watchdog timeouts later; never reported lost. */
    t_end = h_now_ms() + 2 * WD;
    while (h_now_ms() < t_end) {
        long long pttl = h_pttl(admin, name, n);
        if (pttl <= 0)
            fail_msg("lock %s expired after the refused unlock (pttl %lld)", name, pttl);
        h_sleep_ms(20);
    }
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_int_equal(rec_lost(&rec, name), 0);
    assert_int_equal(rec_lost_events(&rec, name), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);

    /* force_unlock by that user is refused the same way and leaves the lock. */
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOPERM);
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_ENOPERM);
    assert_non_null(strstr(info.redis_error, "NOPERM"));
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_true(h_pttl(admin, name, n) > 0);
    h_sleep_ms(WD / 3 + H_MS(100));
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_int_equal(rec_lost(&rec, name), 0);
    assert_int_equal(rec_lost_events(&rec, name), 0);

    /* Clean up with the admin connection. */
    rlock_free(l);
    rlock_client_close(c);
    h_cmd_ok(admin, "DEL %b", name, n);
    h_cmd_ok(admin, "ACL DELUSER %s", user);
    redisFree(admin);
    if (own)
        h_server_stop(own);
}

/* ---- 4. not a lock ------------------------------------------------------ */

/* Fails unless name is a hash with exactly "name" = "bob" and ttl as given
 * (-1: none; > 0: some TTL). */
static void assert_user_hash(redisContext *r, const char *name, int want_ttl) {
    size_t n = strlen(name);
    char *v = h_cmd_str(r, "HGET %b name", name, n);
    long long ttl = h_cmd_int(r, "TTL %b", name, n);
    if (v == NULL || strcmp(v, "bob") != 0)
        fail_msg("HGET %s name = %s, expected bob", name, v ? v : "(nil)");
    free(v);
    assert_int_equal(h_cmd_int(r, "HLEN %b", name, n), 1);
    if (want_ttl < 0)
        assert_int_equal(ttl, -1);
    else if (ttl <= 0)
        fail_msg("TTL %s = %lld, expected > 0", name, ttl);
}

/*
 * An ordinary hash under the lock's name (no TTL) is not a lock: every
 * acquire, unlock and force_unlock says RLOCK_ENOTLOCK at once and leaves it.
 * Old code: try_lock said RLOCK_BUSY (after the whole wait), lock blocked
 * for ever, unlock said ENOTOWNER, and force_unlock deleted the user's data.
 */
static void test_plain_hash_not_a_lock(void **state) {
    rlock_client *c = h_open(30000, 0);
    char name[128];
    rlock *l;
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    long long t0, dt, bound;
    (void)state;

    snprintf(name, sizeof name, "user:%s", h_unique_name("plain"));
    h_cmd_ok(r, "HSET %s name bob", name);
    l = h_get(c, name);

    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    /* Not a wait for a holder: it answers at once, well under the 2 s wait. */
    bound = H_MS(500) < 1000 ? H_MS(500) : 1000;
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, 2000, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    dt = h_now_ms() - t0;
    print_message("      try_lock(wait 2000) on a plain hash returned after %lld ms\n", dt);
    H_ASSERT_BETWEEN(dt, 0, bound);
    H_ASSERT_RC(rlock_try_lock(l, 2000, 10000), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    /* rlock_lock does not block (on an actor, so a hang fails the test). */
    h_actor_post(a, h_op_lock, l);
    H_ASSERT_RC((int)h_actor_wait(a, 2000), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);
    {
        rlock_error_info info;
        rlock_last_error_info(&info);
        assert_int_equal(info.status, RLOCK_ENOTLOCK);
    }

    /* After all of that: a lock call from the same thread is still ENOTLOCK
     * (nothing was recorded as held), and the data is intact. */
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_lock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    h_cmd_ok(r, "DEL %s", name);
    h_actor_stop(a);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * A hash with a TTL but a field that is not "<id>:<thread>" is not a lock
 * either: try_lock and force_unlock say RLOCK_ENOTLOCK and leave it.
 * Old code: try_lock said RLOCK_BUSY and force_unlock deleted it (1).
 */
static void test_ttl_hash_bad_field_not_a_lock(void **state) {
    rlock_client *c = h_open(30000, 0);
    char name[128];
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    snprintf(name, sizeof name, "user:%s", h_unique_name("ttlhash"));
    h_cmd_ok(r, "HSET %s name bob", name);
    h_cmd_ok(r, "PEXPIRE %s 60000", name);
    l = h_get(c, name);

    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    assert_true(h_cmd_int(r, "PTTL %s", name) > 50000);

    h_cmd_ok(r, "DEL %s", name);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * Positive control: a Redisson-shaped lock of someone else (owner field
 * "<uuid>:<thread>" = 1, with a TTL) is a lock: try_lock(wait 0) is BUSY and
 * force_unlock deletes it (1).
 * Old code: passes this one too; it guards the ENOTLOCK rule from being too
 * wide (a library that called everything "not a lock" fails here).
 */
static void test_foreign_lock_is_a_lock(void **state) {
    static const char other[] = "0b8f3c1e-5a4d-4c1b-9f7e-2d6a8b9c0e1f:57";
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("foreign");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    h_cmd_ok(r, "HSET %b %s 1", name, n, other);
    h_cmd_ok(r, "PEXPIRE %b 10000", name, n);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    {
        char *v = h_cmd_str(r, "HGET %b %s", name, n, other);
        assert_non_null(v);
        assert_string_equal(v, "1");
        free(v);
    }
    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_force_unlock(l), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- 5. config ranges ---------------------------------------------------- */

enum cfg_field {
    F_WATCHDOG,
    F_CONNECT,
    F_COMMAND,
    F_POOL,
    F_RETRIES,
    F_RETRY_INTERVAL,
    F_HANDOFFS
};

static const char *const field_names[] = {
    "watchdog_timeout_ms", "connect_timeout_ms", "command_timeout_ms", "pool_size",
    "retry_attempts",      "retry_interval_ms",  "local_handoffs"};

/* rlock_client_open() with one field set to v; the client is closed at once. */
static int open_with(enum cfg_field f, long long v) {
    rlock_config cfg;
    rlock_client *c = NULL;
    int rc;
    h_config(&cfg);
    switch (f) {
    case F_WATCHDOG: cfg.watchdog_timeout_ms = v; break;
    case F_CONNECT: cfg.connect_timeout_ms = (int)v; break;
    case F_COMMAND: cfg.command_timeout_ms = (int)v; break;
    case F_POOL: cfg.pool_size = (int)v; break;
    case F_RETRIES: cfg.retry_attempts = (int)v; break;
    case F_RETRY_INTERVAL: cfg.retry_interval_ms = (int)v; break;
    case F_HANDOFFS: cfg.local_handoffs = (int)v; break;
    }
    rc = rlock_client_open(&cfg, &c);
    if (rc == RLOCK_OK) {
        rlock *l = NULL;
        /* The client works (a trivial call) before it is closed. */
        if (rlock_get(c, "rlock-test:truth:cfg-probe", &l) == RLOCK_OK) {
            int locked = rlock_is_locked(l);
            if (locked != 0 && locked != 1)
                print_message("      %s = %lld: is_locked = %s\n", field_names[f], v,
                              rlock_status_name(locked));
            rlock_free(l);
        }
        rlock_client_close(c);
    } else {
        assert_null(c);
    }
    return rc;
}

/* The bound v must be accepted. A 1 ms connect or command bound is accepted
 * too, but may run out against a real server: RLOCK_EIO is then the honest
 * answer; RLOCK_EINVAL never is. */
static void accepted(enum cfg_field f, long long v, int may_time_out) {
    int rc = open_with(f, v);
    if (rc == RLOCK_OK || (may_time_out && rc == RLOCK_EIO))
        return;
    fail_msg("%s = %lld: rlock_client_open = %s (%s), expected RLOCK_OK", field_names[f], v,
             rlock_status_name(rc), rlock_last_error());
}

static void refused(enum cfg_field f, long long v) {
    int rc = open_with(f, v);
    rlock_error_info info;
    if (rc != RLOCK_EINVAL)
        fail_msg("%s = %lld: rlock_client_open = %s, expected RLOCK_EINVAL", field_names[f], v,
                 rlock_status_name(rc));
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_EINVAL);
}

/*
 * Every range rlock.h documents for rlock_config is the accepted range: both
 * bounds open a client, one past each is RLOCK_EINVAL.
 * Old code: connect_timeout_ms and command_timeout_ms had no upper bound
 * (3600001 was accepted), so the header's ranges were not the real ones.
 */
static void test_config_ranges(void **state) {
    (void)state;
    accepted(F_WATCHDOG, 30, 0);
    refused(F_WATCHDOG, 29);
    accepted(F_WATCHDOG, RLOCK_MAX_LEASE_MS, 0);
    refused(F_WATCHDOG, RLOCK_MAX_LEASE_MS + 1);
    refused(F_WATCHDOG, RLOCK_LEASE_WATCHDOG);

    accepted(F_CONNECT, 1, 1);
    refused(F_CONNECT, 0);
    refused(F_CONNECT, -1);
    accepted(F_CONNECT, 3600000, 0);
    refused(F_CONNECT, 3600001);

    accepted(F_COMMAND, 1, 1);
    refused(F_COMMAND, 0);
    refused(F_COMMAND, -1);
    accepted(F_COMMAND, 3600000, 0);
    refused(F_COMMAND, 3600001);

    accepted(F_POOL, 1, 0);
    refused(F_POOL, 0);
    accepted(F_POOL, 1024, 0);
    refused(F_POOL, 1025);

    accepted(F_RETRIES, 0, 0);
    refused(F_RETRIES, -1);
    accepted(F_RETRIES, 100, 0);
    refused(F_RETRIES, 101);

    accepted(F_RETRY_INTERVAL, 0, 0);
    refused(F_RETRY_INTERVAL, -1);
    accepted(F_RETRY_INTERVAL, 3600000, 0);
    refused(F_RETRY_INTERVAL, 3600001);

    accepted(F_HANDOFFS, 0, 0);
    refused(F_HANDOFFS, -1);
    accepted(F_HANDOFFS, 1000, 0);
    refused(F_HANDOFFS, 1001);

    /* The defaults themselves are in range. */
    {
        rlock_config cfg;
        rlock_client *c = NULL;
        rlock_config_init(&cfg);
        cfg.url = h_url();
        H_ASSERT_RC(rlock_client_open(&cfg, &c), RLOCK_OK);
        rlock_client_close(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_client_two_owners),
        cmocka_unit_test(test_relock_after_loss_lease),
        cmocka_unit_test(test_try_lock_after_loss),
        cmocka_unit_test(test_unlock_discovers_loss),
        cmocka_unit_test(test_relock_after_loss_watchdog),
        cmocka_unit_test(test_unlock_refused_keeps_lock),
        cmocka_unit_test(test_plain_hash_not_a_lock),
        cmocka_unit_test(test_ttl_hash_bad_field_not_a_lock),
        cmocka_unit_test(test_foreign_lock_is_a_lock),
        cmocka_unit_test(test_config_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
