/*
 * test_api.c - argument checking, status codes, configuration, names,
 * use after close, and other API-level rules of include/rlock.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* ---- version, status codes -------------------------------------------- */

static void test_version(void **state)
{
    (void)state;
    assert_non_null(rlock_version());
    assert_string_equal(rlock_version(), RLOCK_VERSION_STRING);
    assert_int_equal(rlock_version_num(), RLOCK_VERSION_NUM);
    assert_int_equal(RLOCK_VERSION_NUM, (RLOCK_VERSION_MAJOR << 16) |
                                            (RLOCK_VERSION_MINOR << 8) |
                                            RLOCK_VERSION_PATCH);
}

struct status_row {
    int value;
    const char *name;
    const char *msg;
};

#define STATUS_ROW(n, v, m) {v, "RLOCK_" #n, m},
static const struct status_row status_rows[] = {RLOCK_STATUS_MAP(STATUS_ROW)};

static void test_status_table(void **state)
{
    size_t i, j;
    (void)state;
    /* The #defines agree with the table. */
    assert_int_equal(RLOCK_OK, 0);
    assert_int_equal(RLOCK_BUSY, 1);
    assert_true(RLOCK_EINVAL < 0 && RLOCK_ENOTOWNER < 0 && RLOCK_EIO < 0 &&
                RLOCK_EREDIS < 0 && RLOCK_ENOMEM < 0 && RLOCK_ECLOSED < 0);
    for (i = 0; i < sizeof status_rows / sizeof status_rows[0]; i++) {
        const struct status_row *r = &status_rows[i];
        const char *msg = rlock_strerror(r->value);
        const char *name = rlock_status_name(r->value);
        assert_non_null(msg);
        assert_non_null(name);
        assert_string_equal(msg, r->msg);
        assert_string_equal(name, r->name);
        /* Static: the same pointer every time. */
        assert_ptr_equal(rlock_strerror(r->value), msg);
        assert_ptr_equal(rlock_status_name(r->value), name);
        for (j = 0; j < i; j++)
            assert_int_not_equal(status_rows[j].value, r->value);
    }
    assert_string_equal(rlock_status_name(RLOCK_OK), "RLOCK_OK");
    assert_string_equal(rlock_status_name(RLOCK_BUSY), "RLOCK_BUSY");
    assert_string_equal(rlock_status_name(RLOCK_EINVAL), "RLOCK_EINVAL");
    assert_string_equal(rlock_status_name(RLOCK_ENOTOWNER), "RLOCK_ENOTOWNER");
    assert_string_equal(rlock_status_name(RLOCK_EIO), "RLOCK_EIO");
    assert_string_equal(rlock_status_name(RLOCK_EREDIS), "RLOCK_EREDIS");
    assert_string_equal(rlock_status_name(RLOCK_ENOMEM), "RLOCK_ENOMEM");
    assert_string_equal(rlock_status_name(RLOCK_ECLOSED), "RLOCK_ECLOSED");
    assert_string_equal(rlock_status_name(RLOCK_ELOST), "RLOCK_ELOST");
    assert_string_equal(rlock_status_name(RLOCK_ENOTLOCK), "RLOCK_ENOTLOCK");
    assert_string_equal(rlock_status_name(RLOCK_EAUTH), "RLOCK_EAUTH");
    assert_string_equal(rlock_status_name(RLOCK_ENOPERM), "RLOCK_ENOPERM");
    assert_string_equal(rlock_status_name(RLOCK_ENOREPL), "RLOCK_ENOREPL");
}

static void test_status_unknown(void **state)
{
    static const int unknown[] = {2, 3, 100, -12, -13, -100, 12345, INT_MAX, INT_MIN, INT_MIN + 1};
    size_t i;
    (void)state;
    for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *msg = rlock_strerror(unknown[i]);
        const char *name = rlock_status_name(unknown[i]);
        assert_non_null(msg);
        assert_non_null(name);
        assert_string_equal(msg, "unknown rlock status");
        assert_string_equal(name, "RLOCK_UNKNOWN");
    }
}

/* ---- configuration --------------------------------------------------- */

static void test_config_defaults(void **state)
{
    rlock_config cfg;
    (void)state;
    memset(&cfg, 0xA5, sizeof cfg);
    rlock_config_init(&cfg);
    assert_int_equal(cfg.struct_size, sizeof(rlock_config));
    assert_non_null(cfg.url);
    assert_string_equal(cfg.url, "redis://127.0.0.1:6379");
    assert_int_equal(cfg.watchdog_timeout_ms, 30000);
    assert_int_equal(cfg.connect_timeout_ms, 5000);
    assert_int_equal(cfg.command_timeout_ms, 3000);
    assert_int_equal(cfg.pool_size, 8);
    assert_int_equal(cfg.retry_attempts, 3);
    assert_int_equal(cfg.retry_interval_ms, 1000);
    assert_null(cfg.on_lock_lost);
    assert_null(cfg.callback_arg);
}

static void dummy_cb(const char *name, void *arg)
{
    (void)name;
    (void)arg;
}

/* Opens with cfg, expects want; closes the client if one was opened. */
static void expect_open(const rlock_config *cfg, int want, const char *what)
{
    rlock_client *c = NULL;
    int rc = rlock_client_open(cfg, &c);
    if (rc != want) {
        if (rc == RLOCK_OK)
            rlock_client_close(c);
        fail_msg("open with %s = %s, expected %s", what, rlock_status_name(rc),
                 rlock_status_name(want));
    }
    if (rc == RLOCK_OK) {
        assert_non_null(c);
        rlock_client_close(c);
    }
}

static void test_config_validation(void **state)
{
    rlock_config cfg;
    rlock_client *c = NULL;
    (void)state;

#define BAD(field, value)                                                      \
    do {                                                                       \
        h_config(&cfg);                                                        \
        cfg.field = value;                                                     \
        expect_open(&cfg, RLOCK_EINVAL, #field " = " #value);                  \
    } while (0)
#define GOOD(field, value)                                                     \
    do {                                                                       \
        h_config(&cfg);                                                        \
        cfg.field = value;                                                     \
        expect_open(&cfg, RLOCK_OK, #field " = " #value);                      \
    } while (0)

    BAD(watchdog_timeout_ms, 29);
    BAD(watchdog_timeout_ms, 0);
    BAD(watchdog_timeout_ms, -1);
    BAD(watchdog_timeout_ms, LLONG_MIN);
    GOOD(watchdog_timeout_ms, 30);
    BAD(connect_timeout_ms, 0);
    BAD(connect_timeout_ms, -1);
    BAD(command_timeout_ms, 0);
    BAD(command_timeout_ms, -5);
    BAD(command_timeout_ms, INT_MIN);
    BAD(pool_size, 0);
    BAD(pool_size, -1);
    BAD(pool_size, 1025);
    GOOD(pool_size, 1);
    GOOD(pool_size, 1024);
    BAD(retry_attempts, -1);
    BAD(retry_attempts, 101);
    GOOD(retry_attempts, 0);
    GOOD(retry_attempts, 100);
    BAD(retry_interval_ms, -1);
    GOOD(retry_interval_ms, 0);
    GOOD(on_lock_lost, dummy_cb);

    /* Not initialised by rlock_config_init(). */
    BAD(struct_size, 0);
    BAD(struct_size, 1);

    /* NULL out. */
    h_config(&cfg);
    H_ASSERT_RC(rlock_client_open(&cfg, NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_client_open(NULL, NULL), RLOCK_EINVAL);

    /* The config may be freed (here: scribbled over) after open. */
    {
        rlock_config *heap = malloc(sizeof *heap);
        char *url = strdup(h_url());
        rlock *l;
        const char *name = h_unique_name("cfgcopy");
        assert_non_null(heap);
        assert_non_null(url);
        h_config(heap);
        heap->url = url;
        H_ASSERT_RC(rlock_client_open(heap, &c), RLOCK_OK);
        memset(url, 'x', strlen(url));
        memset(heap, 0xff, sizeof *heap);
        free(url);
        free(heap);
        l = h_get(c, name);
        H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        rlock_free(l);
        rlock_client_close(c);
    }
#undef BAD
#undef GOOD
}

static void test_bad_urls(void **state)
{
    static const char *const bad[] = {
        "",
        "http://127.0.0.1:6379",
        "redis:/127.0.0.1:6379",
        "127.0.0.1:6379",
        "redis://127.0.0.1:notaport",
        "redis://127.0.0.1:99999",
        "redis://127.0.0.1:-1",
        "redis://127.0.0.1:6379/notadb",
        "redis://127.0.0.1:6379/-1",
        "redis://[::1",
        "unix://",
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlock_config cfg;
        char what[200];
        h_config(&cfg);
        cfg.url = bad[i];
        snprintf(what, sizeof what, "url \"%s\"", bad[i]);
        expect_open(&cfg, RLOCK_EINVAL, what);
    }
}

/* A TCP port on 127.0.0.1 nobody listens on (bound, then closed). */
static int closed_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;
    assert_true(fd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static void test_connect_refused(void **state)
{
    rlock_config cfg;
    rlock_client *c = NULL;
    char url[64];
    long long t0, dt;
    int rc;
    (void)state;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", closed_port());
    h_config(&cfg);
    cfg.url = url;
    cfg.connect_timeout_ms = 500;
    cfg.command_timeout_ms = 500;
    t0 = h_now_ms();
    rc = rlock_client_open(&cfg, &c);
    dt = h_now_ms() - t0;
    if (rc == RLOCK_OK)
        rlock_client_close(c);
    H_ASSERT_RC(rc, RLOCK_EIO);
    H_ASSERT_BETWEEN(dt, 0, 500 + 500 + H_MS(1000));
}

/* "redis://host:port" of the test server, or skip. */
static const char *plain_url_or_skip(void)
{
    const char *u = h_url_db(0);
    if (!u) {
        print_message("RLOCK_TEST_URL is not a plain redis://host:port url: skipped\n");
        skip();
    }
    return h_url();
}

static void test_auth_refused(void **state)
{
    rlock_config cfg;
    char url[512];
    redisContext *r = h_redis();
    char *pass;
    (void)state;
    plain_url_or_skip();
    /* Only meaningful if the server has no password. */
    {
        redisReply *rep = h_cmd(r, "CONFIG GET requirepass");
        pass = (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) ? strdup(rep->element[1]->str) : NULL;
        freeReplyObject(rep);
    }
    redisFree(r);
    if (!pass || *pass) {
        free(pass);
        print_message("server has a password: skipped\n");
        skip();
    }
    free(pass);
    snprintf(url, sizeof url, "redis://:wrong%%20secret@%s", h_url() + strlen("redis://"));
    h_config(&cfg);
    cfg.url = url;
    expect_open(&cfg, RLOCK_EREDIS, "a password the server does not have");
}

static void test_select_db(void **state)
{
    rlock_config cfg;
    rlock_client *c;
    rlock *l;
    redisContext *r, *r3;
    const char *name = h_unique_name("db3");
    (void)state;
    plain_url_or_skip();

    /* SELECT refused: db 100000 does not exist. */
    h_config(&cfg);
    cfg.url = h_url_db(100000);
    expect_open(&cfg, RLOCK_EREDIS, "url with /100000");

    h_config(&cfg);
    cfg.url = h_url_db(3);
    c = h_open_config(&cfg);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    r = h_redis();
    r3 = h_redis_url(h_url_db(3));
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_LOCK_IS(r3, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r3, name, strlen(name)), 0);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
    redisFree(r3);
}

/* ---- clients and handles -------------------------------------------- */

static int is_uuid(const char *s)
{
    size_t i;
    if (!s || strlen(s) != 36)
        return 0;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return 0;
        } else if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

static void test_client_id(void **state)
{
    rlock_client *a = h_open(0, 0), *b = h_open(0, 0);
    const char *ida = rlock_client_id(a), *idb = rlock_client_id(b);
    (void)state;
    assert_true(is_uuid(ida));
    assert_true(is_uuid(idb));
    assert_string_not_equal(ida, idb);
    assert_ptr_equal(rlock_client_id(a), ida);
    assert_null(rlock_client_id(NULL));
    rlock_client_close(a);
    rlock_client_close(b);
}

static void test_null_noops(void **state)
{
    (void)state;
    rlock_client_close(NULL);
    rlock_free(NULL);
    assert_null(rlock_name(NULL));
    assert_null(rlock_client_id(NULL));
}

static void test_get_args(void **state)
{
    rlock_client *c = h_open(0, 0);
    rlock *l = NULL;
    char name[] = "rlock-test:copied";
    char *big;
    (void)state;

    H_ASSERT_RC(rlock_get(NULL, "x", &l), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(c, NULL, &l), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(c, "x", NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(c, "", &l), RLOCK_EINVAL);

    /* The name is copied. */
    l = h_get(c, name);
    name[0] = 'X';
    assert_string_equal(rlock_name(l), "rlock-test:copied");
    rlock_free(l);

    big = malloc(RLOCK_MAX_NAME_LEN + 2);
    assert_non_null(big);
    memset(big, 'n', RLOCK_MAX_NAME_LEN + 1);
    big[RLOCK_MAX_NAME_LEN + 1] = 0; /* 65537 bytes */
    l = NULL;
    H_ASSERT_RC(rlock_get(c, big, &l), RLOCK_EINVAL);
    big[RLOCK_MAX_NAME_LEN] = 0; /* 65536 bytes */
    H_ASSERT_RC(rlock_get(c, big, &l), RLOCK_OK);
    assert_non_null(l);
    assert_int_equal(strlen(rlock_name(l)), RLOCK_MAX_NAME_LEN);
    assert_memory_equal(rlock_name(l), big, RLOCK_MAX_NAME_LEN);
    rlock_free(l);
    free(big);
    rlock_client_close(c);
}

/* Locks name (len bytes), checks the Redis layout, unlocks, checks it is
 * gone. */
static void lock_roundtrip(rlock_client *c, redisContext *r, const char *name)
{
    size_t len = strlen(name);
    rlock *l = h_get(c, name);
    h_cmd_ok(r, "DEL %b", name, len);
    H_ASSERT_RC(rlock_lock_lease(l, 20000), RLOCK_OK);
    if (!h_lock_is(r, name, len, rlock_client_id(c), 1))
        fail_msg("name of %zu bytes: wrong layout", len);
    H_ASSERT_BETWEEN(h_pttl(r, name, len), 10000, 20000);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, len), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);
    rlock_free(l);
}

static void test_odd_names(void **state)
{
    rlock_client *c = h_open(0, 0);
    redisContext *r = h_redis();
    char buf[600];
    const char *base = h_unique_name("odd");
    static const char *const suffixes[] = {
        " with spaces ", "\r\n", "line\nfeed", "cr\rcr", "{tag}", "{", "}", "}{", "a{b}c",
        "\"quoted\" 'single'", "*", "$3", "%s%n", "\\", "\t\v\f",
    };
    size_t i;
    char *big;
    (void)state;

    for (i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", base, suffixes[i]);
        lock_roundtrip(c, r, buf);
    }
    /* Every byte but NUL. */
    {
        size_t n = strlen(base);
        int b;
        memcpy(buf, base, n);
        for (b = 1; b < 256; b++)
            buf[n++] = (char)b;
        buf[n] = 0;
        lock_roundtrip(c, r, buf);
    }
    /* The longest name. */
    big = malloc(RLOCK_MAX_NAME_LEN + 1);
    assert_non_null(big);
    memset(big, 'L', RLOCK_MAX_NAME_LEN);
    memcpy(big, base, strlen(base));
    big[RLOCK_MAX_NAME_LEN] = 0;
    lock_roundtrip(c, r, big);
    free(big);

    redisFree(r);
    rlock_client_close(c);
}

static void test_null_handle(void **state)
{
    long long ttl = 12345;
    rlock_client *c = h_open(0, 0);
    rlock *l = h_get(c, h_unique_name("nullttl"));
    (void)state;
    H_ASSERT_RC(rlock_lock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_lock_lease(NULL, 1000), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_lock_lease(NULL, RLOCK_LEASE_WATCHDOG), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock(NULL, 0, -1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock(NULL, 100, 1000), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_unlock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_force_unlock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_is_locked(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_is_held_by_current_thread(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_hold_count(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_remain_ttl(NULL, &ttl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_remain_ttl(l, NULL), RLOCK_EINVAL);
    rlock_free(l);
    rlock_client_close(c);
}

static void test_bad_leases(void **state)
{
    static const long long bad[] = {0, -2, -3, -1000, LLONG_MIN, RLOCK_MAX_LEASE_MS + 1, LLONG_MAX};
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("lease");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    long long ttl;
    size_t i;
    (void)state;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = rlock_lock_lease(l, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_lock_lease(%lld) = %s", bad[i], rlock_status_name(rc));
        rc = rlock_try_lock(l, 0, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_try_lock(0, %lld) = %s", bad[i], rlock_status_name(rc));
        rc = rlock_try_lock(l, 100, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_try_lock(100, %lld) = %s", bad[i], rlock_status_name(rc));
        rc = rlock_try_lock(l, -1, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_try_lock(-1, %lld) = %s", bad[i], rlock_status_name(rc));
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
    }
    /* A bad lease is rejected even when the thread already holds the lock,
     * and the hold is unchanged. */
    H_ASSERT_RC(rlock_lock_lease(l, 20000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock(l, 0, -2), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* The extremes of the valid range. */
    H_ASSERT_RC(rlock_lock_lease(l, RLOCK_MAX_LEASE_MS), RLOCK_OK);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, RLOCK_MAX_LEASE_MS - H_MS(10000), RLOCK_MAX_LEASE_MS);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), RLOCK_MAX_LEASE_MS - H_MS(10000),
                     RLOCK_MAX_LEASE_MS);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    H_ASSERT_RC(rlock_lock_lease(l, 1), RLOCK_OK);
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, 1000);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    H_ASSERT_RC(rlock_try_lock(l, 0, 1), RLOCK_OK);
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, 1000);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_wait_extremes_free_lock(void **state)
{
    static const long long waits[] = {0, 1, -1, -2, LLONG_MIN, LLONG_MAX, LLONG_MAX - 1};
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("waitx");
    rlock *l = h_get(c, name);
    size_t i;
    (void)state;
    for (i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        long long t0 = h_now_ms();
        int rc = rlock_try_lock(l, waits[i], 10000);
        if (rc != RLOCK_OK)
            fail_msg("rlock_try_lock(wait %lld) on a free lock = %s", waits[i], rlock_status_name(rc));
        H_ASSERT_BETWEEN(h_now_ms() - t0, 0, H_MS(1000));
        /* Reentrant with the same wait. */
        rc = rlock_try_lock(l, waits[i], RLOCK_LEASE_WATCHDOG);
        if (rc != RLOCK_OK)
            fail_msg("reentrant rlock_try_lock(wait %lld) = %s", waits[i], rlock_status_name(rc));
        H_ASSERT_RC(rlock_hold_count(l), 2);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_is_locked(l), 0);
    }
    rlock_free(l);
    rlock_client_close(c);
}

static void test_unlock_not_owner(void **state)
{
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("dbl");
    rlock *l = h_get(c, name), *l2 = h_get(c, name);
    redisContext *r = h_redis();
    long long pub0, pub1;
    (void)state;

    pub0 = h_commandstat_calls(r, "publish");
    /* Never held. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    /* Held once, released twice. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    pub1 = h_commandstat_calls(r, "publish");
    assert_int_equal(pub1 - pub0, 1); /* the real release published once */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    /* ENOTOWNER publishes nothing. */
    assert_int_equal(h_commandstat_calls(r, "publish"), pub1);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);

    /* Another handle of the same lock is the same lock. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l2), 1);
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(l);
    rlock_free(l2);
    redisFree(r);
    rlock_client_close(c);
}

static void test_use_after_close(void **state)
{
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("closed");
    rlock *l = h_get(c, name), *held = h_get(c, h_unique_name("closedheld"));
    rlock *l2 = NULL;
    long long ttl = 7;
    char id[64];
    (void)state;

    snprintf(id, sizeof id, "%s", rlock_client_id(c));
    H_ASSERT_RC(rlock_lock_lease(held, 10000), RLOCK_OK);
    rlock_client_close(c);

    H_ASSERT_RC(rlock_get(c, name, &l2), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_lock(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_lock_lease(l, 1000), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_try_lock(l, 1000, 1000), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_is_locked(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_hold_count(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_unlock(held), RLOCK_ECLOSED);
    /* The handle and the client id stay valid until the handles are freed. */
    assert_string_equal(rlock_name(l), name);
    assert_non_null(rlock_client_id(c));
    assert_string_equal(rlock_client_id(c), id);

    /* The held lock was not released by close. */
    {
        redisContext *r = h_redis();
        const char *hn = rlock_name(held);
        H_ASSERT_LOCK_IS(r, hn, id, 1);
        h_cmd_ok(r, "DEL %s", hn);
        redisFree(r);
    }
    rlock_free(l);
    rlock_free(held);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_table),
        cmocka_unit_test(test_status_unknown),
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_auth_refused),
        cmocka_unit_test(test_select_db),
        cmocka_unit_test(test_client_id),
        cmocka_unit_test(test_null_noops),
        cmocka_unit_test(test_get_args),
        cmocka_unit_test(test_odd_names),
        cmocka_unit_test(test_null_handle),
        cmocka_unit_test(test_bad_leases),
        cmocka_unit_test(test_wait_extremes_free_lock),
        cmocka_unit_test(test_unlock_not_owner),
        cmocka_unit_test(test_use_after_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
