/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rlockctl.c - rlockctl end to end: build/rlockctl run as a process
 * against the throwaway redis-server (scripts/with-redis.sh), with real
 * locks held by rlock clients of this test (threads) and of child
 * processes, and Redisson's layout written by hand for the kinds librlock
 * does not offer yet (read-write, fenced) and for Java owners.
 *
 *   usage          --help's sections, help COMMAND (unlock's names no kind it
 *                  cannot unlock), usage errors (status 2), no server (3),
 *                  a malformed url (2), $RLOCK_URL
 *   plain          list / show / --json: kind, owner and hold count, TTL, the
 *                  owning process from its registration, a waiting process
 *                  counted on the channel; unregistered owners said so
 *   fair           a queue of two waiting threads: order, deadlines, each
 *                  waiter's channel; force unlock hands the lock to the head
 *   unlock         refused without a terminal (4), answered "n" on a pty (4),
 *                  "y" (0: gone, the holder's unlock finds it lost), --yes,
 *                  not locked (1), not a lock (5: left untouched)
 *   rw, fenced     Redisson's layouts: kind, mode, writer, token; rw
 *                  force-unlocked in write and in read mode, fenced (token kept)
 *   stopped, dead  a SIGSTOPped holder (registration expired, connections
 *                  idle: "process stopped?") and a SIGKILLed one ("no
 *                  connection"), renewal "stopped"; CLIENT LIST refused
 *   stuck queue    a SIGSTOPped fair head and a dead Java one flagged by
 *                  show, list, watch; dequeue asks, removes, wakes the next
 *   columns        list and watch aligned past 48 / 32 characters, host:pid,
 *                  RENEWAL
 *   clients        registrations and connections named rlock:*, other names
 *                  (a Redisson clientName), --json
 *   watch          screens, holders, hand-offs per second from unlock messages
 *   names          quotes, newlines, bytes that are not UTF-8: --json stays
 *                  valid (jq), the table shows escapes
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* A lock name of this test: "<h_unique_name>" with the test's prefix. */
static char *name_for(const char *prefix) {
    return strdup(h_unique_name(prefix));
}

/* "<name>*": a pattern that matches name and nothing of other tests. */
static char *pattern_of(const char *name) {
    size_t len = strlen(name);
    char *p = malloc(len + 2);
    memcpy(p, name, len);
    p[len] = '*';
    p[len + 1] = '\0';
    return p;
}

/* A Java Redisson client's id, for owners written by hand. */
#define JAVA_ID "0c0ffee0-1111-4222-8333-944445555666"

/* What a holder_child holds: name, as a fair queue's head if fair, its watchdog timeout. */
typedef struct h_holder_arg {
    const char *name;
    long long watchdog_ms;
    int fair;
} h_holder_arg;

/* Reads the replies of n pipelined commands (redisAppendCommand). */
static void drain_replies(redisContext *r, int n) {
    for (int i = 0; i < n; i++) {
        redisReply *reply = NULL;
        assert_int_equal(redisGetReply(r, (void **)&reply), REDIS_OK);
        freeReplyObject(reply);
    }
}

static void expect_in(const char *text, const char *needle) {
    if (strstr(text, needle) == NULL)
        H_FAIL("\"%s\" not in:\n%s", needle, text);
}

static void expect_not_in(const char *text, const char *needle) {
    if (strstr(text, needle) != NULL)
        H_FAIL("\"%s\" in:\n%s", needle, text);
}

/* ---- usage ------------------------------------------------------------------------- */

static void test_usage(void **state) {
    (void)state;
    h_tool t;
    static const char *const sections[] = {"NAME\n", "SYNOPSIS\n", "DESCRIPTION\n", "COMMANDS\n",
                                           "OPTIONS\n", "EXIT STATUS\n", "EXAMPLES\n"};
    h_tool_run(&t, NULL, "--help", NULL);
    h_tool_expect(&t, 0, "rlockctl - inspect and manage");
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        expect_in(t.out, sections[i]);
    h_tool_free(&t);
    h_tool_run(&t, NULL, "help", "unlock", NULL);
    h_tool_expect(&t, 0, "rlockctl unlock NAME [--yes]");
    /* every kind is force-unlocked (test_rw_fenced): 5 is for "not a lock" only */
    expect_in(t.out, "read-write lock with the handle of its mode");
    expect_not_in(t.out, "cannot force-unlock");
    h_tool_free(&t);
    h_tool_run(&t, NULL, "--help", NULL);
    expect_not_in(t.out, "cannot force-unlock");
    h_tool_free(&t);
    h_tool_run(&t, NULL, "show", "--help", NULL);
    h_tool_expect(&t, 0, "rlockctl show NAME [--json]");
    h_tool_free(&t);
    h_tool_run(&t, NULL, "help", "dequeue", NULL);
    h_tool_expect(&t, 0, "rlockctl dequeue NAME ENTRY [--yes]");
    h_tool_free(&t);

    static const char *const bad[][5] = {
        {"help", "nope", NULL}, {"help", "list", "extra", NULL}, {NULL}, {"frobnicate", NULL}, {"show", NULL},
        {"show", "a", "b", NULL}, {"list", "--yes", NULL}, {"unlock", "x", "--json", NULL},
        {"list", "--bogus", NULL}, {"watch", "x", "-n", "0", NULL},
        {"--timeout", "zero", "list", NULL},
        {"show", "", NULL}, {"dequeue", "x", NULL}, {"dequeue", "x", "y", "--json", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        h_tool_run(&t, NULL, bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4], NULL);
        h_tool_expect(&t, 2, NULL);
        expect_in(t.err, "usage:");
        h_tool_free(&t);
    }
}

static void test_connect_errors(void **state) {
    (void)state;
    h_tool t;
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", h_free_port());
    h_tool_run(&t, url, "--timeout", "1000", "list", NULL);
    h_tool_expect(&t, 3, NULL);
    expect_in(t.err, "cannot connect");
    h_tool_free(&t);
    h_tool_run(&t, "redis://127.0.0.1:notaport", "list", NULL);
    h_tool_expect(&t, 2, NULL);
    expect_in(t.err, "malformed url");
    h_tool_free(&t);
    /* $RLOCK_URL when there is no --url: a name nobody holds is "not locked" (1), not 3 */
    setenv("RLOCK_URL", h_url(), 1);
    h_tool_run(&t, NULL, "show", "rlock-test:ctl:nobody-holds-this", NULL);
    unsetenv("RLOCK_URL");
    h_tool_expect(&t, 1, NULL);
    expect_in(t.err, "not locked");
    h_tool_free(&t);
}

/*
 * `rlockctl ARGS > /dev/full` (no room for the output): its exit status
 * (124: still running after 20 s) and stderr into err (size bytes).
 */
static int run_to_full(char *err, size_t size, const char *args) {
    char cmd[1024], path[] = "/tmp/rlockctl-test-err.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof(cmd), "timeout 20 '%s' --url '%s' %s >/dev/full 2>'%s'", h_tool_path(),
             h_url(), args, path);
    int status = system(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(err, 1, size - 1, f) : 0;
    err[n] = '\0';
    if (f != NULL)
        fclose(f);
    unlink(path);
    fprintf(stderr, "  $ rlockctl %s >/dev/full   -> %d, stderr: %s", args, WEXITSTATUS(status),
            err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000;
}

/* Output that cannot be written is an error said on stderr (3), and ends a watch. */
static void test_output_errors(void **state) {
    (void)state;
    char err[1024];
    char *name = name_for("ctl-full"), args[512];
    redisContext *r = h_redis();
    h_foreign_lock(r, name, 60000);
    snprintf(args, sizeof(args), "list '%s'", name);
    assert_int_equal(run_to_full(err, sizeof(err), args), 3);
    expect_in(err, "cannot write the output");
    snprintf(args, sizeof(args), "watch '%s' --interval 10 -n 100000", name);
    assert_int_equal(run_to_full(err, sizeof(err), args), 3); /* was: writing on, for ever */
    expect_in(err, "cannot write the output");
    assert_int_equal(run_to_full(err, sizeof(err), "--help"), 3);
    expect_in(err, "cannot write the output");
    h_cmd_ok(r, "DEL %s", name);
    redisFree(r);
    free(name);
}

/* ---- plain ---------------------------------------------------------------------------- */

/* A process that waits for the lock (its own client), told when to stop. */
#if !defined(__SANITIZE_THREAD__)
static int waiter_child(void *arg, int in_fd, int out_fd) {
    const char *name = arg;
    rlock_client *c = NULL;
    rlock *l = NULL;
    rlock_config cfg;
    char line[32];
    h_config(&cfg);
    H_CHILD_CHECK(rlock_client_open(&cfg, &c) == RLOCK_OK, 10);
    H_CHILD_CHECK(rlock_get(c, name, &l) == RLOCK_OK, 11);
    h_line_send(out_fd, "ready");
    h_line_recv(in_fd, line, sizeof(line), 30000); /* "go": the lock is held */
    int rc = rlock_try_lock(l, h_scaled(30000), -1);
    if (rc == RLOCK_OK)
        rlock_unlock(l);
    h_line_send(out_fd, "rc %d", rc);
    h_line_recv(in_fd, line, sizeof(line), 30000);
    rlock_free(l);
    rlock_client_close(c);
    return 0;
}
#endif

/*
 * Another process waiting for the lock. Under TSan, which cannot start
 * threads in a forked child of a threaded process, a thread with a client of
 * its own waits instead: one subscribed connection either way.
 */
typedef struct other_waiter {
    h_child child;
    rlock_client *client;
    rlock *lock;
    h_cwaiter *thread;
} other_waiter;

/*
 * Readies the other waiter: called before this process opens a client of its
 * own, so the fork copies no lock a client thread holds (holder_child).
 */
static void other_waiter_start(other_waiter *w, char *name) {
#if defined(__SANITIZE_THREAD__)
    w->client = h_open(30000, 2000);
    w->lock = h_get(w->client, name);
#else
    char line[64];
    h_child_start(&w->child, waiter_child, name);
    h_child_recv(&w->child, line, sizeof(line), 10000);
#endif
}

/* Lets it wait for the lock, now held. */
static void other_waiter_go(other_waiter *w) {
#if defined(__SANITIZE_THREAD__)
    w->thread = h_cwaiter_start(w->lock, h_scaled(30000));
#else
    h_child_send(&w->child, "go");
#endif
}

/* Waits until the waiter got the lock (and gave it back); ends it. */
static void other_waiter_finish(other_waiter *w) {
#if defined(__SANITIZE_THREAD__)
    h_cwaiter_join(w->thread, 10000);
    assert_int_equal(w->thread->rc, RLOCK_OK);
    h_cwaiter_free(w->thread);
    rlock_free(w->lock);
    rlock_client_close(w->client);
#else
    char line[64];
    h_child_recv(&w->child, line, sizeof(line), 10000);
    assert_string_equal(line, "rc 0");
    h_child_send(&w->child, "bye");
    assert_int_equal(h_child_finish(&w->child, 10000), 0);
#endif
}

static void test_plain(void **state) {
    (void)state;
    char *name = name_for("ctl-plain"), *pattern = pattern_of(name), buf[256];
    redisContext *r = h_redis();
    other_waiter w;
    other_waiter_start(&w, name);
    rlock_client *c = h_open(30000, 2000);
    rlock *l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK); /* held twice */
    h_register_client(r, rlock_client_id(c), "host-a", (long)getpid(), "test_rlockctl");
    other_waiter_go(&w);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 10000);

    h_tool t;
    h_tool_run(&t, h_url(), "list", pattern, NULL);
    snprintf(buf, sizeof(buf), "%.8s:", rlock_client_id(c));
    h_tool_expect(&t, 0, buf);
    expect_in(t.out, name);
    expect_in(t.out, " plain ");
    expect_in(t.out, " x2");
    h_tool_free(&t);

    h_tool_run(&t, h_url(), "list", pattern, "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".locks | length", "1");
    h_jq_expect(t.out, ".locks[0].name", name);
    h_jq_expect(t.out, ".locks[0].kind", "plain");
    h_jq_expect(t.out, ".locks[0].owners[0].holds", "2");
    h_jq_expect(t.out, ".locks[0].owners[0].client_id", rlock_client_id(c));
    h_jq_expect(t.out, ".locks[0].owners[0].process.host", "host-a");
    snprintf(buf, sizeof(buf), "%ld", (long)getpid());
    h_jq_expect(t.out, ".locks[0].owners[0].process.pid", buf);
    h_jq_expect(t.out, ".locks[0].waiters", "1");
    h_jq_expect(t.out, ".locks[0].ttl_ms > 20000 and .locks[0].ttl_ms <= 30000", "true");
    h_tool_free(&t);

    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "holds 2");
    expect_in(t.out, "program test_rlockctl");
    expect_in(t.out, "host host-a");
    expect_in(t.out, "1 subscribed");
    expect_in(t.out, "renewal   on time");
    h_tool_free(&t);
    /* A TTL under two thirds of the owner's watchdog timeout: renewal late. */
    h_cmd_ok(r, "HSET rlock:client:%s watchdog_timeout_ms 90000", rlock_client_id(c));
    h_tool_run(&t, h_url(), "show", name, "--json", NULL);
    h_jq_expect(t.out, ".renewal", "late");
    h_tool_free(&t);

    /* The holder unlocks: the waiting process takes it and gives it back. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    other_waiter_finish(&w);
    h_tool_run(&t, h_url(), "list", pattern, NULL);
    h_tool_expect(&t, 1, NULL);
    expect_in(t.err, "no lock matches");
    h_tool_free(&t);

    /* A Java Redisson owner: no registration, no connection named for it. */
    h_foreign_lock(r, name, 20000);
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "unregistered, no connection named for it (Java Redisson, rlock < 0.5");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "show", name, "--json", NULL);
    h_jq_expect(t.out, ".owners[0].owner", H_FOREIGN_OWNER);
    h_jq_expect(t.out, ".owners[0].process", "null");
    h_tool_free(&t);
    h_cmd_ok(r, "DEL %s", name);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
    free(pattern);
    free(name);
}

/* ---- fair --------------------------------------------------------------------------- */

static void test_fair(void **state) {
    (void)state;
    char *name = name_for("ctl-fair"), field[256];
    redisContext *r = h_redis();
    rlock_client *a = h_open(30000, 2000), *b = h_open(30000, 2000);
    rlock *la = NULL, *lb = NULL;
    H_ASSERT_RC(rlock_get_fair(a, name, &la), RLOCK_OK);
    H_ASSERT_RC(rlock_get_fair(b, name, &lb), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_register_client(r, rlock_client_id(b), "host-b", 4242, "fair-waiter");
    h_cwaiter *w1 = h_cwaiter_start(lb, h_scaled(60000));
    char queue[200];
    snprintf(queue, sizeof(queue), "redisson_lock_queue:{%s}", name);
    H_WAIT_FOR(h_cmd_int(r, "LLEN %s", queue) == 1, 10000);
    h_cwaiter *w2 = h_cwaiter_start(lb, h_scaled(60000));
    H_WAIT_FOR(h_cmd_int(r, "LLEN %s", queue) == 2, 10000);

    h_tool t;
    h_tool_run(&t, h_url(), "show", name, "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".kind", "fair");
    h_jq_expect(t.out, ".held", "true");
    h_jq_expect(t.out, ".owners[0].client_id", rlock_client_id(a));
    h_jq_expect(t.out, ".queue | length", "2");
    h_jq_expect(t.out, ".waiters", "2");
    h_jq_expect(t.out, "[.queue[].client_id] | unique | .[0]", rlock_client_id(b));
    h_jq_expect(t.out, ".queue[0].process.program", "fair-waiter");
    h_jq_expect(t.out, "[.queue[].due_in_ms > 30000] | all", "true");
    /* the head is w1 (queued first): its owner field is the queue's first entry */
    char *head = h_cmd_str(r, "LINDEX %s 0", queue);
    h_jq_expect(t.out, ".queue[0].owner", head);
    snprintf(field, sizeof(field), "redisson_lock__channel:{%s}:%s", name, head);
    h_jq_expect(t.out, ".channels[0].channel", field);
    h_tool_free(&t);

    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "kind      fair");
    expect_in(t.out, "queue     1. ");
    expect_in(t.out, "deadline in ");
    h_tool_free(&t);

    /* Force unlock through the tool: the fair handle wakes the queue's head. */
    long long t0 = h_now_ms();
    h_tool_run(&t, h_url(), "unlock", name, "--yes", NULL);
    h_tool_expect(&t, 0, "force-unlocked");
    H_WAIT_FOR(h_cwaiter_done_ms(w1) != 0, 10000);
    assert_int_equal(w1->rc, RLOCK_OK);
    H_ASSERT_BETWEEN(h_cwaiter_done_ms(w1) - t0, 0, h_scaled(10000));
    h_tool_free(&t);
    h_cwaiter_join(w1, 10000);
    h_cwaiter_join(w2, 10000);
    assert_int_equal(w2->rc, RLOCK_OK);
    h_cwaiter_free(w1);
    h_cwaiter_free(w2);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_ENOTOWNER); /* force-unlocked: its hold is gone */
    free(head);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    redisFree(r);
    free(name);
}

/* A queue longer than what show lists (1 000 entries): waiters counts them all. */
static void test_fair_long_queue(void **state) {
    (void)state;
    char *name = name_for("ctl-fair-long");
    redisContext *r = h_redis();
    h_foreign_lock(r, name, 60000);
    for (int i = 0; i < 1500; i++)
        redisAppendCommand(r, "RPUSH redisson_lock_queue:{%s} " JAVA_ID ":%d", name, i);
    drain_replies(r, 1500);
    h_tool t;
    h_tool_run(&t, h_url(), "show", name, "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".kind", "fair");
    h_jq_expect(t.out, ".waiters", "1500"); /* was 1000: LRANGE's */
    h_jq_expect(t.out, ".queue | length", "1000");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "and 500 more");
    h_tool_free(&t);
    h_cmd_ok(r, "DEL %s redisson_lock_queue:{%s}", name, name);
    redisFree(r);
    free(name);
}

/* ---- unlock ------------------------------------------------------------------------ */

static void test_unlock(void **state) {
    (void)state;
    char *name = name_for("ctl-unlock");
    redisContext *r = h_redis();
    rlock_client *c = h_open(30000, 2000);
    rlock *l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_tool t;

    h_tool_run(&t, h_url(), "unlock", name, NULL); /* stdin /dev/null: no terminal */
    h_tool_expect(&t, 4, NULL);
    expect_in(t.err, "no terminal to confirm on (pass --yes)");
    h_tool_free(&t);
    assert_int_equal(rlock_is_held_by_current_thread(l), 1);

    h_tool_run_tty(&t, "n\n", h_url(), "unlock", name, NULL);
    h_tool_expect(&t, 4, NULL);
    expect_in(t.err, "force-unlock ");
    expect_in(t.err, "? [y/N]");
    expect_in(t.err, "not unlocked");
    h_tool_free(&t);
    assert_int_equal(rlock_is_held_by_current_thread(l), 1);

    h_tool_run_tty(&t, "y\n", h_url(), "unlock", name, NULL);
    h_tool_expect(&t, 0, "force-unlocked ");
    h_tool_free(&t);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    h_tool_run(&t, h_url(), "unlock", name, "--yes", NULL);
    h_tool_expect(&t, 1, NULL);
    expect_in(t.err, "not locked");
    h_tool_free(&t);

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_tool_run(&t, h_url(), "unlock", "-y", name, NULL);
    h_tool_expect(&t, 0, "force-unlocked ");
    h_tool_free(&t);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* Not a lock: a string, a hash without TTL; left as they are. */
    h_cmd_ok(r, "SET %s keep", name);
    h_tool_run(&t, h_url(), "unlock", name, "--yes", NULL);
    h_tool_expect(&t, 5, NULL);
    expect_in(t.err, "holds a string, not a lock");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 5, NULL);
    h_tool_free(&t);
    char *kept = h_cmd_str(r, "GET %s", name);
    assert_string_equal(kept, "keep");
    free(kept);
    h_cmd_ok(r, "DEL %s", name);
    h_cmd_ok(r, "HSET %s a:1 1", name);
    h_tool_run(&t, h_url(), "unlock", name, "--yes", NULL);
    h_tool_expect(&t, 5, NULL);
    expect_in(t.err, "holds a hash without a TTL, not a lock\n"); /* said once, not twice */
    h_tool_free(&t);
    assert_int_equal(h_cmd_int(r, "HLEN %s", name), 1);
    h_cmd_ok(r, "DEL %s", name);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
    free(name);
}

/* While the operator reads the question, the holder unlocks and another takes the lock. */
#define NEXT_OWNER "0dd0dd00-2222-4333-8444-955556666777:3"

static void hand_over(void *name) {
    redisContext *r = h_redis();
    h_cmd_ok(r, "DEL %s", (const char *)name);
    h_cmd_ok(r, "HSET %s " NEXT_OWNER " 1", (const char *)name);
    h_cmd_ok(r, "PEXPIRE %s 20000", (const char *)name);
    redisFree(r);
}

static void reenter(void *name) {
    redisContext *r = h_redis();
    h_cmd_ok(r, "HINCRBY %s " H_FOREIGN_OWNER " 1", (const char *)name);
    h_cmd_ok(r, "PEXPIRE %s 30000", (const char *)name);
    redisFree(r);
}

static void release(void *name) {
    redisContext *r = h_redis();
    h_cmd_ok(r, "DEL %s", (const char *)name);
    redisFree(r);
}

/* The yes was for the holders shown: another holder by then is not force-unlocked. */
static void test_unlock_holder_changed(void **state) {
    (void)state;
    char *name = name_for("ctl-unlock-changed");
    redisContext *r = h_redis();
    h_tool t;
    h_foreign_lock(r, name, 20000);
    h_tool_run_tty_after(&t, "[y/N]", hand_over, name, "y\n", h_url(), "unlock", name, NULL);
    h_tool_expect(&t, 4, NULL);
    expect_in(t.err, "holders changed");
    expect_in(t.err, "0dd0dd00:3"); /* who holds it now */
    h_tool_free(&t);
    assert_int_equal(h_cmd_int(r, "HEXISTS %s " NEXT_OWNER, name), 1);

    /* Released meanwhile: nothing to do (1). */
    h_cmd_ok(r, "DEL %s", name);
    h_foreign_lock(r, name, 20000);
    h_tool_run_tty_after(&t, "[y/N]", release, name, "y\n", h_url(), "unlock", name, NULL);
    h_tool_expect(&t, 1, NULL);
    expect_in(t.err, "not locked");
    h_tool_free(&t);

    /* The same holder (a hold more, a TTL renewed): the answer stands. */
    h_foreign_lock(r, name, 20000);
    h_tool_run_tty_after(&t, "[y/N]", reenter, name, "y\n", h_url(), "unlock", name,
                         NULL);
    h_tool_expect(&t, 0, "force-unlocked");
    h_tool_free(&t);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    redisFree(r);
    free(name);
}

/* ---- a refused read is an error, never "not locked" ---------------------------------- */

/*
 * rlockctl as a user the ACL refuses `refused` (ACL rules, e.g. "-type"): reading NAME
 * must end in status 3 naming the command and Redis's NOPERM, not in a
 * verdict about the lock made from the error reply.
 */
static void expect_refused(const char *name, const char *refused, const char *command,
                           const char *tool_command) {
    redisContext *r = h_redis();
    char url[256];
    char *rules = strdup(refused), *save = NULL;
    h_cmd_ok(r, "ACL SETUSER rlockctl-refused reset on >pw ~* &* +@all");
    for (char *rule = strtok_r(rules, " ", &save); rule != NULL; rule = strtok_r(NULL, " ", &save))
        h_cmd_ok(r, "ACL SETUSER rlockctl-refused %s", rule); /* one rule an argument */
    free(rules);
    h_url_auth(url, sizeof(url), h_url(), "rlockctl-refused", "pw");
    h_tool t;
    h_tool_run(&t, url, tool_command, name, NULL);
    h_tool_expect(&t, 3, NULL);
    expect_in(t.err, command);
    expect_in(t.err, "NOPERM");
    h_tool_free(&t);
    h_cmd_ok(r, "ACL DELUSER rlockctl-refused");
    redisFree(r);
}

static void test_refused_reads(void **state) {
    (void)state;
    char *name = name_for("ctl-refused"), *pattern = pattern_of(name);
    redisContext *r = h_redis();
    h_register_client(r, "feedbeef-0000-4000-8000-0000000000aa", "host-r", 1, "refused");
    h_cmd_ok(r, "HSET %s feedbeef-0000-4000-8000-0000000000aa:1 1", name);
    h_cmd_ok(r, "PEXPIRE %s 60000", name);
    expect_refused(name, "-type", "TYPE", "show");            /* was: "not locked" (1) */
    expect_refused(name, "-hgetall", "HGETALL", "show");      /* was: "not a lock" (5) */
    expect_refused(name, "-pttl", "PTTL", "show");            /* was: "no TTL" (5) */
    /* was: 0 waiters (Redis 6.2 takes no subcommand after '-') */
    expect_refused(name, h_server_major(r) >= 7 ? "-pubsub|numsub" : "-pubsub", "PUBSUB", "show");
    expect_refused(pattern, "-hgetall", "HGETALL", "list");   /* was: nothing matched (1) */
    /* the owner's registration unreadable: was "unregistered" */
    expect_refused(name, "resetkeys ~rlock-test:* ~redisson_*", "rlock:client:", "show");
    expect_refused(pattern, "-scan", "SCAN", "list");
    h_cmd_ok(r, "DEL %s rlock:client:feedbeef-0000-4000-8000-0000000000aa", name);
    redisFree(r);
    free(pattern);
    free(name);
}

/* ---- a big keyspace: list reads only what may be a lock ------------------------------- */

/* Calls of a command since the server started (INFO commandstats). */
static long long calls_of(redisContext *r, const char *command) {
    char *info = h_cmd_str(r, "INFO commandstats"), want[64];
    snprintf(want, sizeof(want), "cmdstat_%s:calls=", command);
    const char *at = strstr(info, want);
    long long n = at != NULL ? strtoll(at + strlen(want), NULL, 10) : 0;
    free(info);
    return n;
}


static void test_list_other_hashes(void **state) {
    (void)state;
    char *base = name_for("ctl-big"), *pattern = pattern_of(base), key[256];
    redisContext *r = h_redis();
    for (int i = 0; i < 3000; i++) /* sessions: two fields, no TTL */
        redisAppendCommand(r, "HSET %s:session:%d field value other 2", base, i);
    drain_replies(r, 3000);
    /* a hash with a TTL but more fields than a lock has: 10 001 */
    snprintf(key, sizeof(key), "%s:huge", base);
    for (int i = 0; i <= 10000; i++)
        redisAppendCommand(r, "HSET %s f%d 1", key, i);
    drain_replies(r, 10001);
    h_cmd_ok(r, "PEXPIRE %s 60000", key);
    char lock_b[256], lock_a[256];
    snprintf(lock_b, sizeof(lock_b), "%s:lock-b", base);
    snprintf(lock_a, sizeof(lock_a), "%s:lock-a", base);
    h_foreign_lock(r, lock_b, 60000);
    h_foreign_lock(r, lock_a, 60000);

    long long before = calls_of(r, "hgetall");
    h_tool t;
    h_tool_run(&t, h_url(), "list", pattern, NULL);
    h_tool_expect(&t, 0, lock_a);
    expect_in(t.out, lock_b);
    if (strstr(t.out, lock_a) > strstr(t.out, lock_b))
        H_FAIL("not sorted by name:\n%s", t.out);
    if (strstr(t.out, ":session:") != NULL || strstr(t.out, ":huge") != NULL)
        H_FAIL("a hash that is no lock listed:\n%s", t.out);
    h_tool_free(&t);
    /* HGETALL for the two locks (and their owner's registration), not for 3 001 others */
    long long hgetalls = calls_of(r, "hgetall") - before;
    if (hgetalls > 3)
        H_FAIL("list sent %lld HGETALLs for 2 locks among 3 001 other hashes", hgetalls);

    for (int i = 0; i < 3000; i++)
        redisAppendCommand(r, "DEL %s:session:%d", base, i);
    drain_replies(r, 3000);
    h_cmd_ok(r, "DEL %s %s %s", key, lock_a, lock_b);
    redisFree(r);
    free(pattern);
    free(base);
}

/* ---- read-write and fenced: Redisson's layouts, by hand ----------------------------- */

static void test_rw_fenced(void **state) {
    (void)state;
    char *rw = name_for("ctl-rw"), *fenced = name_for("ctl-fenced");
    redisContext *r = h_redis();
    h_tool t;
    h_cmd_ok(r, "HSET %s mode write " JAVA_ID ":7:write 2 " JAVA_ID ":7 1", rw);
    h_cmd_ok(r, "PEXPIRE %s 20000", rw);
    h_tool_run(&t, h_url(), "show", rw, "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".kind", "rw");
    h_jq_expect(t.out, ".mode", "write");
    h_jq_expect(t.out, "[.owners[] | select(.write) | .holds] | .[0]", "2");
    h_jq_expect(t.out, "[.owners[] | select(.write | not) | .holds] | .[0]", "1");
    char want[200];
    snprintf(want, sizeof(want), "redisson_rwlock:{%s}", rw);
    h_jq_expect(t.out, ".channels[0].channel", want);
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "unlock", rw, "--yes", NULL);
    h_tool_expect(&t, 0, "force-unlocked"); /* with the write handle: the lock is in write mode */
    h_tool_free(&t);
    assert_int_equal(h_exists(r, rw, strlen(rw)), 0);
    h_cmd_ok(r, "HSET %s mode read " JAVA_ID ":7 1", rw);
    h_cmd_ok(r, "PEXPIRE %s 20000", rw);
    h_tool_run(&t, h_url(), "unlock", rw, "--yes", NULL);
    h_tool_expect(&t, 0, "force-unlocked"); /* read mode: the read handle */
    h_tool_free(&t);
    assert_int_equal(h_exists(r, rw, strlen(rw)), 0);

    h_cmd_ok(r, "HSET %s " JAVA_ID ":9 1", fenced);
    h_cmd_ok(r, "PEXPIRE %s 20000", fenced);
    h_cmd_ok(r, "SET redisson_lock_token:{%s} 42", fenced);
    h_tool_run(&t, h_url(), "show", fenced, NULL);
    h_tool_expect(&t, 0, "kind      fenced");
    expect_in(t.out, "token     42");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "unlock", fenced, "--yes", NULL);
    h_tool_expect(&t, 0, "force-unlocked");
    h_tool_free(&t);
    assert_int_equal(h_exists(r, fenced, strlen(fenced)), 0);
    h_tool_run(&t, h_url(), "show", fenced, NULL);
    h_tool_expect(&t, 1, NULL);
    expect_in(t.err, "last token 42"); /* the token outlives the lock, as in Redisson */
    h_tool_free(&t);
    h_cmd_ok(r, "DEL %s redisson_lock_token:{%s}", rw, fenced);
    redisFree(r);
    free(rw);
    free(fenced);
}

/* ---- stopped and dead holders ------------------------------------------------------- */

#if !defined(__SANITIZE_THREAD__)
/*
 * A process holding name with a 10-minute lease; its client's watchdog timeout
 * is arg's. A fair one sends its client id, then queues once told "go" (the
 * parent forks it before opening clients of its own: a fork beside their
 * threads could copy an allocator lock one of them held, and ASan's allocator
 * has no fork handler).
 */
static int holder_child(void *arg, int in_fd, int out_fd) {
    const h_holder_arg *a = arg;
    rlock_client *c = NULL;
    rlock *l = NULL;
    rlock_config cfg;
    char line[32];
    h_config(&cfg);
    cfg.watchdog_timeout_ms = a->watchdog_ms;
    H_CHILD_CHECK(rlock_client_open(&cfg, &c) == RLOCK_OK, 10);
    H_CHILD_CHECK(a->fair ? rlock_get_fair(c, a->name, &l) == RLOCK_OK
                          : rlock_get(c, a->name, &l) == RLOCK_OK, 11);
    if (a->fair) { /* queue behind the test's hold: the head of the queue */
        h_line_send(out_fd, "%s", rlock_client_id(c));
        h_line_recv(in_fd, line, sizeof(line), 600000); /* "go": the lock is held */
        int rc = rlock_try_lock(l, 600000, -1);
        h_line_send(out_fd, "rc %d", rc);
    } else {
        H_CHILD_CHECK(rlock_lock_lease(l, 600000) == RLOCK_OK, 12);
        h_line_send(out_fd, "%s", rlock_client_id(c));
    }
    h_line_recv(in_fd, line, sizeof(line), 600000);
    rlock_free(l);
    rlock_client_close(c);
    return 0;
}

/* show NAME until its output holds want (the server notices a dead peer at once, not in step). */
static void show_until(const char *name, const char *want, long long timeout_ms) {
    h_tool t;
    long long until = h_now_ms() + h_scaled(timeout_ms);
    for (;;) {
        h_tool_run(&t, h_url(), "show", name, NULL);
        if (strstr(t.out, want) != NULL || h_now_ms() > until)
            break;
        h_tool_free(&t);
        usleep(500 * 1000);
    }
    h_tool_expect(&t, 0, want);
    h_tool_free(&t);
}
#endif

/*
 * A holder SIGSTOPped with a 10-minute lease: once its registration expires,
 * show, list and the unlock prompt say so and count its idle connections (they
 * said "unregistered (Redisson or rlock < 0.5)"). A SIGKILLed holder: "no
 * connection" while its registration lives on (it was "up 15.8s", "on time").
 */
static void test_stopped_dead_holders(void **state) {
    (void)state;
#if defined(__SANITIZE_THREAD__)
    skip();
#else
    char *name = name_for("ctl-stopped"), *pattern = pattern_of(name), id[64], key[128];
    redisContext *r = h_redis();
    h_holder_arg arg = {.name = name, .watchdog_ms = 2000};
    h_child held;
    h_child_start(&held, holder_child, &arg);
    h_child_recv(&held, id, sizeof(id), 10000);
    h_tool t;
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "client up ");
    expect_in(t.out, "idle");
    expect_not_in(t.out, "stopped?");
    h_tool_free(&t);

    kill(held.pid, SIGSTOP);
    snprintf(key, sizeof(key), "rlock:client:%s", id);
    H_WAIT_FOR(h_cmd_int(r, "EXISTS %s", key) == 0, 10000);
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "no registration (expired, or register_client off); ");
    expect_in(t.out, "(rlock:");
    expect_not_in(t.out, "unregistered");
    h_tool_free(&t);
    /* Idle past two thirds of the default watchdog timeout (its own is not known now). */
    show_until(name, "process stopped?", 40000);
    h_tool_run(&t, h_url(), "list", pattern, NULL);
    h_tool_expect(&t, 0, "stopped?");
    h_tool_free(&t);
    h_tool_run_tty(&t, "n\n", h_url(), "unlock", name, NULL);
    h_tool_expect(&t, 4, NULL);
    expect_in(t.err, "no registration (expired, or register_client off); ");
    expect_in(t.err, "process stopped?");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "show", name, "--json", NULL);
    h_jq_expect(t.out, ".renewal", "stopped");
    h_jq_expect(t.out, ".owners[0].process", "null");
    h_jq_expect(t.out, ".owners[0].connections > 0", "true");
    h_jq_expect(t.out, ".owners[0].stuck", "no registration, connections idle: process stopped?");
    h_tool_free(&t);
    kill(held.pid, SIGCONT);
    h_child_kill(&held);
    h_cmd_ok(r, "DEL %s", name);

    /* Killed: its connections close at once, its registration lives its TTL on. */
    arg.watchdog_ms = 60000;
    h_child_start(&held, holder_child, &arg);
    h_child_recv(&held, id, sizeof(id), 10000);
    h_child_kill(&held);
    show_until(name, "no connection: process gone?", 5000);
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "renewal   stopped (");
    expect_not_in(t.out, "on time");
    h_tool_free(&t);
    h_cmd_ok(r, "DEL %s", name);
    redisFree(r);
    free(pattern);
    free(name);
#endif
}

/*
 * A fair queue stuck behind a stopped head: the lock is free, the head (a
 * SIGSTOPped process) has 10 minutes to its deadline, a waiter of this test
 * queues behind it. show and watch flag the head; dequeue asks, removes it
 * and wakes the next waiter, which takes the lock at once (it would have
 * slept until the head's deadline).
 */
static void test_fair_stuck_head(void **state) {
    (void)state;
#if defined(__SANITIZE_THREAD__)
    skip();
#else
    char *name = name_for("ctl-stuck"), *pattern = pattern_of(name), id[64], q[200];
    redisContext *r = h_redis();
    h_holder_arg arg = {.name = name, .watchdog_ms = 2000, .fair = 1};
    h_child head;
    h_child_start(&head, holder_child, &arg); /* first: no thread of ours to fork beside */
    h_child_recv(&head, id, sizeof(id), 10000);
    rlock_client *a = h_open(30000, 2000), *b = h_open(30000, 2000);
    rlock *la = NULL, *lb = NULL;
    H_ASSERT_RC(rlock_get_fair(a, name, &la), RLOCK_OK);
    H_ASSERT_RC(rlock_get_fair(b, name, &lb), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    snprintf(q, sizeof(q), "redisson_lock_queue:{%s}", name);
    h_child_send(&head, "go");
    H_WAIT_FOR(h_cmd_int(r, "LLEN %s", q) == 1, 10000);
    h_cwaiter *next = h_cwaiter_start(lb, h_scaled(60000));
    H_WAIT_FOR(h_cmd_int(r, "LLEN %s", q) == 2, 10000);
    char *entry = h_cmd_str(r, "LINDEX %s 0", q);
    assert_memory_equal(entry, id, 36);

    kill(head.pid, SIGSTOP);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK); /* free: the stopped head cannot take it */
    H_WAIT_FOR(h_cmd_int(r, "EXISTS rlock:client:%s", id) == 0, 10000);
    h_tool t;
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "state     free, 2 waiters queued behind a stuck head");
    expect_in(t.out, "stuck     the queue's head does not take the free lock: registration "
                     "expired while connected: process stopped?");
    expect_in(t.out, "remedy: rlockctl dequeue ");
    expect_in(t.out, entry);
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "show", name, "--json", NULL);
    h_jq_expect(t.out, ".head_stuck", "registration expired while connected: process stopped?");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "watch", pattern, "-n", "1", NULL);
    h_tool_expect(&t, 0, "queue head stuck: ");
    expect_in(t.out, "stopped?");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "list", pattern, NULL);
    h_tool_expect(&t, 0, "queue head stuck: ");
    h_tool_free(&t);

    h_tool_run(&t, h_url(), "dequeue", name, entry, NULL); /* no terminal, no --yes */
    h_tool_expect(&t, 4, NULL);
    h_tool_free(&t);
    h_tool_run_tty(&t, "n\n", h_url(), "dequeue", name, entry, NULL);
    h_tool_expect(&t, 4, NULL);
    expect_in(t.err, "1 of 2 in the queue of");
    expect_in(t.err, "no registration (expired, or register_client off); ");
    h_tool_free(&t);
    assert_int_equal(h_cmd_int(r, "LLEN %s", q), 2);

    long long t0 = h_now_ms();
    h_tool_run(&t, h_url(), "dequeue", name, entry, "--yes", NULL);
    h_tool_expect(&t, 0, "removed ");
    expect_in(t.out, "the next waiter was woken");
    h_tool_free(&t);
    H_WAIT_FOR(h_cwaiter_done_ms(next) != 0, 10000);
    assert_int_equal(next->rc, RLOCK_OK);
    H_ASSERT_BETWEEN(h_cwaiter_done_ms(next) - t0, 0, h_scaled(5000));
    h_cwaiter_join(next, 10000);
    h_cwaiter_free(next);
    assert_int_equal(h_cmd_int(r, "ZCARD redisson_lock_timeout:{%s}", name), 0);
    h_tool_run(&t, h_url(), "dequeue", name, entry, "--yes", NULL);
    h_tool_expect(&t, 1, NULL); /* nothing queued, nothing held: "not locked" */
    h_tool_free(&t);

    kill(head.pid, SIGCONT);
    h_child_kill(&head);
    h_cmd_ok(r, "DEL %s %s redisson_lock_timeout:{%s}", name, q, name);
    free(entry);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    redisFree(r);
    free(pattern);
    free(name);
#endif
}

/*
 * A head nobody listens for (a killed Java Redisson waiter: no registration,
 * no rlock connection, its channel without subscriber) is stuck too; dequeue
 * removes it and the next entry becomes the head.
 */
static void test_fair_dead_java_head(void **state) {
    (void)state;
    char *name = name_for("ctl-java-head");
    redisContext *r = h_redis();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* deadlines are wall-clock ms, as Redisson's */
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    h_cmd_ok(r, "RPUSH redisson_lock_queue:{%s} " JAVA_ID ":1 " JAVA_ID ":2", name);
    h_cmd_ok(r, "ZADD redisson_lock_timeout:{%s} %lld " JAVA_ID ":1 %lld " JAVA_ID ":2", name,
             now + 600000, now + 1200000);
    h_tool t;
    h_tool_run(&t, h_url(), "show", name, NULL);
    h_tool_expect(&t, 0, "behind a stuck head");
    expect_in(t.out, "nobody listens on its channel: process gone?");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "dequeue", name, JAVA_ID ":1", "--yes", NULL);
    h_tool_expect(&t, 0, "removed " JAVA_ID ":1 (1 of 2");
    h_tool_free(&t);
    char *head = h_cmd_str(r, "LINDEX redisson_lock_queue:{%s} 0", name);
    assert_string_equal(head, JAVA_ID ":2");
    free(head);
    h_cmd_ok(r, "DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", name, name);
    redisFree(r);
    free(name);
}

/*
 * CLIENT LIST refused (an ACL without it): no owner is called gone for want
 * of connections; said once on stderr, and the lock is still shown.
 */
static void test_client_list_refused(void **state) {
    (void)state;
    char *name = name_for("ctl-nolist"), url[256];
    const char *id = "feedbeef-0000-4000-8000-0000000000bb";
    redisContext *r = h_redis();
    h_register_client(r, id, "host-n", 555, "no-list");
    h_cmd_ok(r, "HSET %s %s:1 1", name, id);
    h_cmd_ok(r, "PEXPIRE %s 30000", name);
    /* Redis 6.2 takes no '-command|subcommand' rule: there the whole CLIENT goes (its
     * connections are then unnamed too, which rlockctl says once and goes on). */
    h_cmd_ok(r, "ACL SETUSER rlockctl-nolist reset on >pw ~* &* +@all %s",
             h_server_major(r) >= 7 ? "-client|list" : "-client");
    h_url_auth(url, sizeof(url), h_url(), "rlockctl-nolist", "pw");
    h_tool t;
    h_tool_run(&t, url, "show", name, NULL);
    h_tool_expect(&t, 0, "host host-n  pid 555");
    expect_not_in(t.out, "gone?");
    expect_not_in(t.out, "stopped");
    expect_in(t.err, "CLIENT LIST at ");
    expect_in(t.err, "(which processes are alive is not known)");
    h_tool_free(&t);
    h_tool_run(&t, url, "show", name, "--json", NULL);
    h_jq_expect(t.out, ".owners[0].connections", "null");
    h_jq_expect(t.out, ".owners[0].stuck", "null");
    h_tool_free(&t);
    h_cmd_ok(r, "ACL DELUSER rlockctl-nolist");
    h_cmd_ok(r, "DEL %s rlock:client:%s", name, id);
    redisFree(r);
    free(name);
}

/* The column at which the first "  <word>  " of each line holding name starts. */
static long column_of(const char *out, const char *name, const char *word) {
    const char *line = strstr(out, name);
    if (line == NULL)
        H_FAIL("no row for %s in:\n%s", name, out);
    while (line > out && line[-1] != '\n')
        line--;
    const char *at = strstr(line, word);
    if (at == NULL)
        H_FAIL("no \"%s\" on the row of %s in:\n%s", word, name, out);
    return (long)(at - line);
}

/*
 * list and watch: the columns stay aligned past 32 (watch) and 48 (list)
 * characters of name; list shows each owner's host:pid as watch does; watch
 * has a RENEWAL column.
 */
static void test_columns(void **state) {
    (void)state;
    char *base = name_for("ctl-cols"), *pattern = pattern_of(base), long_name[200],
         short_name[200];
    snprintf(long_name, sizeof(long_name), "%s-a-name-long-enough-to-pass-48-columns", base);
    snprintf(short_name, sizeof(short_name), "%s-b", base);
    redisContext *r = h_redis();
    rlock_client *c = h_open(30000, 2000);
    rlock *ll = h_get(c, long_name), *ls = h_get(c, short_name);
    H_ASSERT_RC(rlock_lock(ll), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(ls), RLOCK_OK);
    h_register_client(r, rlock_client_id(c), "host-l", 4242, "test_rlockctl");
    h_tool t;
    h_tool_run(&t, h_url(), "list", pattern, NULL);
    h_tool_expect(&t, 0, "(host-l:4242)");
    assert_int_equal(column_of(t.out, long_name, "  plain  "),
                     column_of(t.out, short_name, "  plain  "));
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "watch", pattern, "-n", "1", NULL);
    h_tool_expect(&t, 0, "  RENEWAL  ");
    assert_int_equal(column_of(t.out, long_name, "  plain  "),
                     column_of(t.out, short_name, "  plain  "));
    assert_int_equal(column_of(t.out, long_name, "  on time  "),
                     column_of(t.out, "NAME ", "  RENEWAL  "));
    expect_in(t.out, "(host-l:4242)");
    h_tool_free(&t);
    H_ASSERT_RC(rlock_unlock(ll), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(ls), RLOCK_OK);
    rlock_free(ll);
    rlock_free(ls);
    rlock_client_close(c);
    redisFree(r);
    free(pattern);
    free(base);
}

/* ---- clients ------------------------------------------------------------------------ */

static void test_clients(void **state) {
    (void)state;
    redisContext *r = h_redis(), *named[3];
    const char *id = "feedbeef-0000-4000-8000-000000000001";
    char conn_name[128];
    h_register_client(r, id, "host-c", 777, "billing");
    snprintf(conn_name, sizeof(conn_name), "rlock:host-c:777:%.8s", id);
    for (int i = 0; i < 2; i++) {
        named[i] = h_redis();
        h_cmd_ok(named[i], "CLIENT SETNAME %s", conn_name);
    }
    named[2] = h_redis();
    h_cmd_ok(named[2], "CLIENT SETNAME rlock:host-z:1:abcdef12");
    redisContext *java = h_redis(); /* Redisson's Config.setClientName("order-svc-java") */
    h_cmd_ok(java, "CLIENT SETNAME order-svc-java");
    h_tool t;
    h_tool_run(&t, h_url(), "clients", NULL);
    h_tool_expect(&t, 0, "feedbeef  host-c");
    expect_in(t.out, "  IDLE  ");
    expect_in(t.out, "billing");
    expect_in(t.out, "without a registration");
    expect_in(t.out, "rlock:host-z:1:abcdef12");
    expect_in(t.out, "other named connections (a Java Redisson client's is its clientName)");
    expect_in(t.out, "order-svc-java");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "clients", "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    h_jq_expect(t.out, ".clients[] | select(.id == \"feedbeef-0000-4000-8000-000000000001\") "
                       "| \"\\(.host) \\(.pid) \\(.program) \\(.connections)\"",
                "host-c 777 billing 2");
    h_jq_expect(t.out, ".clients[] | select(.host == \"host-c\") | .idle_s >= 0", "true");
    h_jq_expect(t.out, ".connections[] | select(.name == \"rlock:host-z:1:abcdef12\") "
                       "| \"\\(.count) \\(.registered)\"",
                "1 false");
    h_jq_expect(t.out, ".other_connections[] | select(.name == \"order-svc-java\") | .count", "1");
    h_tool_free(&t);
    redisFree(java);
    for (int i = 0; i < 3; i++)
        redisFree(named[i]);
    h_cmd_ok(r, "DEL rlock:client:%s", id);
    redisFree(r);
}

/* ---- watch ------------------------------------------------------------------------- */

static void test_watch(void **state) {
    (void)state;
    char *name = name_for("ctl-watch"), *pattern = pattern_of(name);
    rlock_client *a = h_open(30000, 2000), *b = h_open(30000, 2000);
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    h_watch_expect_heard(h_url(), pattern, name, la, lb, "HAND-OFFS/S");
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    free(pattern);
    free(name);
}

/* A thread publishing unlock messages of another lock, as a busy server has. */
typedef struct noise {
    char channel[256];
    pthread_t th;
    atomic_int stop;
    atomic_long sent;
} noise;

static void *noise_main(void *arg) {
    noise *n = arg;
    redisContext *r = h_redis();
    while (!atomic_load(&n->stop)) {
        h_cmd_ok(r, "PUBLISH %s 0", n->channel);
        atomic_fetch_add(&n->sent, 1);
        h_sleep_ms(5);
    }
    redisFree(r);
    return NULL;
}

/* The header's count on the last screen of a watch's output. */
static long long last_heard(const char *out) {
    const char *last = NULL;
    for (const char *p = out; (p = strstr(p, "pub/sub, ")) != NULL; p++)
        last = p;
    return last != NULL ? strtoll(last + strlen("pub/sub, "), NULL, 10) : -1;
}

/*
 * watch NAME counts NAME's messages only: another lock's, however many, are
 * neither counted nor kept (a watch running for hours on a busy server kept
 * a tally of every lock it ever heard, and searched it for each message).
 */
static void test_watch_other_locks(void **state) {
    (void)state;
    char *name = name_for("ctl-watch-one"), *other = name_for("ctl-watch-other");
    redisContext *r = h_redis();
    h_foreign_lock(r, name, 60000);
    noise *n = calloc(1, sizeof(*n));
    snprintf(n->channel, sizeof(n->channel), "redisson_lock__channel:{%s}", other);
    pthread_create(&n->th, NULL, noise_main, n);
    H_WAIT_FOR(atomic_load(&n->sent) > 3, 10000);
    h_tool t;
    long long sent_before = atomic_load(&n->sent);
    h_tool_run(&t, h_url(), "watch", name, "--interval", "500", "-n", "3", NULL);
    long long sent = atomic_load(&n->sent) - sent_before;
    atomic_store(&n->stop, 1);
    pthread_join(n->th, NULL);
    h_tool_expect(&t, 0, name);
    if (sent < 10)
        H_FAIL("the other lock's messages were not sent meanwhile (%lld)", sent);
    if (last_heard(t.out) != 0)
        H_FAIL("%lld messages of another lock counted for %s:\n%s", last_heard(t.out), name, t.out);
    h_tool_free(&t);
    free(n);
    h_cmd_ok(r, "DEL %s", name);
    redisFree(r);
    free(other);
    free(name);
}

/* A refused subscription is said: hand-offs then come from holder changes only. */
static void test_watch_refused(void **state) {
    (void)state;
    char *name = name_for("ctl-watch-refused"), url[256];
    redisContext *r = h_redis();
    h_foreign_lock(r, name, 60000);
    h_cmd_ok(r, "ACL SETUSER rlockctl-nosub reset on >pw ~* &* +@all -psubscribe");
    h_url_auth(url, sizeof(url), h_url(), "rlockctl-nosub", "pw");
    h_tool t;
    h_tool_run(&t, url, "watch", name, "--interval", "200", "-n", "2", NULL);
    h_tool_expect(&t, 0, name);
    expect_in(t.err, "NOPERM");
    expect_in(t.err, "holder changes only");
    h_tool_free(&t);
    h_cmd_ok(r, "ACL DELUSER rlockctl-nosub");
    h_cmd_ok(r, "DEL %s", name);
    redisFree(r);
    free(name);
}

/* ---- names that are not plain text -------------------------------------------------- */

static void test_odd_names(void **state) {
    (void)state;
    char base[160], name[200], pattern[200];
    snprintf(base, sizeof(base), "%s", h_unique_name("ctl-odd"));
    snprintf(name, sizeof(name), "%s\"q\nx\xff\x01 \xc3\xa9", base);
    snprintf(pattern, sizeof(pattern), "%s*", base);
    rlock_client *c = h_open(30000, 2000);
    rlock *l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_tool t;
    h_tool_run(&t, h_url(), "list", pattern, "--json", NULL);
    h_tool_expect(&t, 0, NULL);
    char want[240];
    snprintf(want, sizeof(want), "%s\"q\nx\xc3\xbf\x01 \xc3\xa9", base); /* 0xff as U+00FF */
    h_jq_expect(t.out, ".locks[0].name", want);
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "list", pattern, NULL);
    h_tool_expect(&t, 0, "\"q\\x0ax\\xff\\x01 \xc3\xa9");
    h_tool_free(&t);
    h_tool_run(&t, h_url(), "unlock", name, "--yes", NULL);
    h_tool_expect(&t, 0, "force-unlocked");
    h_tool_free(&t);
    H_ASSERT_RC(rlock_is_locked(l), 0);
    rlock_free(l);
    rlock_client_close(c);
}

/* ---- what Redis holds cannot drive the operator's terminal --------------------------- */

/* An owner id that clears the screen and sets the window title, if printed raw. */
#define ESC_ID "\x1b[2J\x1b]0;pwned\x07"

/* Fails unless text has no control byte but '\n': C0, DEL, and C1 (U+0080..U+009F) in UTF-8. */
static void expect_no_controls(const char *what, const char *text) {
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; u[i] != '\0'; i++)
        if ((u[i] < 0x20 && u[i] != '\n') || u[i] == 0x7f ||
            (u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f))
            H_FAIL("%s: control byte 0x%02x at %zu reaches the terminal:\n%s", what, u[i], i, text);
}

static void run_clean(const char *what, int status, const char *url, const char *a1, const char *a2,
                      const char *a3, const char *a4, const char *a5) {
    h_tool t;
    h_tool_run(&t, url, a1, a2, a3, a4, a5, NULL);
    h_tool_expect(&t, status, NULL);
    expect_no_controls(what, t.out);
    expect_no_controls(what, t.err);
    h_tool_free(&t);
}

static void test_terminal_escapes(void **state) {
    (void)state;
    char *name = name_for("ctl-esc"), *pattern = pattern_of(name);
    redisContext *r = h_redis();
    h_cmd_ok(r, "HSET %s %s:1 1", name, ESC_ID);
    h_cmd_ok(r, "PEXPIRE %s 20000", name);
    /* its registration: escapes in the id, host and version, a C1 CSI (U+009B) in the program */
    h_cmd_ok(r, "HSET rlock:client:%s id %s host %s pid 1 program %s version %s started_ms 1 "
                "url %s watchdog_timeout_ms 30000",
             ESC_ID, ESC_ID, "h\x1b[31m", "p\xc2\x9b" "2J", "\x1b[5m0.5", "redis://\x1b[8m");
    h_cmd_ok(r, "PEXPIRE rlock:client:%s 60000", ESC_ID);

    run_clean("list", 0, h_url(), "list", pattern, NULL, NULL, NULL);
    run_clean("show", 0, h_url(), "show", name, NULL, NULL, NULL);
    run_clean("watch", 0, h_url(), "watch", name, "-n", "1", NULL);
    run_clean("watch PATTERN", 0, h_url(), "watch", pattern, "-n", "1", NULL);
    run_clean("clients", 0, h_url(), "clients", NULL, NULL, NULL, NULL);
    run_clean("unlock", 0, h_url(), "unlock", name, "--yes", NULL, NULL);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    h_cmd_ok(r, "DEL rlock:client:%s", ESC_ID);
    redisFree(r);
    free(pattern);
    free(name);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),    cmocka_unit_test(test_connect_errors),
        cmocka_unit_test(test_output_errors),
        cmocka_unit_test(test_plain),    cmocka_unit_test(test_fair),
        cmocka_unit_test(test_fair_long_queue),
        cmocka_unit_test(test_unlock),   cmocka_unit_test(test_unlock_holder_changed),
        cmocka_unit_test(test_refused_reads), cmocka_unit_test(test_list_other_hashes),
        cmocka_unit_test(test_rw_fenced),
        cmocka_unit_test(test_stopped_dead_holders), cmocka_unit_test(test_fair_stuck_head),
        cmocka_unit_test(test_fair_dead_java_head), cmocka_unit_test(test_columns),
        cmocka_unit_test(test_client_list_refused),
        cmocka_unit_test(test_clients),  cmocka_unit_test(test_watch),
        cmocka_unit_test(test_watch_other_locks), cmocka_unit_test(test_watch_refused),
        cmocka_unit_test(test_odd_names), cmocka_unit_test(test_terminal_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
