/*
 * fault_lease.c - lease truth against a real, stopped redis-server (issue 8,
 * classes 5, 6, 7, 8 and 13). Every test fails on the library before issue 8
 * (each says what that code did) and checks the contract of rlock.h:
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
 *   class 7   test_slow_callback_no_stall: on_lock_lost blocks 4 s in a
 *             try_lock with a wait; another lock of the client stays renewed.
 *   class 8   test_stall_boundary: stalls of T/2 at three phases after a renewal
 *             lose nothing; a stall of 1.3 T loses the lock, reported once during
 *             the stall; unlock then answers RLOCK_ENOTOWNER.
 *   class 13  test_subscribe_refused_polls: an ACL user without SUBSCRIBE waits
 *             by polling (acquires within ~100 ms of the unlock, not at the
 *             holder's 20 s TTL), is told (SUBSCRIBE_REFUSED), leaves no channel.
 *
 * One redis-server per test (h_server_fixture_*); every duration goes through
 * h_scaled() (TEST_TIMEOUT_SCALE; x2 under ASan, x4 under TSan). Each test
 * prints one line of what it measured.
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

/* ---- what the callbacks saw ---------------------------------------------- */

#define REC_MAX 1024

struct rec_event {
    int kind;
    int has_name;
    char name[192];
    long long lease_left_ms;
    int status;
    int has_detail;     /* detail was not NULL */
    char detail[256];
    long long at_ms;    /* h_now_ms() on arrival */
};

struct rec_lost {
    char name[192];
    long long at_ms;
};

struct recorder {
    pthread_mutex_t mu;
    int n;
    int dropped;
    struct rec_event ev[REC_MAX];
    int nlost;
    struct rec_lost lost[64];
    /* class 7: on_lock_lost for block_name runs try_lock(block_lock, block_wait_ms). */
    char block_name[192];
    rlock *block_lock;
    long long block_wait_ms;
    int block_started;
    int block_done;
    int block_rc;
    long long block_start_ms, block_end_ms;
};

static void rec_init(struct recorder *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

static void rec_destroy(struct recorder *r) {
    pthread_mutex_destroy(&r->mu);
}

/* on_event: runs on the client's event thread; records only (no asserts here:
 * a harness failure off the main thread aborts). */
static void rec_on_event(const rlock_event *event, void *arg) {
    struct recorder *r = arg;
    long long now = h_now_ms();
    pthread_mutex_lock(&r->mu);
    if (r->n < REC_MAX) {
        struct rec_event *e = &r->ev[r->n++];
        e->kind = (int)event->kind;
        e->has_name = event->name != NULL;
        snprintf(e->name, sizeof e->name, "%s", event->name ? event->name : "");
        e->lease_left_ms = event->lease_left_ms;
        e->status = event->status;
        e->has_detail = event->detail != NULL;
        snprintf(e->detail, sizeof e->detail, "%s", event->detail ? event->detail : "");
        e->at_ms = now;
    } else {
        r->dropped++;
    }
    pthread_mutex_unlock(&r->mu);
}

/* on_lock_lost: records; for block_name, blocks in a try_lock with a wait. */
static void rec_on_lost(const char *name, void *arg) {
    struct recorder *r = arg;
    long long now = h_now_ms();
    rlock *block = NULL;
    long long wait_ms = 0;

    pthread_mutex_lock(&r->mu);
    if (r->nlost < (int)(sizeof r->lost / sizeof r->lost[0])) {
        snprintf(r->lost[r->nlost].name, sizeof r->lost[0].name, "%s", name ? name : "(null)");
        r->lost[r->nlost].at_ms = now;
    }
    r->nlost++;
    if (name != NULL && r->block_lock != NULL && strcmp(name, r->block_name) == 0 &&
        !r->block_started) {
        r->block_started = 1;
        r->block_start_ms = now;
        block = r->block_lock;
        wait_ms = r->block_wait_ms;
    }
    pthread_mutex_unlock(&r->mu);

    if (block != NULL) {
        /* Allowed by the header: a callback may call rlock functions. This one
         * blocks for its whole wait (the lock is held by another client). */
        int rc = rlock_try_lock(block, wait_ms, 10000);
        if (rc == RLOCK_OK)
            rlock_unlock(block);
        pthread_mutex_lock(&r->mu);
        r->block_rc = rc;
        r->block_end_ms = h_now_ms();
        r->block_done = 1;
        pthread_mutex_unlock(&r->mu);
    }
}

static int block_started(struct recorder *r) {
    pthread_mutex_lock(&r->mu);
    int started = r->block_started;
    pthread_mutex_unlock(&r->mu);
    return started;
}

/* Number of events of kind (for name if not NULL); *first_ms / *first_idx
 * of the first one (may be NULL). */
static int rec_count(struct recorder *r, int kind, const char *name, long long *first_ms,
                     int *first_idx) {
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++) {
        if (r->ev[i].kind != kind || (name != NULL && strcmp(r->ev[i].name, name) != 0))
            continue;
        if (n++ == 0) {
            if (first_ms)
                *first_ms = r->ev[i].at_ms;
            if (first_idx)
                *first_idx = i;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* on_lock_lost calls (for name if not NULL). */
static int rec_lost_count(struct recorder *r, const char *name) {
    int n = 0;
    pthread_mutex_lock(&r->mu);
    if (name == NULL) {
        n = r->nlost;
    } else {
        int m = r->nlost < 64 ? r->nlost : 64;
        for (int i = 0; i < m; i++)
            n += strcmp(r->lost[i].name, name) == 0;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* A copy of event i (the main thread checks it without holding the lock). */
static struct rec_event rec_get(struct recorder *r, int i) {
    struct rec_event e;
    pthread_mutex_lock(&r->mu);
    e = r->ev[i];
    pthread_mutex_unlock(&r->mu);
    return e;
}

static int rec_n(struct recorder *r) {
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static const char *kind_name(int kind) {
    switch (kind) {
    case RLOCK_EVENT_RENEWAL_FAILED: return "RENEWAL_FAILED";
    case RLOCK_EVENT_LOCK_LOST: return "LOCK_LOST";
    case RLOCK_EVENT_CONNECTION_LOST: return "CONNECTION_LOST";
    case RLOCK_EVENT_RECONNECTED: return "RECONNECTED";
    case RLOCK_EVENT_SUBSCRIBE_REFUSED: return "SUBSCRIBE_REFUSED";
    default: return "?";
    }
}

/* Prints every recorded event relative to t0 (for a person reading a failure). */
static void rec_dump(struct recorder *r, long long t0) {
    int n = rec_n(r);
    for (int i = 0; i < n; i++) {
        struct rec_event e = rec_get(r, i);
        printf("        event %2d at %+6lld ms: %-17s name=%s lease_left=%lld status=%s "
               "detail=\"%.120s\"\n",
               i, e.at_ms - t0, kind_name(e.kind), e.has_name ? e.name : "(null)",
               e.lease_left_ms, rlock_status_name(e.status), e.detail);
    }
}

static rlock_client *open_recording(const char *url, long long wd, long long cmd_ms,
                                    struct recorder *r) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd;
    if (cmd_ms > 0)
        cfg.command_timeout_ms = (int)cmd_ms;
    cfg.on_lock_lost = rec_on_lost;
    cfg.on_event = rec_on_event;
    cfg.callback_arg = r;
    return h_open_config(&cfg);
}

/* Waits until the watchdog has just renewed name (within two renewal
 * rounds and a second); returns the PTTL seen right after the renewal. */
static long long wait_renewal(redisContext *c, const char *name, long long wd) {
    return h_wait_renewal(c, name, 20, 2 * wd + h_scaled(1000));
}

/* The lock's single field (malloc'd); fails unless it is "<client_id>:<tid>" = 1. */
static char *owner_field(redisContext *c, const char *name, const char *client_id) {
    char *field = NULL;
    long long count = 0;
    if (h_lock_fields(c, name, strlen(name), &field, &count) != 1 || count != 1 ||
        strncmp(field, client_id, strlen(client_id)) != 0)
        H_FAIL("lock %s: expected one field of %s with count 1, got %s = %lld", name, client_id,
               field ? field : "(none)", count);
    return field;
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
    struct recorder rec;
    rlock_client *c;
    rlock *l;
    h_actor *owner = h_actor_start();
    long long pttl_at_stop, t0, t_lost = 0, t_is, dt_is;
    int lost_idx = -1, held, stopped_during_is;

    rec_init(&rec);
    /* A command timeout far longer than the lease: the report must not wait
     * for a reply (Redis never answers while stopped). */
    c = open_recording(h_server_url(srv), wd, H_MS(10000), &rec);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* Stop Redis just after a renewal round and keep it stopped. */
    wait_renewal(r, name, wd);
    pttl_at_stop = h_pttl(r, name, strlen(name));
    t0 = h_now_ms();
    h_server_pause(srv);

    /* Told by the event or by on_lock_lost (the old library had only the latter). */
    int told = H_POLL_UNTIL(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL) >= 1 ||
                                rec_lost_count(&rec, name) >= 1,
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
    struct rec_event lost = {0};
    if (rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, &t_lost, &lost_idx) >= 1)
        lost = rec_get(&rec, lost_idx);

    /* Still stopped for a while: no second report. */
    h_sleep_ms(wd / 3);
    int lost_events = rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL);
    int lost_calls = rec_lost_count(&rec, name);
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
        rec_dump(&rec, t0);
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
    assert_int_equal(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL), 1);
    assert_int_equal(rec_lost_count(&rec, NULL), 1);
    /* Its last unlock: the loss was already reported; nothing is changed. */
    H_ASSERT_RC((int)h_actor_call(owner, h_op_unlock, l), RLOCK_ENOTOWNER);
    assert_int_equal(rec_lost_count(&rec, NULL), 1);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_client_close(c);
    rec_destroy(&rec);
    redisFree(r);
}

/* ---- class 6: warned before the loss ------------------------------------- */

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
    struct recorder rec;
    rlock_client *c;
    rlock *l, *other;
    h_actor *owner = h_actor_start();
    long long t0, t_resume, t_lost = 0, t_conn = 0, t_rec = 0, prev_left;
    int lost_idx = -1, conn_idx = -1, rec_idx = -1, failed = 0, n;

    rec_init(&rec);
    c = open_recording(h_server_url(srv), wd, cmd, &rec);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);
    wait_renewal(r, name, wd);
    t0 = h_now_ms();
    h_server_pause(srv);

    H_WAIT_FOR(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, &t_lost, &lost_idx) >= 1, 3000 + 2000);
    assert_true(h_server_stopped(srv));
    h_sleep_ms(H_MS(200)); /* nothing more about this lock may come now */
    h_server_resume(srv);
    t_resume = h_now_ms();

    /* A new lock of another name works, and the link is told to be back. */
    other = h_get(c, h_unique_name("lease-warn-after"));
    H_ASSERT_RC(rlock_try_lock(other, H_MS(3000), 10000), RLOCK_OK);
    H_WAIT_FOR(rec_count(&rec, RLOCK_EVENT_RECONNECTED, NULL, &t_rec, &rec_idx) >= 1, 2000);
    H_ASSERT_RC(rlock_unlock(other), RLOCK_OK);
    h_sleep_ms(wd / 3 + H_MS(200)); /* a few more rounds: nothing new about X */

    /* The warnings: every RENEWAL_FAILED for X came during the stall, before the
     * LOCK_LOST, with a positive lease left that never rises, and a detail. */
    n = rec_n(&rec);
    prev_left = wd + 1;
    for (int i = 0; i < n; i++) {
        struct rec_event e = rec_get(&rec, i);
        if (e.kind != RLOCK_EVENT_RENEWAL_FAILED)
            continue;
        if (!e.has_name || strcmp(e.name, name) != 0) {
            rec_dump(&rec, t0);
            H_FAIL("RENEWAL_FAILED event %d names \"%s\", expected %s", i, e.name, name);
        }
        failed++;
        if (i > lost_idx || e.at_ms < t0 || e.at_ms > t_lost || e.lease_left_ms <= 0 ||
            e.lease_left_ms > prev_left || !e.has_detail || e.detail[0] == '\0' ||
            e.status >= 0) {
            rec_dump(&rec, t0);
            H_FAIL("RENEWAL_FAILED event %d (at %+lld ms, lease_left %lld, previous %lld, "
                   "status %s, detail \"%s\") is not a warning before the loss (LOCK_LOST "
                   "event %d at %+lld ms)",
                   i, e.at_ms - t0, e.lease_left_ms, prev_left, rlock_status_name(e.status),
                   e.detail, lost_idx, t_lost - t0);
        }
        prev_left = e.lease_left_ms;
    }
    int conns = rec_count(&rec, RLOCK_EVENT_CONNECTION_LOST, NULL, &t_conn, &conn_idx);
    int recs = rec_count(&rec, RLOCK_EVENT_RECONNECTED, NULL, NULL, NULL);
    printf("      WD %lld ms, command timeout %lld ms: Redis stopped right after a renewal; "
           "%d RENEWAL_FAILED (last lease left %lld ms), LOCK_LOST at %lld ms, "
           "CONNECTION_LOST x%d (first at %lld ms), RECONNECTED x%d %lld ms after the resume\n",
           wd, cmd, failed, prev_left, t_lost - t0, conns, t_conn - t0, recs, t_rec - t_resume);
    if (failed == 0 || conns != 1 || recs != 1)
        rec_dump(&rec, t0);

    assert_true(failed >= 1);
    assert_int_equal(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL), 1);
    assert_int_equal(rec_lost_count(&rec, name), 1);
    /* One CONNECTION_LOST, during the outage; one RECONNECTED, after it. */
    assert_int_equal(conns, 1);
    H_ASSERT_BETWEEN(t_conn, t0, t_resume);
    struct rec_event ce = rec_get(&rec, conn_idx);
    assert_int_equal(ce.lease_left_ms, -1);
    assert_true(ce.has_detail && ce.detail[0] != '\0');
    assert_true(ce.status < 0);
    assert_int_equal(recs, 1);
    assert_true(rec_idx > conn_idx);
    assert_true(t_rec >= t_resume);
    struct rec_event re = rec_get(&rec, rec_idx);
    assert_int_equal(re.lease_left_ms, -1);
    assert_true(re.has_detail);

    H_ASSERT_RC((int)h_actor_call(owner, h_op_unlock, l), RLOCK_ENOTOWNER);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_free(other);
    rlock_client_close(c);
    rec_destroy(&rec);
    redisFree(r);
}

/* ---- class 7: a slow callback must not stall renewals -------------------- */

/*
 * Before issue 8 on_lock_lost ran on the watchdog thread: while it blocked
 * (here 4 s in a try_lock with a wait) no lock of the client was renewed,
 * so Z (lease 1.5 s) expired: its PTTL fell to -2 and its field vanished.
 */
static void test_slow_callback_no_stall(void **state) {
    h_server *srv = *state;
    const long long wd = H_MS(1500), block = H_MS(4000);
    const char *y = h_unique_name("slow-y"), *z = h_unique_name("slow-z");
    const char *w = h_unique_name("slow-w");
    redisContext *r = h_server_redis(srv);
    struct recorder rec;
    rlock_client *c, *other;
    rlock *ly, *lz, *lw_c, *lw_other;
    h_actor *t1 = h_actor_start(), *t2 = h_actor_start();
    char *z_field;
    long long t_del, min_pttl = wd, polls = 0, limit, t_start, t_end;
    int done = 0, cb_rc;

    rec_init(&rec);
    c = open_recording(h_server_url(srv), wd, 0, &rec);
    other = h_open_url(h_server_url(srv), 0, 0);
    ly = h_get(c, y);
    lz = h_get(c, z);
    lw_c = h_get(c, w);
    lw_other = h_get(other, w);

    /* W is held by another client for longer than the callback waits. */
    H_ASSERT_RC(rlock_try_lock(lw_other, 0, H_MS(60000)), RLOCK_OK);
    pthread_mutex_lock(&rec.mu);
    snprintf(rec.block_name, sizeof rec.block_name, "%s", y);
    rec.block_lock = lw_c;
    rec.block_wait_ms = block;
    pthread_mutex_unlock(&rec.mu);

    H_ASSERT_RC((int)h_actor_call(t1, h_op_lock, ly), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(t2, h_op_lock, lz), RLOCK_OK);
    z_field = owner_field(r, z, rlock_client_id(c));

    h_cmd_ok(r, "DEL %s", y);
    t_del = h_now_ms();
    /* The watchdog finds Y gone at its next round; the callback starts blocking. */
    H_WAIT_FOR(block_started(&rec), 1500 + 1000);

    /* While it blocks, Z keeps being renewed: poll its PTTL every 100 ms. */
    limit = h_now_ms() + block + H_MS(3000);
    while (!done && h_now_ms() < limit) {
        long long p = h_pttl(r, z, strlen(z));
        if (p < min_pttl)
            min_pttl = p;
        polls++;
        h_sleep_ms(100);
        pthread_mutex_lock(&rec.mu);
        done = rec.block_done;
        pthread_mutex_unlock(&rec.mu);
    }
    pthread_mutex_lock(&rec.mu);
    cb_rc = rec.block_rc;
    t_start = rec.block_start_ms;
    t_end = rec.block_end_ms;
    pthread_mutex_unlock(&rec.mu);
    long long hexists = h_cmd_int(r, "HEXISTS %s %s", z, z_field);
    long long z_pttl = h_pttl(r, z, strlen(z));

    printf("      WD %lld ms: Y deleted; on_lock_lost(Y) started %lld ms later and blocked %lld "
           "ms in try_lock(wait %lld) = %s; Z meanwhile: lowest PTTL %lld ms over %lld polls, "
           "then HEXISTS %lld, PTTL %lld; on_lock_lost(Z) x%d, LOCK_LOST(Z) x%d\n",
           wd, t_start - t_del, done ? t_end - t_start : -1, block,
           done ? rlock_status_name(cb_rc) : "(still blocked)", min_pttl, polls, hexists, z_pttl,
           rec_lost_count(&rec, z), rec_count(&rec, RLOCK_EVENT_LOCK_LOST, z, NULL, NULL));

    assert_true(done);
    H_ASSERT_RC(cb_rc, RLOCK_BUSY);
    assert_true(t_end - t_start >= block - H_MS(100)); /* it really blocked ~4 s */
    assert_true(min_pttl > wd / 3);                    /* never below ~500 ms */
    assert_int_equal(hexists, 1);
    assert_int_equal(rec_lost_count(&rec, z), 0);
    assert_int_equal(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, z, NULL, NULL), 0);
    assert_int_equal(rec_lost_count(&rec, y), 1);
    assert_int_equal(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, y, NULL, NULL), 1);

    /* Z is still the second thread's; Y's owner learns it holds nothing. */
    H_ASSERT_RC((int)h_actor_call(t2, h_op_is_held, lz), 1);
    H_ASSERT_RC((int)h_actor_call(t2, h_op_unlock, lz), RLOCK_OK);
    assert_int_equal(h_exists(r, z, strlen(z)), 0);
    H_ASSERT_RC((int)h_actor_call(t1, h_op_unlock, ly), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock(lw_other), RLOCK_OK);

    free(z_field);
    h_actor_stop(t1);
    h_actor_stop(t2);
    rlock_free(ly);
    rlock_free(lz);
    rlock_free(lw_c);
    rlock_free(lw_other);
    rlock_client_close(c);
    rlock_client_close(other);
    rec_destroy(&rec);
    redisFree(r);
}

/* ---- class 8: what a stall costs ------------------------------------------ */

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
    struct recorder rec;
    rlock_client *c;
    rlock *l;
    h_actor *owner = h_actor_start();
    long long t0, t_resume, t_lost = 0, end;
    int lost_idx = -1;

    rec_init(&rec);
    /* A command timeout shorter than the stall: the rounds during it fail and
     * are retried (T/18 apart), the case the documented bound describes. */
    c = open_recording(h_server_url(srv), wd, H_MS(300), &rec);
    l = h_get(c, name);
    H_ASSERT_RC((int)h_actor_call(owner, h_op_lock, l), RLOCK_OK);

    /* (a) T/2 at three phases after a renewal: nothing is lost. */
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
        long long min_pttl = wd, pttl_before;
        int checks = 0;
        wait_renewal(r, name, wd);
        h_sleep_ms(phases[i]);
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
               t_resume - t0, phases[i], pttl_before, wd, min_pttl, checks,
               rec_count(&rec, RLOCK_EVENT_LOCK_LOST, NULL, NULL, NULL),
               rec_count(&rec, RLOCK_EVENT_RENEWAL_FAILED, NULL, NULL, NULL));
        assert_true(min_pttl > 0);
        assert_int_equal(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, NULL, NULL, NULL), 0);
        assert_int_equal(rec_lost_count(&rec, NULL), 0);
    }
    H_ASSERT_RC((int)h_actor_call(owner, h_op_is_held, l), 1);

    /* (b) 1.3 T right after a renewal: lost, reported during the stall, once. */
    wait_renewal(r, name, wd);
    t0 = h_now_ms();
    h_server_pause(srv);
    h_sleep_ms(t0 + long_stall - h_now_ms());
    int lost_in_stall = rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, &t_lost, &lost_idx);
    int calls_in_stall = rec_lost_count(&rec, name);
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
        rec_dump(&rec, t0);
    assert_int_equal(lost_in_stall, 1);
    assert_int_equal(calls_in_stall, 1);
    H_ASSERT_BETWEEN(t_lost - t0, H_MS(1500), wd + H_MS(400));
    assert_int_equal(exists_later, 0);
    assert_int_equal(rec_count(&rec, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL), 1);
    assert_int_equal(rec_lost_count(&rec, NULL), 1);
    H_ASSERT_RC(unlock_rc, RLOCK_ENOTOWNER); /* already reported: nothing to release */
    assert_int_equal(rec_lost_count(&rec, NULL), 1);

    h_actor_stop(owner);
    rlock_free(l);
    rlock_client_close(c);
    rec_destroy(&rec);
    redisFree(r);
}

/* ---- class 13: a refused SUBSCRIBE ---------------------------------------- */

/* 1 if PUBSUB CHANNELS * lists any redisson lock channel; copies the first. */
static int any_lock_channel(redisContext *c, char *first, size_t size) {
    redisReply *rep = h_cmd(c, "PUBSUB CHANNELS *");
    int found = 0;
    if (rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        H_FAIL("PUBSUB CHANNELS: unexpected reply");
    }
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type == REDIS_REPLY_STRING && strstr(e->str, "redisson_lock__channel") != NULL) {
            if (!found)
                snprintf(first, size, "%s", e->str);
            found = 1;
        }
    }
    freeReplyObject(rep);
    return found;
}

/*
 * Before issue 8 the subscriber ignored the NOPERM reply to SUBSCRIBE: the
 * waiter waited command_timeout_ms for a confirmation, tried once, then slept
 * until the holder's TTL (20 s here; still waiting when the 3 s bound below
 * ran out); no event existed, and the channel record leaked.
 */
static void test_subscribe_refused_polls(void **state) {
    h_server *srv = *state;
    const char *name = h_unique_name("nosub");
    const long long lease = H_MS(20000);
    redisContext *r = h_server_redis(srv);
    struct recorder rec;
    rlock_client *admin, *u;
    rlock *al, *ul;
    h_actor *waiter = h_actor_start();
    struct h_try t;
    char url[256], chan[256] = "";
    long long t_post, t_unlock, t_acq, t_ev = 0, close_ms;
    int ev_idx = -1, rc;

    h_cmd_ok(r, "ACL SETUSER u on >pw ~* &* +@all -subscribe");
    h_url_auth(url, sizeof url, h_server_url(srv), "u", "pw");
    rec_init(&rec);
    admin = h_open_url(h_server_url(srv), 0, 0);
    /* Command timeout 300 ms, shorter than the admin's 500 ms hold: the old
     * library waited that long for a SUBSCRIBE confirmation that never came,
     * tried once (BUSY), then slept until the holder's TTL. */
    u = open_recording(url, H_MS(3000), H_MS(300), &rec);
    al = h_get(admin, name);
    ul = h_get(u, name);

    /* The admin (default user) holds X with a 20 s lease (scaled). */
    H_ASSERT_RC(rlock_try_lock(al, 0, lease), RLOCK_OK);
    t = (struct h_try){ul, H_MS(10000), lease};
    t_post = h_now_ms();
    h_actor_post(waiter, h_op_try_lock, &t);
    h_sleep_ms(H_MS(500));
    assert_false(h_actor_done(waiter)); /* it waits: X is held */
    t_unlock = h_now_ms();
    H_ASSERT_RC(rlock_unlock(al), RLOCK_OK);
    /* Bounded: the old library slept until the holder's 20 s TTL. */
    int finished = H_POLL_UNTIL(h_actor_done(waiter), 3000);
    rc = finished ? (int)h_actor_wait(waiter, 1000) : 1000;
    t_acq = finished ? h_actor_finished_ms(waiter) : h_now_ms();
    H_POLL_UNTIL(rec_count(&rec, RLOCK_EVENT_SUBSCRIBE_REFUSED, NULL, NULL, NULL) >= 1, 2000);
    struct rec_event ev = {0};
    if (rec_count(&rec, RLOCK_EVENT_SUBSCRIBE_REFUSED, NULL, &t_ev, &ev_idx) >= 1)
        ev = rec_get(&rec, ev_idx);
    int refused = rec_count(&rec, RLOCK_EVENT_SUBSCRIBE_REFUSED, NULL, NULL, NULL);

    printf("      SUBSCRIBE refused (ACL -subscribe): try_lock(wait %lld, lease %lld) = %s "
           "%lld ms after the unlock (%lld ms after it began; holder's TTL %lld ms); "
           "SUBSCRIBE_REFUSED x%d, %lld ms after the wait began: name=%s status=%s "
           "detail=\"%.100s\"\n",
           t.wait_ms, lease, finished ? rlock_status_name(rc) : "(still waiting)",
           t_acq - t_unlock, t_acq - t_post, lease, refused, refused ? t_ev - t_post : -1,
           ev.has_name ? ev.name : "(null)", rlock_status_name(ev.status), ev.detail);
    assert_true(finished);
    H_ASSERT_RC(rc, RLOCK_OK);
    /* Polled every 100 ms: within ~400 ms of the unlock, never at the TTL. */
    H_ASSERT_BETWEEN(t_acq - t_unlock, 0, H_MS(400));
    H_ASSERT_BETWEEN(t_acq - t_post, H_MS(500), H_MS(500) + H_MS(400));
    assert_true(refused >= 1);
    assert_true((ev.has_name && strcmp(ev.name, name) == 0) || strstr(ev.detail, "NOPERM"));
    assert_true(ev.has_detail && ev.detail[0] != '\0');
    assert_int_equal(ev.lease_left_ms, -1);
    H_ASSERT_RC(ev.status, RLOCK_ENOPERM); /* an ACL refusal */
    assert_int_equal(refused, 1); /* docs: one event; the channel is not asked again */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(u), 1);

    /* u's unlock works; nothing is left behind. */
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, ul), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    if (any_lock_channel(r, chan, sizeof chan))
        H_FAIL("PUBSUB CHANNELS * still lists %s", chan);
    assert_int_equal(h_numsub(r, name, strlen(name)), 0);

    h_actor_stop(waiter);
    rlock_free(ul);
    rlock_free(al);
    close_ms = h_timed_close(u, 5000);
    rlock_client_close(admin);
    printf("      the u client closed in %lld ms\n", close_ms);
    rec_destroy(&rec);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_lease_gone_without_redis),
        H_SERVER_TEST(test_warned_before_loss),
        H_SERVER_TEST(test_slow_callback_no_stall),
        H_SERVER_TEST(test_stall_boundary),
        H_SERVER_TEST(test_subscribe_refused_polls),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_stall*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
