/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rw_shared.c - read holds shared by a process's threads: no longer the
 * library's (rlock_config.shared_reads_ms is ignored), but the application's,
 * as examples/shared_read.c builds them on an explicit owner. On one server:
 *
 *   ignored      a client with shared_reads_ms set: each reading thread has
 *                its own field "<client id>:<thread id>" of count 1, its own
 *                hold count and "held", as with 0; one CONFIG_IGNORED line
 *                (WARN) is logged, none with 0
 *   input        shared_reads_ms out of range is still RLOCK_EINVAL
 *   example      examples/shared_read.c, compiled in (the code users copy):
 *                two threads joined in ONE field "<client id>:<owner>" of
 *                count 1, given back by the last one out; after the shared
 *                hold is forced away, the loss callback's owner is the shared
 *                one, nobody joins, each joined unlock is RLOCK_ELOST and the
 *                next read takes a new hold; and the example program itself
 *                (8 readers and a writer of one client) exits 0
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

/* The example itself, its main() renamed: the test checks the very code users copy. */
#define main shared_read_example_main
#include "../examples/shared_read.c"
#undef main

/* ---- helpers ---------------------------------------------------------------- */

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

/* ---- ignored ------------------------------------------------------------------- */

/* A client opened with shared_reads_ms (0: left at its default) logging into lines. */
static rlock_client *open_logged(int ms, struct h_loglines *lines) {
    rlock_config cfg;
    h_config(&cfg);
    h_loglines_init(lines);
    cfg.log = h_loglines_cb;
    cfg.log_arg = lines;
    cfg.log_level = RLOCK_LOG_INFO;
    if (ms != 0)
        cfg.shared_reads_ms = ms;
    return h_open_config(&cfg);
}

static void test_knob_ignored(void **state) {
    (void)state;
    struct h_loglines lines;
    rlock_client *c = open_logged(200, &lines);
    const char *name = h_unique_name("rws-ignored");
    redisContext *r = h_redis();
    rlock *rd, *wr;
    char field[256], own[256];
    holder b = {0};
    pthread_t th;

    H_ASSERT_RC(rlock_get_rw(c, name, &rd, &wr), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    holder_start(&b, &th, rd);
    H_ASSERT_RC(b.lock_rc, RLOCK_OK);
    /* Two readers in Redis, each the thread's own field of count 1. */
    assert_int_equal(reader_fields(r, name, NULL, 0), 2);
    owner_field(c, rlock_thread_owner(), own, sizeof own);
    assert_int_equal(hget(r, name, own), 1);
    assert_int_equal(rlock_hold_count(rd), 1);
    assert_int_equal(rlock_is_held_by_current_thread(rd), 1);
    assert_int_equal(b.count_while_held, 1);
    assert_int_equal(b.held_while_held, 1);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK); /* released at once: no join time */
    assert_int_equal(reader_fields(r, name, field, sizeof field), 1);
    assert_string_not_equal(field, own);
    holder_finish(&b, th);
    H_ASSERT_RC(b.unlock_rc, RLOCK_OK);
    assert_int_equal(key_exists(r, name), 0);
    rlock_free(rd);
    rlock_free(wr);
    rlock_client_close(c); /* delivers the lines queued */
    redisFree(r);
    /* One line says the field does nothing. */
    assert_int_equal(h_loglines_count(&lines, "CONFIG_IGNORED"), 1);
    struct h_logline line = h_loglines_find(&lines, "CONFIG_IGNORED");
    assert_int_equal(line.level, RLOCK_LOG_WARN);
    assert_non_null(strstr(line.text, "shared_reads_ms=200"));
    h_loglines_destroy(&lines);

    c = open_logged(0, &lines); /* the default: no such line */
    rlock_client_close(c);
    assert_int_equal(h_loglines_count(&lines, "CLIENT_OPEN"), 1);
    assert_int_equal(h_loglines_count(&lines, "CONFIG_IGNORED"), 0);
    h_loglines_destroy(&lines);
}

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

/* ---- example ------------------------------------------------------------------- */

/* A thread in the example's shared hold until told (release 1). */
typedef struct joiner {
    atomic_int in, release;
    int lock_rc, unlock_rc;
} joiner;

static void *joiner_main(void *arg) {
    joiner *j = arg;
    j->lock_rc = shared_read_lock(&shared);
    atomic_store(&j->in, 1);
    while (!atomic_load(&j->release))
        h_sleep_ms(1);
    j->unlock_rc = j->lock_rc == RLOCK_OK ? shared_read_unlock(&shared) : RLOCK_OK;
    return NULL;
}

/* The example's shared hold on a lock of a client whose events go to the example. */
typedef struct example {
    const char *name;
    rlock_client *c, *o;
    rlock *rd, *wr, *ord, *owr;
    struct h_lost lost;
    redisContext *r;
} example;

static void on_example_event(const rlock_event *ev, void *arg) {
    on_event(ev, NULL); /* the example's callback */
    h_lost_cb(ev->name, arg);
}

static void example_open(example *e, const char *prefix, long long watchdog_ms) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.watchdog_timeout_ms = watchdog_ms;
    h_lost_init(&e->lost);
    cfg.on_event = on_example_event;
    cfg.callback_arg = &e->lost;
    e->name = h_unique_name(prefix);
    e->c = h_open_config(&cfg);
    e->o = h_open(30000, 0);
    e->r = h_redis();
    H_ASSERT_RC(rlock_get_rw(e->c, e->name, &e->rd, &e->wr), RLOCK_OK);
    H_ASSERT_RC(rlock_get_rw(e->o, e->name, &e->ord, &e->owr), RLOCK_OK);
    /* a join time no slow run (valgrind) outlasts: the second thread joins */
    shared_read_init(&shared, e->rd, H_MS(60000));
}

static void example_close(example *e) {
    rlock *handles[] = {e->rd, e->wr, e->ord, e->owr};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        rlock_free(handles[i]);
    rlock_client_close(e->c);
    rlock_client_close(e->o);
    redisFree(e->r);
    pthread_mutex_destroy(&shared.mu);
    pthread_cond_destroy(&shared.gone);
}

static void test_example_one_hold(void **state) {
    (void)state;
    example e;
    joiner j = {0};
    pthread_t th;
    char field[256], want[256];

    example_open(&e, "rws-example", 30000);
    H_ASSERT_RC(shared_read_lock(&shared), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, joiner_main, &j), 0);
    H_WAIT_FOR(atomic_load(&j.in), 10000);
    H_ASSERT_RC(j.lock_rc, RLOCK_OK);
    assert_int_equal(shared.takes, 1); /* the second thread joined */
    /* One reader in Redis: the shared owner's field, count 1. */
    assert_int_equal(reader_fields(e.r, e.name, field, sizeof field), 1);
    owner_field(e.c, shared.owner, want, sizeof want);
    assert_string_equal(field, want);
    assert_int_equal(hget(e.r, e.name, field), 1);
    /* Per-thread truth is the application's: the library sees the owner only. */
    assert_int_equal(rlock_is_held_by_current_thread(e.rd), 0);
    assert_int_equal(rlock_is_held_by(e.rd, shared.owner), 1);
    H_ASSERT_RC(shared_read_unlock(&shared), RLOCK_OK); /* not the last: still held */
    assert_int_equal(hget(e.r, e.name, field), 1);
    atomic_store(&j.release, 1);
    assert_int_equal(pthread_join(th, NULL), 0);
    H_ASSERT_RC(j.unlock_rc, RLOCK_OK); /* the last one out gave it back */
    assert_int_equal(key_exists(e.r, e.name), 0);
    H_ASSERT_RC(shared_read_unlock(&shared), RLOCK_ENOTOWNER);
    example_close(&e);
}

static void test_example_loss(void **state) {
    (void)state;
    example e;
    joiner j = {0};
    pthread_t th;

    example_open(&e, "rws-example-lost", 300);
    H_ASSERT_RC(shared_read_lock(&shared), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, joiner_main, &j), 0);
    H_WAIT_FOR(atomic_load(&j.in), 10000);
    assert_int_equal(rlock_force_unlock(e.ord), 1); /* another client forces it away */
    H_WAIT_FOR(atomic_load(&shared.lost), 10000);   /* the watchdog finds it, the event tells */
    /* The callback tells the example before it counts the event: wait for the count. */
    H_WAIT_FOR(h_lost_count(&e.lost) == 1, 10000);
    /* Each joined thread is told; the last one's unlock_as forgets the loss. */
    H_ASSERT_RC(shared_read_unlock(&shared), RLOCK_ELOST);
    atomic_store(&j.release, 1);
    assert_int_equal(pthread_join(th, NULL), 0);
    H_ASSERT_RC(j.unlock_rc, RLOCK_ELOST);
    /* Afterwards a new hold. */
    H_ASSERT_RC(shared_read_lock(&shared), RLOCK_OK);
    assert_int_equal(shared.takes, 2);
    assert_int_equal(rlock_is_locked(e.ord), 1);
    H_ASSERT_RC(shared_read_unlock(&shared), RLOCK_OK);
    assert_int_equal(h_lost_count(&e.lost), 1);
    example_close(&e);
}

/* The example program as a user runs it, against the suite's server. */
static void test_example_program(void **state) {
    (void)state;
    char prog[] = "shared_read", threads[] = "8", reads_arg[] = "200", url[512];
    snprintf(url, sizeof url, "%s", h_url());
    char *argv[] = {prog, url, threads, reads_arg, NULL};
    assert_int_equal(shared_read_example_main(4, argv), 0);
    assert_int_equal(shared.count, 0);
    assert_in_range(shared.takes, 1, 8 * 200);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knob_ignored),
        cmocka_unit_test(test_config_range),
        cmocka_unit_test(test_example_one_hold),
        cmocka_unit_test(test_example_loss),
        cmocka_unit_test(test_example_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
