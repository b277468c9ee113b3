/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rw_shared.c - shared read holds (rlock_config.shared_reads_ms) on
 * one server:
 *
 *   joined       two threads of a client read one lock through ONE Redis
 *                hold (a field "<client id>:<id>" of count 1, its hold key),
 *                each with its own hold count and "held"; the idle hold is
 *                given back when its join time ends, and at close
 *   writers      a writer of another client waits for the joined threads,
 *                holds new readers back once the join time is over (a
 *                joined thread still re-enters), and gets in after the last
 *                joined thread leaves
 *   per thread   an upgrade is RLOCK_EDEADLK; a downgrade, a lease and an
 *                _as call take holds of their own
 *   faults       the shared hold forced away: one loss report, RLOCK_ELOST
 *                to each joined thread, a new hold afterwards; its give-back
 *                refused (ACL) and done once allowed; a busy take; a joined
 *                thread that exits without unlocking; the thread taking it
 *                cancelled while it waits
 *   exclusion    readers of two shared-read clients and one plain client
 *                with a writer in each: no writer overlaps anyone
 *   input        shared_reads_ms out of range
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
#include <unistd.h>

#include "harness.h"
#include "harness/cancel_skip.h"

/* ---- helpers ---------------------------------------------------------------- */

/* A client whose threads share read holds for ms; lost (if not NULL) records its losses. */
static rlock_client *open_shared(int ms, long long watchdog_ms, struct h_lost *lost) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.shared_reads_ms = ms;
    cfg.watchdog_timeout_ms = watchdog_ms;
    if (lost != NULL) {
        h_lost_init(lost);
        cfg.on_lock_lost = h_lost_cb;
        cfg.callback_arg = lost;
    }
    return h_open_config(&cfg);
}

/*
 * A test's lock: the read and write handles of a client with shared reads
 * (c), of another client without them when asked (o), and a raw connection.
 */
typedef struct fixture {
    const char *name;
    rlock_client *c, *o;
    rlock *rd, *wr, *ord, *owr;
    redisContext *r;
} fixture;

static fixture fixture_open(const char *prefix, int ms, long long watchdog_ms,
                            struct h_lost *lost, int other) {
    fixture f = {.name = h_unique_name(prefix), .c = open_shared(ms, watchdog_ms, lost),
                 .r = h_redis()};
    H_ASSERT_RC(rlock_get_rw(f.c, f.name, &f.rd, &f.wr), RLOCK_OK);
    if (other) {
        f.o = h_open(30000, 0);
        H_ASSERT_RC(rlock_get_rw(f.o, f.name, &f.ord, &f.owr), RLOCK_OK);
    }
    return f;
}

static void fixture_close(fixture *f) {
    rlock *handles[] = {f->rd, f->wr, f->ord, f->owr};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        rlock_free(handles[i]); /* NULL: a no-op */
    rlock_client_close(f->c);
    rlock_client_close(f->o);
    redisFree(f->r);
}

/* The reader fields (not "mode", not a writer's) of name's hash: how many; the first in *first. */
static int reader_fields(redisContext *r, const char *name, char *first, size_t size) {
    redisReply *rep = h_cmd(r, "HKEYS %s", name);
    int n = 0;
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        const char *f = rep->element[i]->str;
        if (strcmp(f, "mode") == 0 || strstr(f, ":write") != NULL)
            continue;
        if (n++ == 0 && first != NULL)
            snprintf(first, size, "%s", f);
    }
    freeReplyObject(rep);
    return n;
}

/* HGET name field as a number (-1: no such field). */
static long long hget(redisContext *r, const char *name, const char *field) {
    char *v = h_cmd_str(r, "HGET %s %s", name, field);
    long long n = v != NULL ? atoll(v) : -1;
    free(v);
    return n;
}

/* "<client id>:<owner>", the field of an owner of c. */
static void owner_field(rlock_client *c, uint64_t owner, char *buf, size_t size) {
    snprintf(buf, size, "%s:%llu", rlock_client_id(c), (unsigned long long)owner);
}

static int key_exists(redisContext *r, const char *key) {
    return h_exists(r, key, strlen(key));
}

/*
 * A thread that locks (a read or a write handle) and holds until told
 * (release 1). It records its calls' statuses and its own view while it
 * holds.
 */
typedef struct holder {
    rlock *lock;
    int reentries;              /* locks taken after the first (then as many unlocks) */
    atomic_int locked, release, done;
    int lock_rc, unlock_rc, last_unlock_rc, count_while_held, held_while_held;
} holder;

static void *holder_main(void *arg) {
    holder *h = arg;
    h->lock_rc = rlock_lock(h->lock);
    for (int i = 0; i < h->reentries && h->lock_rc == RLOCK_OK; i++)
        h->lock_rc = rlock_lock(h->lock);
    h->count_while_held = rlock_hold_count(h->lock);
    h->held_while_held = rlock_is_held_by_current_thread(h->lock);
    atomic_store(&h->locked, 1);
    while (!atomic_load(&h->release))
        h_sleep_ms(1);
    h->unlock_rc = h->lock_rc == RLOCK_OK ? rlock_unlock(h->lock) : RLOCK_OK;
    h->last_unlock_rc = h->unlock_rc;
    for (int i = 0; i < h->reentries && h->lock_rc == RLOCK_OK; i++)
        h->last_unlock_rc = rlock_unlock(h->lock);
    atomic_store(&h->done, 1);
    return NULL;
}

static void holder_spawn(holder *h, pthread_t *th, rlock *lock) {
    int reentries = h->reentries;
    memset(h, 0, sizeof *h);
    h->lock = lock;
    h->reentries = reentries;
    assert_int_equal(pthread_create(th, NULL, holder_main, h), 0);
}

static void holder_start(holder *h, pthread_t *th, rlock *lock) {
    holder_spawn(h, th, lock);
    H_WAIT_FOR(atomic_load(&h->locked), 10000);
}

static void holder_finish(holder *h, pthread_t th) {
    atomic_store(&h->release, 1);
    assert_int_equal(pthread_join(th, NULL), 0);
}

/* ---- joined ---------------------------------------------------------------------- */

static void test_joined_readers_share_one_hold(void **state) {
    (void)state;
    fixture f = fixture_open("rws-join", 1000, 30000, NULL, 0);
    char field[256], own[256], key[512];
    holder b = {0};
    pthread_t th;

    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    holder_start(&b, &th, f.rd);
    H_ASSERT_RC(b.lock_rc, RLOCK_OK);
    /* One reader in Redis, not the thread's own field: the shared hold's. */
    assert_int_equal(reader_fields(f.r, f.name, field, sizeof field), 1);
    owner_field(f.c, rlock_thread_owner(), own, sizeof own);
    assert_string_not_equal(field, own);
    assert_int_equal(strncmp(field, rlock_client_id(f.c), 36), 0);
    assert_int_equal(hget(f.r, f.name, field), 1);
    snprintf(key, sizeof key, "{%s}:%s:rwlock_timeout:1", f.name, field);
    assert_int_equal(key_exists(f.r, key), 1);
    /* Each thread's view is its own. */
    assert_int_equal(rlock_hold_count(f.rd), 1);
    assert_int_equal(rlock_is_held_by_current_thread(f.rd), 1);
    assert_int_equal(b.count_while_held, 1);
    assert_int_equal(b.held_while_held, 1);
    assert_int_equal(rlock_hold_count(f.wr), 0);
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK); /* re-entry joins again */
    assert_int_equal(rlock_hold_count(f.rd), 2);
    assert_int_equal(hget(f.r, f.name, field), 1);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    assert_int_equal(rlock_hold_count(f.rd), 0);
    assert_int_equal(rlock_is_held_by_current_thread(f.rd), 0);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_ENOTOWNER);
    holder_finish(&b, th);
    H_ASSERT_RC(b.unlock_rc, RLOCK_OK);
    /* Idle now: given back by the releaser when its join time (1 s) ends. */
    H_WAIT_FOR(key_exists(f.r, f.name) == 0 && key_exists(f.r, key) == 0, 10000);
    fixture_close(&f);
}

/* An idle hold is kept through its join time (a lock+unlock is one round trip), given back after. */
static void test_idle_hold_given_back(void **state) {
    (void)state;
    fixture f = fixture_open("rws-idle", 1000, 30000, NULL, 0);

    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    int kept = key_exists(f.r, f.name);
    if (h_now_ms() - t0 < 800) /* not slowed down past the join time (valgrind) */
        assert_int_equal(kept, 1);
    for (int i = 0; i < 100; i++) { /* joins of the idle hold: no new hold */
        H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    }
    H_WAIT_FOR(key_exists(f.r, f.name) == 0, 10000);
    assert_true(h_now_ms() - t0 >= 1000);
    rlock_stats st = h_stats(f.c); /* the releaser's give-back is no unlock call */
    assert_int_equal(st.acquired_immediately, 101);
    assert_int_equal(st.unlocks, 101);
    /* A writer of the client ends the join time: the idle hold goes at once. */
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(f.wr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.wr), RLOCK_OK);
    /* Given back at close, without waiting for the join time. */
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    redisContext *r = f.r;
    f.r = h_redis();
    t0 = h_now_ms();
    fixture_close(&f);
    if (h_now_ms() - t0 < 800)
        assert_int_equal(key_exists(r, f.name), 0);
    H_WAIT_FOR(key_exists(r, f.name) == 0, 2000);
    redisFree(r);
}

/* ---- writers --------------------------------------------------------------------- */

static void test_writer_waits_for_joined_threads(void **state) {
    (void)state;
    fixture f = fixture_open("rws-writer", 50, 30000, NULL, 1);
    holder b = {0}, late = {0}, writer = {0};
    pthread_t th, lth, wth;

    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    holder_start(&b, &th, f.rd);
    holder_spawn(&writer, &wth, f.owr);
    h_sleep_ms(200); /* past the join time (50 ms), the writer waiting */
    assert_false(atomic_load(&writer.locked));
    /* A joined thread re-enters; a thread not in the hold is held back (writers first). */
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    assert_int_equal(rlock_hold_count(f.rd), 2);
    H_ASSERT_RC(rlock_try_lock(f.rd, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK); /* re-entry again */
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    long long t0 = h_now_ms(); /* a re-entry with a lease joins too, at once */
    H_ASSERT_RC(rlock_try_lock(f.rd, h_scaled(5000), 5000), RLOCK_OK);
    assert_true(h_now_ms() - t0 < h_scaled(1000));
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    struct h_timed_try newcomer = {.lock = f.rd, .wait_ms = 0, .lease_ms = RLOCK_LEASE_WATCHDOG};
    assert_int_equal(pthread_create(&lth, NULL, h_timed_try_main, &newcomer), 0);
    assert_int_equal(pthread_join(lth, NULL), 0);
    H_ASSERT_RC(newcomer.rc, RLOCK_BUSY);
    /* The joined threads leave: the writer gets in. */
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    h_sleep_ms(50);
    assert_false(atomic_load(&writer.locked)); /* b still reads */
    holder_finish(&b, th);
    H_ASSERT_RC(b.unlock_rc, RLOCK_OK);
    H_WAIT_FOR(atomic_load(&writer.locked), 10000);
    H_ASSERT_RC(writer.lock_rc, RLOCK_OK);
    assert_int_equal(reader_fields(f.r, f.name, NULL, 0), 0);
    /* A reader of the shared client waits for the writer, then takes a new hold. */
    holder_spawn(&late, &lth, f.rd);
    h_sleep_ms(50);
    assert_false(atomic_load(&late.locked));
    holder_finish(&writer, wth);
    H_ASSERT_RC(writer.unlock_rc, RLOCK_OK);
    H_WAIT_FOR(atomic_load(&late.locked), 10000);
    H_ASSERT_RC(late.lock_rc, RLOCK_OK);
    holder_finish(&late, lth);
    H_ASSERT_RC(late.unlock_rc, RLOCK_OK);
    fixture_close(&f);
}

/* ---- per thread ------------------------------------------------------------------- */

static void test_upgrade_refused(void **state) {
    (void)state;
    fixture f = fixture_open("rws-upgrade", 100, 30000, NULL, 0);
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(f.wr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_EDEADLK);
    H_ASSERT_RC(rlock_lock(f.wr), RLOCK_EDEADLK);
    H_ASSERT_RC(rlock_try_lock(f.wr, 1000, 5000), RLOCK_EDEADLK);
    assert_int_equal(rlock_hold_count(f.rd), 1);
    H_ASSERT_RC(rlock_unlock(f.wr), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    /* With no read hold left the write lock is the thread's to take. */
    H_ASSERT_RC(rlock_try_lock(f.wr, 5000, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.wr), RLOCK_OK);
    fixture_close(&f);
}

/* A downgrade, a lease and an _as call take holds of their own (the thread's or owner's field). */
static void test_own_holds(void **state) {
    (void)state;
    fixture f = fixture_open("rws-own", 100, 30000, NULL, 0);
    char own[256], as[256];

    owner_field(f.c, rlock_thread_owner(), own, sizeof own);
    H_ASSERT_RC(rlock_lock(f.wr), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK); /* downgrade */
    assert_int_equal(hget(f.r, f.name, own), 1);
    H_ASSERT_RC(rlock_unlock(f.wr), RLOCK_OK);
    assert_int_equal(rlock_is_held_by_current_thread(f.rd), 1);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    assert_int_equal(key_exists(f.r, f.name), 0);

    H_ASSERT_RC(rlock_try_lock(f.rd, 0, 5000), RLOCK_OK); /* a lease */
    assert_int_equal(hget(f.r, f.name, own), 1);
    assert_int_equal(reader_fields(f.r, f.name, NULL, 0), 1);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    assert_int_equal(key_exists(f.r, f.name), 0);

    uint64_t owner = rlock_owner_new();
    owner_field(f.c, owner, as, sizeof as);
    H_ASSERT_RC(rlock_lock_as(f.rd, owner, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_int_equal(hget(f.r, f.name, as), 1);
    assert_int_equal(rlock_hold_count(f.rd), 0); /* the thread holds nothing */
    H_ASSERT_RC(rlock_unlock_as(f.rd, owner), RLOCK_OK);
    assert_int_equal(key_exists(f.r, f.name), 0);

    /* The _as calls with the thread's own id are the thread's: same joined hold. */
    uint64_t self = rlock_thread_owner();
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    assert_int_equal(reader_fields(f.r, f.name, NULL, 0), 1);
    assert_int_equal(hget(f.r, f.name, own), -1); /* joined, not a hold of its own */
    assert_int_equal(rlock_hold_count_as(f.rd, self), 1);
    assert_int_equal(rlock_is_held_by(f.rd, self), 1);
    H_ASSERT_RC(rlock_try_lock_as(f.wr, self, 300, RLOCK_LEASE_WATCHDOG), RLOCK_EDEADLK);
    H_ASSERT_RC(rlock_lock_as(f.rd, self, RLOCK_LEASE_WATCHDOG), RLOCK_OK); /* re-entry */
    assert_int_equal(rlock_hold_count(f.rd), 2);
    H_ASSERT_RC(rlock_unlock_as(f.rd, self), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    assert_int_equal(rlock_hold_count_as(f.rd, self), 0);
    H_ASSERT_RC(rlock_unlock_as(f.rd, self), RLOCK_ENOTOWNER);
    fixture_close(&f);
}

/* A thread with a read hold of its own re-enters at once while a writer waits (no deadlock). */
static void test_own_hold_reentry_with_writer_waiting(void **state) {
    (void)state;
    fixture f = fixture_open("rws-reenter", 50, 30000, NULL, 1);
    holder writer = {0};
    pthread_t wth;
    H_ASSERT_RC(rlock_lock(f.wr), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK); /* a downgrade: a hold of its own */
    H_ASSERT_RC(rlock_unlock(f.wr), RLOCK_OK);
    h_sleep_ms(100); /* no shared hold, none in its join time */
    holder_spawn(&writer, &wth, f.owr);
    h_sleep_ms(100);
    assert_false(atomic_load(&writer.locked));
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(f.rd, h_scaled(5000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_true(h_now_ms() - t0 < h_scaled(1000));
    assert_int_equal(rlock_hold_count(f.rd), 2);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    H_WAIT_FOR(atomic_load(&writer.locked), 10000);
    H_ASSERT_RC(writer.lock_rc, RLOCK_OK);
    holder_finish(&writer, wth);
    H_ASSERT_RC(writer.unlock_rc, RLOCK_OK);
    fixture_close(&f);
}

/* A taker that finds the lock busy for its whole wait returns RLOCK_BUSY after that wait, once. */
static void test_busy_take_waits_once(void **state) {
    (void)state;
    fixture f = fixture_open("rws-busy", 50, 30000, NULL, 1);
    H_ASSERT_RC(rlock_lock(f.owr), RLOCK_OK);
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(f.rd, 500, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    long long took = h_now_ms() - t0;
    H_ASSERT_BETWEEN(took, 450, 500 + h_scaled(300));
    assert_int_equal(h_stats(f.c).busy, 1);
    H_ASSERT_RC(rlock_unlock(f.owr), RLOCK_OK);
    fixture_close(&f);
}

/* ---- faults ------------------------------------------------------------------------ */

static void test_loss_told_to_each_thread(void **state) {
    (void)state;
    struct h_lost lost;
    fixture f = fixture_open("rws-lost", 1000, 300, &lost, 1);
    holder b = {.reentries = 1};
    pthread_t th;

    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    holder_start(&b, &th, f.rd);
    assert_int_equal(rlock_force_unlock(f.ord), 1); /* another client forces it away */
    H_WAIT_FOR(h_lost_count(&lost) >= 1, 10000);    /* the watchdog finds it gone */
    assert_int_equal(rlock_hold_count(f.rd), 0);
    assert_int_equal(rlock_is_held_by_current_thread(f.rd), 0);
    /* As for holds of its own: the next lock is ELOST (nothing acquired), and so is an
     * unlock that would leave the thread holding; then it holds nothing. */
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_ELOST);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_ENOTOWNER);
    holder_finish(&b, th);
    H_ASSERT_RC(b.unlock_rc, RLOCK_ELOST);
    H_ASSERT_RC(b.last_unlock_rc, RLOCK_ENOTOWNER);
    /* Afterwards a new shared hold. */
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    assert_int_equal(rlock_is_locked(f.ord), 1);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    h_sleep_ms(400); /* renewals of the new hold: no further loss */
    assert_int_equal(h_lost_count(&lost), 1);
    fixture_close(&f);
}

/*
 * The give-back refused (PUBLISH on the lock's channel taken away after the
 * hold was taken): the hold stays, nobody joins it -- a reader goes to Redis
 * for a hold of its own, which is refused there since its unlock would be --
 * and the releaser gives it back once the ACL allows it (then a writer gets in).
 */
static void test_give_back_refused(void **state) {
    (void)state;
    const char *base = h_url();
    if (strncmp(base, "redis://", 8) != 0 || strchr(base + 8, '@') || strchr(base + 8, '/'))
        skip(); /* needs the suite's plain server to make a user on */
    fixture f = fixture_open("rws-acl", 50, 30000, NULL, 1);
    char user[64], url[512], field[256], own[256];
    snprintf(user, sizeof user, "rws-acl-%ld-%lld", (long)getpid(), h_now_us());
    h_cmd_ok(f.r, "ACL SETUSER %s on >pw ~* allchannels +@all", user);
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = h_url_auth(url, sizeof url, base, user, "pw");
    cfg.shared_reads_ms = 50;
    rlock_client *c = h_open_config(&cfg);
    rlock *rd, *wr;
    H_ASSERT_RC(rlock_get_rw(c, f.name, &rd, &wr), RLOCK_OK);

    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    h_cmd_ok(f.r, "ACL SETUSER %s resetchannels", user);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK); /* idle: the releaser's give-back is refused */
    h_sleep_ms(300);
    assert_int_equal(reader_fields(f.r, f.name, field, sizeof field), 1);
    /* Nobody joins it (a join asks nothing of Redis): a reader asks for a hold of its own,
     * refused because its unlock would be (Redis >= 7.0; 6.2 cannot ask ahead: the hold is
     * taken, and its unlock, not the last reader's, publishes nothing and goes through). */
    owner_field(c, rlock_thread_owner(), own, sizeof own);
    if (h_server_major(f.r) >= 7) {
        H_ASSERT_RC(rlock_lock(rd), RLOCK_ENOPERM);
        assert_int_equal(rlock_hold_count(rd), 0);
        assert_int_equal(hget(f.r, f.name, own), -1);
    } else {
        H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
        assert_int_equal(hget(f.r, f.name, own), 1);
        H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    }
    H_ASSERT_RC(rlock_try_lock(f.owr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    /* Allowed again: the releaser's next try gives it back. */
    h_cmd_ok(f.r, "ACL SETUSER %s allchannels", user);
    H_WAIT_FOR(key_exists(f.r, f.name) == 0, 5000);
    H_ASSERT_RC(rlock_try_lock(f.owr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.owr), RLOCK_OK);

    /* A last unlock whose give-back is refused: the thread keeps its joined hold, as
     * for a hold of its own, and re-enters it at once while a writer waits for it. */
    holder writer = {0};
    pthread_t wth;
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    h_cmd_ok(f.r, "ACL SETUSER %s resetchannels", user);
    h_sleep_ms(100); /* past the join time */
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOPERM);
    assert_int_equal(rlock_hold_count(rd), 1);
    holder_spawn(&writer, &wth, f.owr);
    h_sleep_ms(100);
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(rd, h_scaled(5000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_true(h_now_ms() - t0 < h_scaled(1000));
    assert_int_equal(rlock_hold_count(rd), 2);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOPERM);
    assert_false(atomic_load(&writer.locked));
    h_cmd_ok(f.r, "ACL SETUSER %s allchannels", user);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    H_WAIT_FOR(atomic_load(&writer.locked), 10000);
    holder_finish(&writer, wth);
    H_ASSERT_RC(writer.unlock_rc, RLOCK_OK);
    rlock_free(rd);
    rlock_free(wr);
    rlock_client_close(c);
    h_cmd_ok(f.r, "ACL DELUSER %s", user);
    fixture_close(&f);
}

/* A thread whose hold of its own was lost is told (RLOCK_ELOST), also when the shared hold is free. */
static void test_own_hold_loss_told(void **state) {
    (void)state;
    struct h_lost lost;
    fixture f = fixture_open("rws-ownlost", 50, 300, &lost, 1);
    holder b = {0};
    pthread_t th;
    holder_start(&b, &th, f.rd); /* b takes the shared hold */
    h_sleep_ms(100);             /* past its join time */
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK); /* a hold of its own */
    assert_int_equal(reader_fields(f.r, f.name, NULL, 0), 2);
    /* The shared hold's owner id is the client's, not an _as caller's. */
    uint64_t shared = 0, self = rlock_thread_owner();
    redisReply *rep = h_cmd(f.r, "HKEYS %s", f.name);
    for (size_t i = 0; i < rep->elements; i++) {
        const char *colon = strrchr(rep->element[i]->str, ':');
        uint64_t id = colon != NULL ? strtoull(colon + 1, NULL, 10) : 0;
        shared = id != 0 && id != self ? id : shared;
    }
    freeReplyObject(rep);
    assert_true(shared != 0);
    H_ASSERT_RC(rlock_unlock_as(f.rd, shared), RLOCK_EINVAL);
    assert_int_equal(rlock_force_unlock(f.ord), 1);
    H_WAIT_FOR(h_lost_count(&lost) >= 2, 10000); /* both holds found gone */
    holder_finish(&b, th);
    H_ASSERT_RC(b.unlock_rc, RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_ELOST); /* not a new shared hold */
    assert_int_equal(rlock_hold_count(f.rd), 0);
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    fixture_close(&f);
}

static void *lock_and_exit(void *arg) {
    (void)rlock_lock(arg);
    return NULL;
}

/* A joined thread that exits without unlocking: its holds go with it, the hold is given back. */
static void test_joined_thread_exits(void **state) {
    (void)state;
    fixture f = fixture_open("rws-exit", 100, 30000, NULL, 0);
    pthread_t th;
    H_ASSERT_RC(rlock_lock(f.rd), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, lock_and_exit, f.rd), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    H_WAIT_FOR(key_exists(f.r, f.name) == 0, 10000);
    /* and alone in it */
    assert_int_equal(pthread_create(&th, NULL, lock_and_exit, f.rd), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    H_WAIT_FOR(key_exists(f.r, f.name) == 0, 10000);
    fixture_close(&f);
}

/* The thread taking the shared hold is cancelled while it waits: the next reader takes it. */
static void test_taker_cancelled(void **state) {
    (void)state;
    H_SKIP_CANCEL_UNDER_ASAN();
    fixture f = fixture_open("rws-cancel", 100, 30000, NULL, 1);
    char field[256], own[256];
    pthread_t th;
    H_ASSERT_RC(rlock_lock(f.owr), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, lock_and_exit, f.rd), 0);
    h_sleep_ms(100); /* waiting for the writer */
    assert_int_equal(pthread_cancel(th), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    H_ASSERT_RC(rlock_unlock(f.owr), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(f.rd, 5000, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_int_equal(reader_fields(f.r, f.name, field, sizeof field), 1);
    owner_field(f.c, rlock_thread_owner(), own, sizeof own);
    assert_string_not_equal(field, own); /* the shared hold's, not a hold of its own */
    H_ASSERT_RC(rlock_unlock(f.rd), RLOCK_OK);
    fixture_close(&f);
}

/* ---- exclusion --------------------------------------------------------------------- */

typedef struct excl {
    rlock *lock;
    int write;
    atomic_int *readers, *writers, *stop;
    atomic_long *violations, *done;
} excl;

static void *excl_main(void *arg) {
    excl *e = arg;
    while (!atomic_load(e->stop)) {
        int rc = rlock_try_lock(e->lock, 2000, RLOCK_LEASE_WATCHDOG);
        if (rc == RLOCK_BUSY)
            continue;
        if (rc != RLOCK_OK) {
            atomic_fetch_add(e->violations, 1000);
            return NULL;
        }
        if (e->write) {
            if (atomic_fetch_add(e->writers, 1) != 0 || atomic_load(e->readers) != 0)
                atomic_fetch_add(e->violations, 1);
            usleep(200);
            atomic_fetch_sub(e->writers, 1);
        } else {
            atomic_fetch_add(e->readers, 1);
            if (atomic_load(e->writers) != 0)
                atomic_fetch_add(e->violations, 1);
            usleep(50);
            atomic_fetch_sub(e->readers, 1);
        }
        atomic_fetch_add(&e->done[e->write], 1);
        if (rlock_unlock(e->lock) != RLOCK_OK)
            atomic_fetch_add(e->violations, 1000);
    }
    return NULL;
}

static void test_exclusion_mixed_clients(void **state) {
    (void)state;
    enum { CLIENTS = 3, READERS = 3, THREADS = CLIENTS * (READERS + 1) };
    const char *name = h_unique_name("rws-excl");
    rlock_client *c[CLIENTS] = {open_shared(2, 30000, NULL), open_shared(20, 30000, NULL),
                                h_open(30000, 0)};
    rlock *rd[CLIENTS], *wr[CLIENTS];
    atomic_int readers = 0, writers = 0, stop = 0;
    atomic_long violations = 0, done[2] = {0, 0};
    excl e[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < CLIENTS; i++)
        H_ASSERT_RC(rlock_get_rw(c[i], name, &rd[i], &wr[i]), RLOCK_OK);
    for (int i = 0; i < THREADS; i++) {
        int client = i / (READERS + 1), write = i % (READERS + 1) == READERS;
        e[i] = (excl){.lock = write ? wr[client] : rd[client], .write = write, .readers = &readers,
                      .writers = &writers, .stop = &stop, .violations = &violations, .done = done};
        assert_int_equal(pthread_create(&th[i], NULL, excl_main, &e[i]), 0);
    }
    h_sleep_ms(3000);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    printf("  reads %ld, writes %ld\n", atomic_load(&done[0]), atomic_load(&done[1]));
    assert_int_equal(atomic_load(&violations), 0);
    assert_true(atomic_load(&done[0]) > 0);
    assert_true(atomic_load(&done[1]) > 0);
    for (int i = 0; i < CLIENTS; i++) {
        rlock_free(rd[i]);
        rlock_free(wr[i]);
        rlock_client_close(c[i]);
    }
}

/* ---- input -------------------------------------------------------------------------- */

static void test_config_range(void **state) {
    (void)state;
    int bad[] = {-1, 1001};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlock_config cfg;
        rlock_client *c = NULL;
        h_config(&cfg);
        cfg.shared_reads_ms = bad[i];
        H_ASSERT_RC(rlock_client_open(&cfg, &c), RLOCK_EINVAL);
        assert_null(c);
        assert_non_null(strstr(rlock_last_error(), "shared_reads_ms"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_joined_readers_share_one_hold),
        cmocka_unit_test(test_idle_hold_given_back),
        cmocka_unit_test(test_writer_waits_for_joined_threads),
        cmocka_unit_test(test_upgrade_refused),
        cmocka_unit_test(test_own_holds),
        cmocka_unit_test(test_own_hold_reentry_with_writer_waiting),
        cmocka_unit_test(test_busy_take_waits_once),
        cmocka_unit_test(test_loss_told_to_each_thread),
        cmocka_unit_test(test_give_back_refused),
        cmocka_unit_test(test_own_hold_loss_told),
        cmocka_unit_test(test_joined_thread_exits),
        cmocka_unit_test(test_taker_cancelled),
        cmocka_unit_test(test_exclusion_mixed_clients),
        cmocka_unit_test(test_config_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
