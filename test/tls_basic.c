/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_basic.c - rediss:// against real TLS redis-servers (scripts/with-tls-redis.sh
 * starts them and makes the certificates): the url's tls_* parameters, locks,
 * a waiter woken by pub/sub and watchdog renewals over TLS, each verification
 * failure and its words, a plaintext server behind rediss:// and a TLS port
 * behind redis://, mutual TLS, a CA file replaced on disk, the credentials
 * callback, the fork rule, a hand-off to another process (timed), Sentinel
 * and Cluster over TLS, a Sentinel and a Cluster failover, Cluster slot migrations (a
 * watchdog lock and its waiter; a read-write and a fair lock whose keys the
 * migration split). Through the public header only; redis-cli --tls pokes the servers.
 */
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rlock.h"

static const char *dir;
static int tls_port, plain_port, wrong_port, expired_port, mtls_port;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int env_port(const char *name) {
    const char *v = getenv(name);
    return v != NULL ? atoi(v) : 0;
}

static int group_setup(void **state) {
    (void)state;
    dir = getenv("RLOCK_TLS_DIR");
    tls_port = env_port("RLOCK_TLS_PORT");
    plain_port = env_port("RLOCK_TLS_PLAIN_PORT");
    wrong_port = env_port("RLOCK_TLS_WRONG_PORT");
    expired_port = env_port("RLOCK_TLS_EXPIRED_PORT");
    mtls_port = env_port("RLOCK_TLS_MTLS_PORT");
    if (dir == NULL || tls_port == 0 || plain_port == 0 || wrong_port == 0 || expired_port == 0 ||
        mtls_port == 0) {
        fprintf(stderr, "tls_basic: run it through scripts/with-tls-redis.sh (make test-tls)\n");
        return -1;
    }
    return 0;
}

/* "<dir>/<file>" in a static buffer of n (one of a few, for several in one url). */
static const char *path(const char *file) {
    static char bufs[4][512];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof(bufs[0]), "%s/%s", dir, file);
    return b;
}

/* Opens a client on url (connect_timeout_ms 2000); its status, *out the client. */
/* A client of url whose watchdog lease is watchdog_ms (0: the default). */
static int open_watchdog(const char *url, long long watchdog_ms, rlock_client **out) {
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.connect_timeout_ms = 2000;
    if (watchdog_ms > 0)
        cfg.watchdog_timeout_ms = watchdog_ms;
    *out = NULL;
    return rlock_client_open(&cfg, out);
}

static int open_url(const char *url, rlock_client **out) {
    return open_watchdog(url, 0, out);
}

/* The TLS Cluster's url (verified by name against the suite's CA); 0 without one. */
static int cluster_url(char *url, size_t size) {
    int port = env_port("RLOCK_TLS_CLUSTER_PORT");
    if (port != 0)
        snprintf(url, size, "rediss-cluster://localhost:%d?tls_ca=%s", port, path("ca.pem"));
    return port;
}

/* Expects open of url to fail with status within 4 s, its message containing each word. */
static void expect_refused(const char *url, int status, const char *word1, const char *word2) {
    rlock_client *c = NULL;
    long long t0 = now_ms();
    int got = open_url(url, &c);
    long long took = now_ms() - t0;
    const char *msg = rlock_last_error();
    if (got != status || strstr(msg, word1) == NULL || (word2 && strstr(msg, word2) == NULL))
        fprintf(stderr, "url %s: got %s \"%s\"\n", url, rlock_status_name(got), msg);
    assert_int_equal(got, status);
    assert_non_null(strstr(msg, word1));
    if (word2 != NULL)
        assert_non_null(strstr(msg, word2));
    assert_true(took < 4000);
    assert_null(c);
}

static void lock_cycle(rlock_client *c, const char *name) {
    rlock *l = NULL;
    assert_int_equal(rlock_get(c, name, &l), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_is_held_by_current_thread(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_lock(l), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

/* ---- url parameters ----------------------------------------------------------- */

static void test_url_params(void **state) {
    (void)state;
    rlock_client *c = NULL;
    char url[1024];
    assert_int_equal(open_url("rediss://localhost:6380/0?tls_foo=1", &c), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "unknown parameter \"tls_foo\" at position 27"));
    assert_int_equal(open_url("rediss://localhost:6380?tls_verify=maybe", &c), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "tls_verify \"maybe\""));
    assert_non_null(strstr(rlock_last_error(), "expected full, ca or none"));
    assert_int_equal(open_url("rediss://localhost?tls_ca=/a&tls_ca=/b", &c), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "repeated parameter \"tls_ca\""));
    assert_int_equal(open_url("rediss://localhost?tls_cert=/a.pem", &c), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "tls_cert without tls_key"));
    assert_int_equal(open_url("redis-sentinel://localhost/m?tls_ca=/a", &c), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "need a rediss scheme"));
    assert_int_equal(open_url("rediss://localhost?tls_server_name=", &c), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "empty value"));
    assert_int_equal(open_url("rediss-cluster://a,b/3", &c), RLOCK_EINVAL);
    assert_int_equal(open_url("rediss-sentinel://a/m?tls_verify=none&db=2&tls_bad=1", &c),
                     RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "unknown parameter \"tls_bad\""));
    /* a whole url: %-decoded path, db and verification mode */
    snprintf(url, sizeof(url), "rediss://localhost:%d/3?tls_ca=%s&tls_verify=ca", tls_port,
             path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    lock_cycle(c, "tls:params");
    rlock_client_close(c);
}

/* The config's fields, a url parameter over one of them. */
static void test_config_fields(void **state) {
    (void)state;
    rlock_config cfg;
    rlock_client *c = NULL;
    char url[256];
    rlock_config_init(&cfg);
    assert_int_equal(cfg.tls_verify, RLOCK_TLS_VERIFY_FULL);
    snprintf(url, sizeof(url), "rediss://localhost:%d", tls_port);
    cfg.url = url;
    cfg.tls_ca = path("ca.pem");
    cfg.tls_server_name = "localhost";
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_OK);
    lock_cycle(c, "tls:config");
    rlock_client_close(c);
    /* the url's tls_ca wins over the field's */
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("another.pem"));
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_EIO);
    cfg.tls_verify = 7;
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "tls_verify 7"));
}

/* ---- locks over TLS ----------------------------------------------------------- */

static void test_lock_by_name_and_ip(void **state) {
    (void)state;
    rlock_client *c = NULL;
    char url[1024];
    snprintf(url, sizeof(url), "rediss://localhost:%d/2?tls_ca=%s", tls_port, path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    lock_cycle(c, "tls:name");
    rlock_client_close(c);
    /* an IP literal: checked against the certificate's IP SANs (no SNI) */
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d?tls_ca=%s", tls_port, path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    lock_cycle(c, "tls:ip");
    rlock_client_close(c);
}

typedef struct waiter_arg {
    rlock *lock;
    long long wait_ms; /* 0: 10 s */
    atomic_llong got_ms;
} waiter_arg;

static void *waiter(void *p) {
    waiter_arg *a = p;
    if (rlock_try_lock(a->lock, a->wait_ms > 0 ? a->wait_ms : 10000, 5000) == RLOCK_OK) {
        atomic_store(&a->got_ms, now_ms());
        rlock_unlock(a->lock);
    }
    return NULL;
}

/*
 * holder takes its lock (a long lease: no expiry), waiter_lock's thread waits
 * for it, and holder's unlock wakes it through its message (pub/sub over TLS),
 * well before any lease would end.
 */
static void assert_woken(rlock *holder, rlock *waiter_lock) {
    pthread_t t;
    assert_int_equal(rlock_try_lock(holder, 0, 30000), RLOCK_OK);
    waiter_arg w = {.lock = waiter_lock};
    atomic_init(&w.got_ms, 0);
    assert_int_equal(pthread_create(&t, NULL, waiter, &w), 0);
    sleep_ms(300);
    long long unlocked = now_ms();
    assert_int_equal(rlock_unlock(holder), RLOCK_OK);
    pthread_join(t, NULL);
    assert_true(atomic_load(&w.got_ms) > 0);
    assert_true(atomic_load(&w.got_ms) - unlocked < 1500); /* woken, not the lease's expiry */
}

/* A second client's waiter is woken by the unlock's message (pub/sub over TLS). */
static void test_waiter_woken(void **state) {
    (void)state;
    rlock_client *a = NULL, *b = NULL;
    rlock *la = NULL, *lb = NULL;
    char url[1024];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    assert_int_equal(open_url(url, &a), RLOCK_OK);
    assert_int_equal(open_url(url, &b), RLOCK_OK);
    assert_int_equal(rlock_get(a, "tls:wake", &la), RLOCK_OK);
    assert_int_equal(rlock_get(b, "tls:wake", &lb), RLOCK_OK);
    assert_woken(la, lb);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* The watchdog renews over TLS: held past three leases. */
static void test_watchdog(void **state) {
    (void)state;
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock *l = NULL;
    rlock_stats st = {.struct_size = sizeof(st)};
    char url[1024];
    long long ttl = 0;
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = 300;
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_OK);
    assert_int_equal(rlock_get(c, "tls:watchdog", &l), RLOCK_OK);
    assert_int_equal(rlock_lock(l), RLOCK_OK);
    sleep_ms(1000);
    assert_int_equal(rlock_is_held_by_current_thread(l), 1);
    assert_int_equal(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    assert_true(ttl > 0);
    assert_int_equal(rlock_client_stats(c, &st), RLOCK_OK);
    assert_true(st.renewals >= 2);
    assert_int_equal(st.renewal_failures, 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_close(c);
}

/* ---- failures, in words -------------------------------------------------------- */

static void test_unknown_ca(void **state) {
    (void)state;
    char url[1024];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("another.pem"));
    expect_refused(url, RLOCK_EIO, "unknown CA", "set tls_ca");
    /* the system's trust store does not know our CA either */
    snprintf(url, sizeof(url), "rediss://localhost:%d", tls_port);
    expect_refused(url, RLOCK_EIO, "unknown CA", NULL);
}

static void test_host_name_mismatch(void **state) {
    (void)state;
    rlock_client *c = NULL;
    char url[1024];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", wrong_port, path("ca.pem"));
    expect_refused(url, RLOCK_EIO, "host name mismatch: localhost vs wrong.example", NULL);
    /* an IP against a certificate without it */
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d?tls_ca=%s", wrong_port, path("ca.pem"));
    expect_refused(url, RLOCK_EIO, "host name mismatch: 127.0.0.1 vs wrong.example", NULL);
    /* the name it has, given */
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d?tls_ca=%s&tls_server_name=wrong.example",
             wrong_port, path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    rlock_client_close(c);
    /* ca: the chain only */
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s&tls_verify=ca", wrong_port,
             path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    lock_cycle(c, "tls:verify-ca");
    rlock_client_close(c);
}

static void test_expired(void **state) {
    (void)state;
    rlock_client *c = NULL;
    char url[1024];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", expired_port, path("ca.pem"));
    expect_refused(url, RLOCK_EIO, "certificate has expired", NULL);
    /* ca still checks the dates */
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s&tls_verify=ca", expired_port,
             path("ca.pem"));
    expect_refused(url, RLOCK_EIO, "certificate has expired", NULL);
    /* none: nothing (unsafe) */
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_verify=none", expired_port);
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    lock_cycle(c, "tls:verify-none");
    rlock_client_close(c);
}

static void test_plaintext_behind_rediss(void **state) {
    (void)state;
    char url[1024];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", plain_port, path("ca.pem"));
    expect_refused(url, RLOCK_EIO, "did not answer the TLS handshake", "plaintext port");
}

static void test_tls_behind_redis(void **state) {
    (void)state;
    char url[256];
    snprintf(url, sizeof(url), "redis://localhost:%d", tls_port);
    expect_refused(url, RLOCK_EIO, "is it a TLS port? use rediss://", NULL);
}

static void test_mutual_tls(void **state) {
    (void)state;
    rlock_client *c = NULL;
    char url[2048];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", mtls_port, path("ca.pem"));
    expect_refused(url, RLOCK_EAUTH, "server requires a client certificate", NULL);
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s&tls_cert=%s&tls_key=%s",
             mtls_port, path("ca.pem"), path("client.pem"), path("client.key"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    lock_cycle(c, "tls:mutual");
    rlock_client_close(c);
    /* a certificate of a CA the server does not trust */
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s&tls_cert=%s&tls_key=%s",
             mtls_port, path("ca.pem"), path("another.pem"), path("another.key"));
    expect_refused(url, RLOCK_EAUTH, "server refused the client certificate", NULL);
    /* a file that is not there */
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("nothere.pem"));
    expect_refused(url, RLOCK_EIO, "cannot load tls_ca", "nothere.pem");
}

/* ---- rotation, credentials, fork ------------------------------------------------ */

static void copy_file(const char *from, const char *to) {
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s.tmp' && mv '%s.tmp' '%s'", from, to, to, to);
    assert_int_equal(system(cmd), 0);
}

/* A CA file replaced on disk is read by the next connection: no reopen needed. */
static void test_rotation(void **state) {
    (void)state;
    rlock_client *c = NULL;
    char url[1024];
    char rotating[520];
    snprintf(rotating, sizeof(rotating), "%s", path("rotating-ca.pem"));
    copy_file(path("another.pem"), rotating);
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, rotating);
    expect_refused(url, RLOCK_EIO, "unknown CA", NULL);
    copy_file(path("ca.pem"), rotating);
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    lock_cycle(c, "tls:rotation");
    rlock_client_close(c);
}

/*
 * The same client, its connections cut by the server: the reconnect
 * handshakes with the CA file as it is now on disk (wrong: refused, in
 * words; right again: works), no reopen.
 */
static void test_rotation_same_client(void **state) {
    (void)state;
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock *l = NULL;
    char url[1024], cmd[2048];
    char rotating[520];
    snprintf(rotating, sizeof(rotating), "%s", path("rotating2-ca.pem")); /* path's buffers turn */
    copy_file(path("ca.pem"), rotating);
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, rotating);
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.connect_timeout_ms = 2000;
    cfg.retry_attempts = 0;
    cfg.register_client = 0;
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_OK);
    assert_int_equal(rlock_get(c, "tls:rotation2", &l), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    copy_file(path("another.pem"), rotating);
    snprintf(cmd, sizeof(cmd),
             "redis-cli --tls --cacert %s -p %d CLIENT KILL TYPE normal >/dev/null 2>&1",
             path("ca.pem"), tls_port);
    assert_int_equal(system(cmd), 0);
    sleep_ms(100);
    /* A command may first meet a pooled connection the kill closed (retry_attempts 0: it
     * fails "Server closed the connection"); the next ones must connect anew. */
    int st = RLOCK_OK, refused = 0;
    for (int i = 0; i < 10 && !refused; i++) {
        if ((st = rlock_try_lock(l, 0, 10000)) == RLOCK_OK)
            assert_int_equal(rlock_unlock(l), RLOCK_OK);
        refused = st != RLOCK_OK && strstr(rlock_last_error(), "unknown CA") != NULL;
    }
    if (st != RLOCK_EIO || strstr(rlock_last_error(), "unknown CA") == NULL)
        fprintf(stderr, "after the CA swap: %s \"%s\"\n", rlock_status_name(st),
                rlock_last_error());
    assert_int_equal(st, RLOCK_EIO);
    assert_non_null(strstr(rlock_last_error(), "unknown CA"));
    copy_file(path("ca.pem"), rotating);
    long long until = now_ms() + 3000;
    while ((st = rlock_try_lock(l, 0, 10000)) != RLOCK_OK && now_ms() < until)
        sleep_ms(50);
    if (st != RLOCK_OK)
        fprintf(stderr, "after the CA came back: %s \"%s\"\n", rlock_status_name(st),
                rlock_last_error());
    assert_int_equal(st, RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_close(c);
}

/* A server that accepts TCP and never answers: the handshake ends at connect_timeout_ms. */
static void test_handshake_bounded(void **state) {
    (void)state;
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    rlock_config cfg;
    rlock_client *c = NULL;
    char url[256];
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(listener >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(listener, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(listener, 8), 0); /* never accepted: the kernel completes TCP */
    assert_int_equal(getsockname(listener, (struct sockaddr *)&a, &len), 0);
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d?tls_verify=none", ntohs(a.sin_port));
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.connect_timeout_ms = 400;
    long long t0 = now_ms();
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_EIO);
    long long took = now_ms() - t0;
    assert_non_null(strstr(rlock_last_error(), "no answer in time"));
    assert_true(took >= 350 && took < 2000);
    close(listener);
}

static atomic_int cred_calls;

static int credentials(void *arg, char *user, size_t user_size, char *password,
                       size_t password_size) {
    const char *pw = arg;
    atomic_fetch_add(&cred_calls, 1);
    snprintf(user, user_size, "alice");
    snprintf(password, password_size, "%s", pw);
    return 0;
}

static void test_credentials_callback(void **state) {
    (void)state;
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock_stats st = {.struct_size = sizeof(st)};
    char url[1024];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.credentials = credentials;
    static char good[] = "secret", bad[] = "expired-token";
    cfg.credentials_arg = good;
    atomic_store(&cred_calls, 0);
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_OK);
    lock_cycle(c, "tls:credentials");
    assert_int_equal(rlock_client_stats(c, &st), RLOCK_OK);
    assert_true(st.connections >= 1);
    /* asked for every connection the client made, no more */
    assert_int_equal((unsigned long long)atomic_load(&cred_calls), st.connections);
    rlock_client_close(c);
    cfg.credentials_arg = bad;
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_EAUTH);
    assert_non_null(strstr(rlock_last_error(), "alice"));
}

/* A child of fork gets RLOCK_ECLOSED; the parent's TLS connections go on. */
static void test_fork(void **state) {
    (void)state;
    rlock_client *c = NULL;
    rlock *l = NULL;
    char url[1024];
    int wstatus = 0;
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    assert_int_equal(rlock_get(c, "tls:fork", &l), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    pid_t pid = fork();
    if (pid == 0) {
        int r = rlock_unlock(l);
        rlock_free(l);
        rlock_client_close(c);
        _exit(r == RLOCK_ECLOSED ? 0 : 1);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    assert_int_equal(rlock_is_held_by_current_thread(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    lock_cycle(c, "tls:fork2");
    rlock_free(l);
    rlock_client_close(c);
}

/* Runs cmd with popen: its exit status; what it printed (up to size - 1 bytes) in out. */
static int run_cmd(const char *cmd, char *out, size_t size) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, size - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* rlockctl (build/rlockctl, beside build/test/) with a command; its exit status, output in out. */
static int rlockctl(const char *args, char *out, size_t size) {
    char exe[512], cmd[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    for (int up = 0; up < 2; up++)
        *strrchr(exe, '/') = '\0';
    snprintf(cmd, sizeof(cmd), "%s/rlockctl %s 2>&1", exe, args);
    return run_cmd(cmd, out, size);
}

/* rlockctl takes the same url and parameters. */
static void test_rlockctl(void **state) {
    (void)state;
    rlock_client *c = NULL;
    rlock *l = NULL;
    char url[1024], args[1400], out[8192];
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    assert_int_equal(rlock_get(c, "tls:ctl", &l), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, 30000), RLOCK_OK);
    snprintf(args, sizeof(args), "--url '%s' show tls:ctl", url);
    int st = rlockctl(args, out, sizeof(out));
    if (st != 0 || strstr(out, "tls:ctl") == NULL)
        fprintf(stderr, "rlockctl %s: %d\n%s\n", args, st, out);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, rlock_client_id(c)));
    snprintf(args, sizeof(args), "--url 'rediss://localhost:%d?tls_ca=%s' show tls:ctl", tls_port,
             path("another.pem"));
    assert_int_not_equal(rlockctl(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "unknown CA"));
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_close(c);
}

/*
 * Sentinel over TLS: rediss-sentinel:// speaks TLS to the sentinel (verified
 * as localhost) and to the master it names (127.0.0.1: the IP SAN), or, with
 * tls_server_name, verifies both by that name.
 */
static void test_sentinel(void **state) {
    (void)state;
    rlock_client *a = NULL, *b = NULL;
    rlock *la = NULL, *lb = NULL;
    char url[1024];
    int sport = env_port("RLOCK_TLS_SENTINEL_PORT");
    assert_true(sport > 0);
    snprintf(url, sizeof(url), "rediss-sentinel://localhost:%d/mymaster?tls_ca=%s", sport,
             path("ca.pem"));
    assert_int_equal(open_url(url, &a), RLOCK_OK);
    lock_cycle(a, "tls:sentinel");
    /* a waiter of one client woken by the other's unlock, through the sentinel's master */
    assert_int_equal(rlock_get(a, "tls:sentinel-wake", &la), RLOCK_OK);
    snprintf(url, sizeof(url),
             "rediss-sentinel://127.0.0.1:%d/mymaster?tls_ca=%s&tls_server_name=localhost", sport,
             path("ca.pem"));
    assert_int_equal(open_url(url, &b), RLOCK_OK);
    assert_int_equal(rlock_get(b, "tls:sentinel-wake", &lb), RLOCK_OK);
    assert_woken(la, lb);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    /* the sentinel's certificate is checked too */
    snprintf(url, sizeof(url), "rediss-sentinel://localhost:%d/mymaster?tls_ca=%s", sport,
             path("another.pem"));
    expect_refused(url, RLOCK_EIO, "unknown CA", NULL);
}

/* redis-cli --tls to port with args; its output (raw, one reply element a line) in out. */
static int cli(int port, const char *args, char *out, size_t size) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "redis-cli --tls --cacert %s -p %d %s 2>&1", path("ca.pem"), port,
             args);
    return run_cmd(cmd, out, size);
}

/* cli, expecting "OK". */
static void cli_ok(int port, const char *args) {
    char out[512];
    int st = cli(port, args, out, sizeof(out));
    if (st != 0 || strncmp(out, "OK", 2) != 0)
        fprintf(stderr, "redis-cli -p %d %s: %d %s\n", port, args, st, out);
    assert_int_equal(st, 0);
    assert_memory_equal(out, "OK", 2);
}

static long long cli_int(int port, const char *args) {
    char out[512];
    assert_int_equal(cli(port, args, out, sizeof(out)), 0);
    return atoll(out);
}

/* Waits (20 s at most) until the client has followed a master switch past `switches`. */
static void wait_switch(rlock_client *c, unsigned long long switches) {
    rlock_stats st = {.struct_size = sizeof(st)};
    for (long long until = now_ms() + 20000; now_ms() < until; sleep_ms(100)) {
        assert_int_equal(rlock_client_stats(c, &st), RLOCK_OK);
        if (st.master_switches > switches)
            return;
    }
    fail_msg("no master switch within 20 s (%llu)", st.master_switches);
}

/*
 * A failover over TLS: the sentinel promotes failmaster's replica (SENTINEL
 * FAILOVER); the client follows it (its announced 127.0.0.1 verified by the
 * IP SAN, reached over TLS) and locks there.
 */
static void test_sentinel_failover(void **state) {
    (void)state;
    rlock_config cfg;
    rlock_client *c = NULL;
    char url[1024], out[256];
    int sport = env_port("RLOCK_TLS_SENTINEL_PORT");
    snprintf(url, sizeof(url), "rediss-sentinel://localhost:%d/failmaster?tls_ca=%s", sport,
             path("ca.pem"));
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.retry_attempts = 40;
    cfg.retry_interval_ms = 250;
    assert_int_equal(rlock_client_open(&cfg, &c), RLOCK_OK);
    lock_cycle(c, "tls:failover-before");
    /* the sentinel may not have seen the replica in sync yet: NOGOODSLAVE, asked again */
    int done = 0;
    for (long long until = now_ms() + 20000; !done && now_ms() < until;) {
        done = cli(sport, "SENTINEL FAILOVER failmaster", out, sizeof(out)) == 0 &&
               strncmp(out, "OK", 2) == 0;
        if (!done)
            sleep_ms(250);
    }
    assert_true(done);
    wait_switch(c, 0);
    lock_cycle(c, "tls:failover-after");
    rlock_client_close(c);
}

/*
 * A master killed under a TLS client: failmaster's master (the promoted
 * replica, after the test above) gets SIGKILL once the other server, its
 * replica, has the hold a watchdog lock took there. The sentinel finds it
 * down (2 s) and promotes that replica; the client follows over TLS, and
 * its hold -- renewed on the new master -- is still its own and unlocks.
 */
static void test_sentinel_killed_master(void **state) {
    (void)state;
    rlock_client *c = NULL;
    rlock_stats st = {.struct_size = sizeof(st)};
    rlock *l = NULL;
    char url[1024], out[2048], servers[256];
    int sport = env_port("RLOCK_TLS_SENTINEL_PORT"), port[2] = {0, 0}, pid[2] = {0, 0};
    const char *fail_servers = getenv("RLOCK_TLS_FAIL_SERVERS");
    assert_non_null(fail_servers);
    snprintf(servers, sizeof(servers), "%s", fail_servers);
    assert_int_equal(sscanf(servers, "%d:%d %d:%d", &port[0], &pid[0], &port[1], &pid[1]), 4);
    snprintf(url, sizeof(url), "rediss-sentinel://localhost:%d/failmaster?tls_ca=%s", sport,
             path("ca.pem"));
    /* The failover above settled: the master the sentinel names, and its replica (the old
     * master, reconfigured) in sync with it. */
    int master = -1;
    for (long long until = now_ms() + 30000; master < 0 && now_ms() < until; sleep_ms(200)) {
        assert_int_equal(cli(sport, "SENTINEL get-master-addr-by-name failmaster", out,
                             sizeof(out)), 0);
        const char *nl = strchr(out, '\n');
        int named = nl != NULL ? atoi(nl + 1) : 0;
        int m = named == port[0] ? 0 : named == port[1] ? 1 : -1;
        if (m >= 0 && cli(port[1 - m], "INFO replication", out, sizeof(out)) == 0 &&
            strstr(out, "master_link_status:up") != NULL &&
            strstr(out, "master_port:") != NULL && atoi(strstr(out, "master_port:") + 12) == named)
            master = m;
    }
    assert_true(master >= 0);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = 3000;
    int rc = rlock_client_open(&cfg, &c);
    if (rc == RLOCK_OK && (rc = rlock_get(c, "tls:killed-master", &l)) == RLOCK_OK)
        rc = rlock_lock(l);
    if (rc != RLOCK_OK)
        print_message("      open, get, lock: %s: %s\n", rlock_strerror(rc), rlock_last_error());
    assert_int_equal(rc, RLOCK_OK);
    int replica_has_it = 0;
    for (long long until = now_ms() + 20000; !replica_has_it && now_ms() < until; sleep_ms(100))
        replica_has_it = cli_int(port[1 - master], "EXISTS tls:killed-master") == 1;
    assert_true(replica_has_it);
    assert_int_equal(rlock_client_stats(c, &st), RLOCK_OK);
    print_message("      SIGKILL to the master on :%d (pid %d); its replica on :%d has the hold\n",
                  port[master], pid[master], port[1 - master]);
    assert_int_equal(kill(pid[master], SIGKILL), 0);
    long long killed_ms = now_ms();
    wait_switch(c, st.master_switches);
    print_message("      the client followed the new master %lld ms after the kill\n",
                  now_ms() - killed_ms);
    /* Renewed there (the 3 s lease passes), still its own, then unlocked. */
    sleep_ms(3500);
    assert_int_equal(rlock_is_held_by_current_thread(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    lock_cycle(c, "tls:killed-master-after");
    rlock_free(l);
    rlock_client_close(c);
}

/*
 * Cluster over TLS: one seed; the other masters are those CLUSTER SLOTS
 * names (127.0.0.1: the IP SAN). Names spread over every master; a waiter
 * woken by another client's unlock.
 */
static void test_cluster(void **state) {
    (void)state;
    rlock_client *a = NULL, *b = NULL;
    rlock *la = NULL, *lb = NULL;
    char url[1024], name[64];
    int cport = cluster_url(url, sizeof(url));
    if (cport == 0) {
        skip(); /* RLOCK_TLS_NO_CLUSTER */
        return;
    }
    assert_int_equal(open_url(url, &a), RLOCK_OK);
    assert_int_equal(open_url(url, &b), RLOCK_OK);
    for (int i = 0; i < 30; i++) { /* 30 names: every master's slots, all but surely */
        snprintf(name, sizeof(name), "tls:cluster:%d", i);
        lock_cycle(i % 2 ? a : b, name);
    }
    assert_int_equal(rlock_get(a, "tls:cluster-wake", &la), RLOCK_OK);
    assert_int_equal(rlock_get(b, "tls:cluster-wake", &lb), RLOCK_OK);
    assert_woken(la, lb);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    /* the announced 127.0.0.1 checked by name instead */
    snprintf(url, sizeof(url), "rediss-cluster://127.0.0.1:%d?tls_ca=%s&tls_server_name=localhost",
             cport, path("ca.pem"));
    assert_int_equal(open_url(url, &a), RLOCK_OK);
    lock_cycle(a, "tls:cluster-by-name");
    rlock_client_close(a);
    snprintf(url, sizeof(url), "rediss-cluster://localhost:%d?tls_ca=%s", cport,
             path("another.pem"));
    expect_refused(url, RLOCK_EIO, "unknown CA", NULL);
}

/* ---- hand-off to another process ------------------------------------------------ */

#define HANDOFF_ROUNDS 10

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process of the machine */
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * The other process (this binary run again with --handoff-child, a fresh
 * exec): for each line on stdin it says "ready", waits for the lock (10 s),
 * says "got <status> <monotonic us at acquisition> <us waited>", unlocks.
 * Ends at end of input.
 */
static int handoff_child(void) {
    rlock_client *c = NULL;
    rlock *l = NULL;
    char url[1024], line[64];
    dir = getenv("RLOCK_TLS_DIR");
    tls_port = env_port("RLOCK_TLS_PORT");
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    if (dir == NULL || open_url(url, &c) != RLOCK_OK || rlock_get(c, "tls:handoff", &l) != RLOCK_OK)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof(line), stdin) != NULL) {
        printf("ready\n");
        long long t0 = now_us();
        int st = rlock_try_lock(l, 10000, 30000);
        long long t1 = now_us();
        printf("got %d %lld %lld\n", st, t1, t1 - t0);
        if (st == RLOCK_OK)
            rlock_unlock(l);
    }
    rlock_free(l);
    rlock_client_close(c);
    return 0;
}

static int cmp_ll(const void *x, const void *y) {
    long long a = *(const long long *)x, b = *(const long long *)y;
    return (a > b) - (a < b);
}

/*
 * A hand-off to another process over TLS: this process holds the lock (30 s
 * lease), the child waits for it (subscribed over TLS), this one unlocks;
 * the child's acquisition time minus the unlock's start is the hand-off.
 * Ten rounds; p50 and max printed, each under 1.5 s (woken, not the lease).
 */
static void test_handoff_process(void **state) {
    (void)state;
    rlock_client *c = NULL;
    rlock *l = NULL;
    char url[1024], exe[512], line[128];
    int to_child[2], from_child[2], wstatus = 0;
    long long lat[HANDOFF_ROUNDS];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    assert_int_equal(rlock_get(c, "tls:handoff", &l), RLOCK_OK);
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    pid_t pid = fork();
    if (pid == 0) { /* exec at once: the child shares nothing of this process's clients */
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[0]);
        close(to_child[1]);
        close(from_child[0]);
        close(from_child[1]);
        execl(exe, exe, "--handoff-child", (char *)NULL);
        _exit(127);
    }
    assert_true(pid > 0);
    close(to_child[0]);
    close(from_child[1]);
    FILE *in = fdopen(from_child[0], "r");
    FILE *out = fdopen(to_child[1], "w");
    assert_non_null(in);
    assert_non_null(out);
    for (int i = 0; i < HANDOFF_ROUNDS; i++) {
        int st = -100;
        long long got = 0, waited = 0;
        assert_int_equal(rlock_try_lock(l, 10000, 30000), RLOCK_OK); /* the child let it go */
        fputs("go\n", out);
        fflush(out);
        assert_non_null(fgets(line, sizeof(line), in));
        assert_string_equal(line, "ready\n");
        sleep_ms(150); /* the child subscribes and waits */
        long long unlocked = now_us();
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        assert_non_null(fgets(line, sizeof(line), in));
        assert_int_equal(sscanf(line, "got %d %lld %lld", &st, &got, &waited), 3);
        assert_int_equal(st, RLOCK_OK);
        assert_true(waited >= 100000); /* it waited for the unlock */
        lat[i] = got - unlocked;
        assert_true(lat[i] > 0 && lat[i] < 1500000);
    }
    fclose(out); /* end of input: the child ends */
    fclose(in);
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    qsort(lat, HANDOFF_ROUNDS, sizeof(lat[0]), cmp_ll);
    fprintf(stderr,
            "tls hand-off to another process (unlock to the other's acquisition, %d rounds): "
            "p50 %.3f ms, min %.3f ms, max %.3f ms\n",
            HANDOFF_ROUNDS, lat[HANDOFF_ROUNDS / 2] / 1000.0, lat[0] / 1000.0,
            lat[HANDOFF_ROUNDS - 1] / 1000.0);
    rlock_free(l);
    rlock_client_close(c);
}

/* ---- cluster slot migration over TLS (redis-cli --tls pokes the nodes) ---------- */

typedef struct tls_node {
    char id[48];
    int port;
    int lo[8], hi[8], ranges;
} tls_node;

/* The cluster's masters, from CLUSTER NODES on the seed; returns how many (<= 3). */
static int cluster_masters(int seed, tls_node *n) {
    static char out[16384];
    int count = 0;
    assert_int_equal(cli(seed, "CLUSTER NODES", out, sizeof(out)), 0);
    for (char *save = NULL, *line = strtok_r(out, "\n", &save); line && count < 3;
         line = strtok_r(NULL, "\n", &save)) {
        char id[48], addr[128], flags[64];
        int off = 0;
        if (sscanf(line, "%47s %127s %63s %*s %*s %*s %*s %*s%n", id, addr, flags, &off) < 3 ||
            strstr(flags, "master") == NULL)
            continue;
        tls_node *m = &n[count++];
        memset(m, 0, sizeof(*m));
        snprintf(m->id, sizeof(m->id), "%s", id);
        m->port = atoi(strchr(addr, ':') + 1);
        for (char *s2 = NULL, *r = strtok_r(line + off, " ", &s2); r && m->ranges < 8;
             r = strtok_r(NULL, " ", &s2)) {
            if (*r == '[')
                continue;
            m->lo[m->ranges] = atoi(r);
            m->hi[m->ranges] = strchr(r, '-') ? atoi(strchr(r, '-') + 1) : m->lo[m->ranges];
            m->ranges++;
        }
    }
    return count;
}

static int node_has(const tls_node *m, int slot) {
    for (int i = 0; i < m->ranges; i++)
        if (slot >= m->lo[i] && slot <= m->hi[i])
            return 1;
    return 0;
}

typedef struct tls_migration {
    tls_node nodes[3];
    int slot, src, dst; /* indexes into nodes */
} tls_migration;

/* Finds name's slot and master, picks another master. */
static void migration_find(tls_migration *g, int seed, const char *name) {
    char args[512];
    assert_int_equal(cluster_masters(seed, g->nodes), 3);
    snprintf(args, sizeof(args), "CLUSTER KEYSLOT '%s'", name);
    g->slot = (int)cli_int(seed, args);
    g->src = -1;
    for (int i = 0; i < 3; i++)
        if (node_has(&g->nodes[i], g->slot))
            g->src = i;
    assert_true(g->src >= 0);
    g->dst = (g->src + 1) % 3;
}

/* Sets the slot IMPORTING on the target, MIGRATING on the source. */
static void migration_start(const tls_migration *g) {
    char args[512];
    snprintf(args, sizeof(args), "CLUSTER SETSLOT %d IMPORTING %s", g->slot, g->nodes[g->src].id);
    cli_ok(g->nodes[g->dst].port, args);
    snprintf(args, sizeof(args), "CLUSTER SETSLOT %d MIGRATING %s", g->slot, g->nodes[g->dst].id);
    cli_ok(g->nodes[g->src].port, args);
}

static void migration_begin(tls_migration *g, int seed, const char *name) {
    migration_find(g, seed, name);
    migration_start(g);
}

/* MIGRATEs key from the source to the target (node to node over TLS: tls-cluster yes). */
static void migration_move(const tls_migration *g, const char *key) {
    char args[512];
    snprintf(args, sizeof(args), "MIGRATE 127.0.0.1 %d '' 0 5000 KEYS '%s'",
             g->nodes[g->dst].port, key);
    cli_ok(g->nodes[g->src].port, args);
}

/* Moves the keys left in the slot, then SETSLOT NODE on every master (target first);
 * returns how many keys it moved. */
static int migration_finish(const tls_migration *g) {
    char args[256], out[8192];
    int moved = 0;
    snprintf(args, sizeof(args), "CLUSTER GETKEYSINSLOT %d 100", g->slot);
    assert_int_equal(cli(g->nodes[g->src].port, args, out, sizeof(out)), 0);
    for (char *save = NULL, *k = strtok_r(out, "\n", &save); k; k = strtok_r(NULL, "\n", &save)) {
        migration_move(g, k);
        moved++;
    }
    snprintf(args, sizeof(args), "CLUSTER SETSLOT %d NODE %s", g->slot, g->nodes[g->dst].id);
    cli_ok(g->nodes[g->dst].port, args);
    cli_ok(g->nodes[g->src].port, args);
    cli_ok(g->nodes[3 - g->src - g->dst].port, args);
    return moved;
}

static long long keys_in_slot(int port, int slot) {
    char args[128];
    snprintf(args, sizeof(args), "CLUSTER COUNTKEYSINSLOT %d", slot);
    return cli_int(port, args);
}

static long long pttl_on(int port, const char *key) {
    char args[512];
    snprintf(args, sizeof(args), "PTTL '%s'", key);
    return cli_int(port, args);
}

/*
 * After a's watchdog lock la, waited for by w's thread t, moved to the master
 * on port (a migration, a failover): only renewals there keep it through
 * wait_ms, longer than its lease (st0: a's statistics before the move); then
 * its unlock (MOVED followed, or the new map) wakes the waiter, which gets it.
 */
static void kept_then_handed_off(const char *what, rlock_client *a, rlock *la,
                                 const rlock_stats *st0, int port, const char *name,
                                 long long wait_ms, waiter_arg *w, pthread_t t) {
    rlock_stats st1 = {.struct_size = sizeof(st1)};
    long long before = pttl_on(port, name);
    sleep_ms(wait_ms);
    long long after = pttl_on(port, name);
    assert_int_equal(rlock_client_stats(a, &st1), RLOCK_OK);
    fprintf(stderr,
            "%s: PTTL on :%d %lld ms, %lld ms later %lld ms; renewals %llu -> %llu, failures "
            "%llu, losses %llu\n",
            what, port, before, wait_ms, after, st0->renewals, st1.renewals,
            st1.renewal_failures, st1.losses);
    assert_true(before > 0 && after > 0);
    assert_true(st1.renewals >= st0->renewals + 3);
    assert_int_equal(st1.losses, 0);
    assert_int_equal(rlock_is_held_by_current_thread(la), 1);
    assert_int_equal(atomic_load(&w->got_ms), 0); /* the waiter still waits */
    long long unlocked = now_ms();
    assert_int_equal(rlock_unlock(la), RLOCK_OK);
    pthread_join(t, NULL);
    long long woke = atomic_load(&w->got_ms) - unlocked;
    fprintf(stderr, "%s: the waiter got the lock %lld ms after the unlock\n", what, woke);
    assert_true(atomic_load(&w->got_ms) > 0 && woke < 1500);
}

/*
 * A watchdog lock (1.5 s lease) held by one client, a waiter of another,
 * while the lock's slot migrates to another master over TLS (MIGRATE node to
 * node over TLS, SETSLOT NODE on all). Then: the key is on the target and
 * renewed there past a lease (its PTTL), the unlock follows MOVED over TLS,
 * the waiter is woken and gets the lock; nothing is lost.
 */
static void test_cluster_migration(void **state) {
    (void)state;
    rlock_client *a = NULL, *b = NULL;
    rlock *la = NULL, *lb = NULL;
    rlock_stats st0 = {.struct_size = sizeof(st0)};
    char url[1024];
    const char *name = "tls:migrate";
    tls_migration g;
    pthread_t t;
    int cport = cluster_url(url, sizeof(url));
    if (cport == 0) {
        skip(); /* RLOCK_TLS_NO_CLUSTER */
        return;
    }
    assert_int_equal(open_watchdog(url, 1500, &a), RLOCK_OK);
    assert_int_equal(open_url(url, &b), RLOCK_OK);
    assert_int_equal(rlock_get(a, name, &la), RLOCK_OK);
    assert_int_equal(rlock_get(b, name, &lb), RLOCK_OK);
    assert_int_equal(rlock_lock(la), RLOCK_OK); /* the watchdog's lease */
    waiter_arg w = {.lock = lb};
    atomic_init(&w.got_ms, 0);
    assert_int_equal(pthread_create(&t, NULL, waiter, &w), 0);
    sleep_ms(300);
    assert_int_equal(rlock_client_stats(a, &st0), RLOCK_OK);
    long long t0 = now_ms();
    migration_begin(&g, cport, name);
    migration_move(&g, name);
    int rest = migration_finish(&g);
    long long took = now_ms() - t0;
    int src = g.nodes[g.src].port, dst = g.nodes[g.dst].port;
    fprintf(stderr, "tls migration: slot %d %d -> %d in %lld ms (%d key(s) left after the lock's)\n",
            g.slot, src, dst, took, rest);
    assert_int_equal(keys_in_slot(src, g.slot), 0);
    /* past the 1.5 s lease: only renewals on the target keep it */
    kept_then_handed_off("tls migration", a, la, &st0, dst, name, 2000, &w, t);
    assert_int_equal(pttl_on(dst, name), -2); /* the waiter unlocked it too */
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
}

/*
 * A read-write lock whose keys a migration split between two masters: two
 * readers (a watchdog one of client a, one of client b with a 60 s lease),
 * the slot MIGRATING, only the hash moved (each reader's timeout key stays
 * on the source). In that state over TLS: a writer (a third client's: a
 * reader's own writer is EDEADLK) is busy, b's reader leaves and comes back
 * (the library first MIGRATEs the keys left on the source, which reaches
 * the target over TLS), a's is renewed past its lease; then the migration
 * ends, both leave and the writer gets the lock.
 */
static void test_cluster_migration_split(void **state) {
    (void)state;
    rlock_client *a = NULL, *b = NULL, *c = NULL;
    rlock *ra = NULL, *wa = NULL, *rb = NULL, *wb = NULL, *rc = NULL, *wc = NULL;
    rlock_stats st = {.struct_size = sizeof(st)};
    char url[1024];
    const char *name = "tls:migrate-rw";
    tls_migration g;
    int cport = cluster_url(url, sizeof(url));
    if (cport == 0) {
        skip(); /* RLOCK_TLS_NO_CLUSTER */
        return;
    }
    assert_int_equal(open_watchdog(url, 1500, &a), RLOCK_OK);
    assert_int_equal(open_url(url, &b), RLOCK_OK);
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    assert_int_equal(rlock_get_rw(a, name, &ra, &wa), RLOCK_OK);
    assert_int_equal(rlock_get_rw(b, name, &rb, &wb), RLOCK_OK);
    assert_int_equal(rlock_get_rw(c, name, &rc, &wc), RLOCK_OK);
    assert_int_equal(rlock_lock(ra), RLOCK_OK);
    assert_int_equal(rlock_try_lock(rb, 0, 60000), RLOCK_OK);
    migration_begin(&g, cport, name);
    int src = g.nodes[g.src].port, dst = g.nodes[g.dst].port;
    long long keys = keys_in_slot(src, g.slot);
    /* Right after a renewal of a's (every 500 ms): its next one, which would find the split
     * and end it (MIGRATE the rest), comes after b's calls below. */
    assert_int_equal(rlock_client_stats(a, &st), RLOCK_OK);
    unsigned long long renewed = st.renewals;
    for (long long until = now_ms() + 3000; st.renewals == renewed && now_ms() < until;) {
        sleep_ms(2);
        assert_int_equal(rlock_client_stats(a, &st), RLOCK_OK);
    }
    assert_true(st.renewals > renewed);
    migration_move(&g, name); /* the hash alone */
    long long on_src = keys_in_slot(src, g.slot), on_dst = keys_in_slot(dst, g.slot);
    fprintf(stderr, "tls split migration: slot %d %d -> %d, %lld key(s); split: %lld left, %lld "
                    "moved\n",
            g.slot, src, dst, keys, on_src, on_dst);
    assert_true(keys >= 3); /* the hash and two timeout keys */
    assert_true(on_src >= 2);
    assert_int_equal(on_dst, 1);
    long long t0 = now_ms();
    assert_int_equal(rlock_try_lock(wc, 0, 10000), RLOCK_BUSY);
    long long t1 = now_ms();
    assert_int_equal(rlock_unlock(rb), RLOCK_OK);
    long long t2 = now_ms();
    assert_int_equal(rlock_try_lock(rb, 0, 60000), RLOCK_OK);
    long long t3 = now_ms();
    sleep_ms(2000); /* past a's 1.5 s lease */
    assert_int_equal(rlock_is_held_by_current_thread(ra), 1);
    int rest = migration_finish(&g);
    assert_int_equal(rest, 0); /* the library MIGRATEd them (source to target, over TLS) */
    assert_int_equal(keys_in_slot(src, g.slot), 0);
    assert_int_equal(rlock_client_stats(a, &st), RLOCK_OK);
    fprintf(stderr,
            "tls split migration: writer busy in %lld ms, reader out in %lld ms, in again in "
            "%lld ms; %d key(s) left to move at the end; a: renewals %llu, failures %llu, "
            "losses %llu\n",
            t1 - t0, t2 - t1, t3 - t2, rest, st.renewals, st.renewal_failures, st.losses);
    assert_true(st.renewals >= 3);
    assert_int_equal(st.losses, 0);
    assert_int_equal(rlock_unlock(ra), RLOCK_OK);
    assert_int_equal(rlock_try_lock(wc, 0, 10000), RLOCK_BUSY); /* b still reads */
    assert_int_equal(rlock_unlock(rb), RLOCK_OK);
    assert_int_equal(rlock_try_lock(wc, 0, 10000), RLOCK_OK);
    assert_true(pttl_on(dst, name) > 0);
    assert_int_equal(rlock_unlock(wc), RLOCK_OK);
    rlock_free(ra);
    rlock_free(wa);
    rlock_free(rb);
    rlock_free(wb);
    rlock_free(rc);
    rlock_free(wc);
    rlock_client_close(a);
    rlock_client_close(b);
    rlock_client_close(c);
}

/*
 * A fair lock whose keys a migration split: a holder (60 s lease), a waiter
 * of another client in the queue (a thread), then the slot MIGRATING and only
 * the queue moved (the hash and the timeouts stay on the source). Over TLS: a
 * third client's try is busy, the holder re-enters and unlocks twice, the
 * waiter is woken and gets the lock; then the migration ends.
 */
static void test_cluster_migration_fair(void **state) {
    (void)state;
    rlock_client *a = NULL, *b = NULL, *c = NULL;
    rlock *la = NULL, *lb = NULL, *lc = NULL;
    char url[1024];
    const char *name = "tls:migrate-fair";
    char queue[128];
    tls_migration g;
    pthread_t t;
    int cport = cluster_url(url, sizeof(url));
    if (cport == 0) {
        skip(); /* RLOCK_TLS_NO_CLUSTER */
        return;
    }
    snprintf(queue, sizeof(queue), "redisson_lock_queue:{%s}", name);
    assert_int_equal(open_url(url, &a), RLOCK_OK);
    assert_int_equal(open_url(url, &b), RLOCK_OK);
    assert_int_equal(open_url(url, &c), RLOCK_OK);
    assert_int_equal(rlock_get_fair(a, name, &la), RLOCK_OK);
    assert_int_equal(rlock_get_fair(b, name, &lb), RLOCK_OK);
    assert_int_equal(rlock_get_fair(c, name, &lc), RLOCK_OK);
    assert_int_equal(rlock_try_lock(la, 0, 60000), RLOCK_OK);
    migration_find(&g, cport, name);
    int src = g.nodes[g.src].port, dst = g.nodes[g.dst].port;
    waiter_arg w = {.lock = lb};
    atomic_init(&w.got_ms, 0);
    assert_int_equal(pthread_create(&t, NULL, waiter, &w), 0);
    long long keys = 0;
    for (long long until = now_ms() + 5000; keys < 3 && now_ms() < until; sleep_ms(20))
        keys = keys_in_slot(src, g.slot); /* the hash, the queue and the timeouts */
    assert_int_equal(keys, 3);
    migration_start(&g); /* now: a fair call on a slot MIGRATING with keys missing moves them */
    migration_move(&g, queue);
    long long on_src = keys_in_slot(src, g.slot), on_dst = keys_in_slot(dst, g.slot);
    fprintf(stderr, "tls fair split migration: slot %d %d -> %d, %lld keys; split: %lld left, "
                    "%lld moved\n",
            g.slot, src, dst, keys, on_src, on_dst);
    assert_int_equal(on_src, 2);
    assert_int_equal(on_dst, 1);
    long long t0 = now_ms();
    assert_int_equal(rlock_try_lock(lc, 0, 10000), RLOCK_BUSY);
    long long t1 = now_ms();
    assert_int_equal(rlock_try_lock(la, 0, 60000), RLOCK_OK); /* re-entered */
    assert_int_equal(rlock_unlock(la), RLOCK_OK);
    assert_int_equal(atomic_load(&w.got_ms), 0); /* still held once */
    long long unlocked = now_ms();
    assert_int_equal(rlock_unlock(la), RLOCK_OK);
    pthread_join(t, NULL);
    long long woke = atomic_load(&w.got_ms) - unlocked;
    int rest = migration_finish(&g);
    fprintf(stderr, "tls fair split migration: third try busy in %lld ms; the waiter got the lock "
                    "%lld ms after the unlock; %d key(s) left to move at the end\n",
            t1 - t0, woke, rest);
    assert_true(atomic_load(&w.got_ms) > 0 && woke < 1500);
    assert_int_equal(keys_in_slot(src, g.slot), 0);
    assert_int_equal(rlock_try_lock(lc, 0, 10000), RLOCK_OK); /* on the target now */
    assert_true(pttl_on(dst, name) > 0);
    assert_int_equal(rlock_unlock(lc), RLOCK_OK);
    rlock_free(la);
    rlock_free(lb);
    rlock_free(lc);
    rlock_client_close(a);
    rlock_client_close(b);
    rlock_client_close(c);
}

/*
 * A Cluster failover over TLS: a watchdog lock (12 s lease, to outlast the
 * old master's write pause, up to 5 s: harness/cluster.h's
 * H_FAILOVER_WATCHDOG_MS) on the master
 * that has a replica, a waiter of another client; CLUSTER FAILOVER on the
 * replica (replication and the bus over TLS). The client follows the new
 * master (MOVED, CLUSTER SLOTS over TLS): the lock is renewed there past a
 * lease, the unlock works and wakes the waiter; nothing is lost.
 */
static void test_cluster_failover(void **state) {
    (void)state;
    rlock_client *a = NULL, *b = NULL;
    rlock *la = NULL, *lb = NULL;
    rlock_stats st0 = {.struct_size = sizeof(st0)};
    tls_node nodes[3];
    char url[1024], name[64], out[512], args[128];
    pthread_t t;
    int cport = cluster_url(url, sizeof(url));
    int rport = env_port("RLOCK_TLS_CLUSTER_REPLICA_PORT");
    if (cport == 0 || rport == 0) {
        skip(); /* RLOCK_TLS_NO_CLUSTER */
        return;
    }
    /* the replica's master (ROLE: slave, ip, port, ...) and a name of its slots */
    assert_int_equal(cli(rport, "ROLE", out, sizeof(out)), 0);
    assert_memory_equal(out, "slave\n", 6);
    int mport = atoi(strchr(strchr(out, '\n') + 1, '\n') + 1);
    int m = -1;
    assert_int_equal(cluster_masters(cport, nodes), 3);
    for (int i = 0; i < 3; i++)
        if (nodes[i].port == mport)
            m = i;
    assert_true(m >= 0);
    for (int i = 0;; i++) {
        assert_true(i < 1000);
        snprintf(name, sizeof(name), "tls:failover:%d", i);
        snprintf(args, sizeof(args), "CLUSTER KEYSLOT '%s'", name);
        if (node_has(&nodes[m], (int)cli_int(cport, args)))
            break;
    }
    assert_int_equal(open_watchdog(url, 12000, &a), RLOCK_OK);
    assert_int_equal(open_url(url, &b), RLOCK_OK);
    assert_int_equal(rlock_get(a, name, &la), RLOCK_OK);
    assert_int_equal(rlock_get(b, name, &lb), RLOCK_OK);
    assert_int_equal(rlock_lock(la), RLOCK_OK);
    waiter_arg w = {.lock = lb, .wait_ms = 30000};
    atomic_init(&w.got_ms, 0);
    assert_int_equal(pthread_create(&t, NULL, waiter, &w), 0);
    sleep_ms(300);
    assert_int_equal(rlock_client_stats(a, &st0), RLOCK_OK);
    long long t0 = now_ms();
    cli_ok(rport, "CLUSTER FAILOVER"); /* a manual failover: the replica caught up first */
    int promoted = 0;
    for (long long until = now_ms() + 10000; !promoted && now_ms() < until; sleep_ms(50)) {
        assert_int_equal(cli(rport, "ROLE", out, sizeof(out)), 0);
        promoted = strncmp(out, "master\n", 7) == 0;
    }
    long long took = now_ms() - t0;
    assert_true(promoted);
    fprintf(stderr, "tls cluster failover: %d -> %d promoted in %lld ms\n", mport, rport, took);
    /* past the 12 s lease: only renewals on the new master keep it */
    kept_then_handed_off("tls cluster failover", a, la, &st0, rport, name, 13500, &w, t);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* Redlock over TLS: three masters, the main, the mutual-TLS and the wrong-name servers. */
static void test_redlock(void **state) {
    (void)state;
    rlock_client *c[3] = {NULL, NULL, NULL};
    rlock_redlock *rl = NULL;
    char url[2048];
    long long validity = 0;
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s", tls_port, path("ca.pem"));
    assert_int_equal(open_url(url, &c[0]), RLOCK_OK);
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s&tls_cert=%s&tls_key=%s",
             mtls_port, path("ca.pem"), path("client.pem"), path("client.key"));
    assert_int_equal(open_url(url, &c[1]), RLOCK_OK);
    snprintf(url, sizeof(url), "rediss://localhost:%d?tls_ca=%s&tls_verify=ca", wrong_port,
             path("ca.pem"));
    assert_int_equal(open_url(url, &c[2]), RLOCK_OK);
    assert_int_equal(rlock_redlock_new(c, 3, "tls:redlock", &rl), RLOCK_OK);
    assert_int_equal(rlock_redlock_try_lock(rl, 0, 10000, &validity), RLOCK_OK);
    assert_true(validity > 0);
    assert_int_equal(rlock_redlock_unlock(rl), RLOCK_OK);
    rlock_redlock_free(rl);
    for (int i = 0; i < 3; i++)
        rlock_client_close(c[i]);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--handoff-child") == 0)
        return handoff_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_params),
        cmocka_unit_test(test_config_fields),
        cmocka_unit_test(test_lock_by_name_and_ip),
        cmocka_unit_test(test_waiter_woken),
        cmocka_unit_test(test_watchdog),
        cmocka_unit_test(test_unknown_ca),
        cmocka_unit_test(test_host_name_mismatch),
        cmocka_unit_test(test_expired),
        cmocka_unit_test(test_plaintext_behind_rediss),
        cmocka_unit_test(test_tls_behind_redis),
        cmocka_unit_test(test_mutual_tls),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_rotation_same_client),
        cmocka_unit_test(test_handshake_bounded),
        cmocka_unit_test(test_credentials_callback),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_handoff_process),
        cmocka_unit_test(test_rlockctl),
        cmocka_unit_test(test_redlock),
        cmocka_unit_test(test_sentinel),
        cmocka_unit_test(test_sentinel_failover),
        cmocka_unit_test(test_sentinel_killed_master),
        cmocka_unit_test(test_cluster),
        cmocka_unit_test(test_cluster_migration),
        cmocka_unit_test(test_cluster_migration_split),
        cmocka_unit_test(test_cluster_migration_fair),
        cmocka_unit_test(test_cluster_failover),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
