/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c - librlock clients for the tests: unique lock names, configs with
 * scaled timeouts, opening (failing the test, or reporting the status), the
 * h_lost on_lock_lost recorder, and timed close / try_lock.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actor.h"
#include "client.h"
#include "fail.h"
#include "priv.h"
#include "redis.h"

/* ---- names ------------------------------------------------------------- */

struct h_name {
    struct h_name *next;
    char s[];
};

static pthread_mutex_t h_names_mu = PTHREAD_MUTEX_INITIALIZER;
static struct h_name *h_names;
static unsigned long h_name_counter;

const char *h_unique_name(const char *prefix) {
    char buf[512];
    struct h_name *n;
    unsigned long k;
    size_t len;

    pthread_mutex_lock(&h_names_mu);
    k = ++h_name_counter;
    pthread_mutex_unlock(&h_names_mu);
    len = (size_t)snprintf(buf, sizeof buf, "rlock-test:%s:%d:%lu:%llx", prefix ? prefix : "x",
                           (int)getpid(), k, h_run_stamp());
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    n = malloc(sizeof *n + len + 1);
    if (!n)
        abort();
    memcpy(n->s, buf, len + 1);
    pthread_mutex_lock(&h_names_mu);
    n->next = h_names;
    h_names = n;
    pthread_mutex_unlock(&h_names_mu);
    return n->s;
}

__attribute__((destructor)) static void h_names_free(void) {
    struct h_name *n, *next;
    if (!h_in_main_process())
        return;
    pthread_mutex_lock(&h_names_mu);
    for (n = h_names; n; n = next) {
        next = n->next;
        free(n);
    }
    h_names = NULL;
    pthread_mutex_unlock(&h_names_mu);
}

/* ---- opening clients --------------------------------------------------- */

int h_register_clients = 1;

void h_config(rlock_config *cfg) {
    rlock_config_init(cfg);
    cfg->url = h_url();
    cfg->connect_timeout_ms = (int)h_scaled(2000);
    cfg->command_timeout_ms = (int)h_scaled(2000);
    cfg->register_client = h_register_clients;
}

rlock_client *h_open_config(const rlock_config *cfg) {
    rlock_client *c = NULL;
    int rc = rlock_client_open(cfg, &c);
    if (rc != RLOCK_OK)
        H_FAIL("rlock_client_open(%s) = %s (%s)", cfg && cfg->url ? cfg->url : "(default)",
               rlock_status_name(rc), rlock_strerror(rc));
    if (!c)
        H_FAIL("rlock_client_open returned OK and a NULL client");
    return c;
}

static rlock_client *open_with(const char *url, long long wd, int cmd,
                               void (*cb)(const char *, void *), void *arg) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    if (wd > 0)
        cfg.watchdog_timeout_ms = wd;
    if (cmd > 0)
        cfg.command_timeout_ms = cmd;
    cfg.on_lock_lost = cb;
    cfg.callback_arg = arg;
    return h_open_config(&cfg);
}

rlock_client *h_open(long long watchdog_timeout_ms, int command_timeout_ms) {
    return open_with(h_url(), watchdog_timeout_ms, command_timeout_ms, NULL, NULL);
}

rlock_client *h_open_cb(long long watchdog_timeout_ms, int command_timeout_ms,
                        void (*cb)(const char *name, void *arg), void *arg) {
    return open_with(h_url(), watchdog_timeout_ms, command_timeout_ms, cb, arg);
}

rlock_client *h_open_url(const char *url, long long watchdog_timeout_ms, int command_timeout_ms) {
    return open_with(url, watchdog_timeout_ms, command_timeout_ms, NULL, NULL);
}

rlock_client *h_open_handoffs(long long watchdog_timeout_ms, int local_handoffs) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.watchdog_timeout_ms = watchdog_timeout_ms;
    cfg.local_handoffs = local_handoffs;
    return h_open_config(&cfg);
}

rlock_client *h_open_retries(const char *url, long long wd, long long cmd, int retries,
                             int retry_interval, struct h_lost *lost) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd;
    if (cmd > 0)
        cfg.command_timeout_ms = (int)cmd;
    if (retries >= 0)
        cfg.retry_attempts = retries;
    if (retry_interval >= 0)
        cfg.retry_interval_ms = retry_interval;
    if (lost) {
        h_lost_init(lost);
        cfg.on_lock_lost = h_lost_cb;
        cfg.callback_arg = lost;
    }
    return h_open_config(&cfg);
}

rlock *h_get(rlock_client *client, const char *name) {
    rlock *l = NULL;
    int rc = rlock_get(client, name, &l);
    if (rc != RLOCK_OK || !l)
        H_FAIL("rlock_get(%.100s) = %s", name, rlock_status_name(rc));
    return l;
}

int h_open_status(const char *url, int connect_timeout_ms, rlock_error_info *info) {
    rlock_config cfg;
    rlock_client *c = NULL;
    int rc;
    h_config(&cfg);
    cfg.url = url;
    if (connect_timeout_ms > 0)
        cfg.connect_timeout_ms = connect_timeout_ms;
    rc = rlock_client_open(&cfg, &c);
    rlock_last_error_info(info);
    printf("      %-48s -> %s%s%s\n", url, rlock_status_name(rc), rc < 0 ? ": " : "",
           rc < 0 ? info->message : "");
    rlock_client_close(c);
    return rc;
}

/* ---- on_lock_lost recorder --------------------------------------------- */

void h_lost_init(struct h_lost *l) {
    memset(l, 0, sizeof *l);
    l->probe_rc = H_LOST_NO_PROBE;
}

void h_lost_cb(const char *name, void *arg) {
    struct h_lost *l = arg;
    if (l->probe)
        l->probe_rc = rlock_is_locked(l->probe);
    snprintf(l->last_name, sizeof l->last_name, "%s", name ? name : "(null)");
    l->thread = pthread_self();
    __atomic_store_n(&l->last_ms, h_now_ms(), __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&l->count, 1, __ATOMIC_SEQ_CST);
}

int h_lost_count(struct h_lost *l) {
    return __atomic_load_n(&l->count, __ATOMIC_SEQ_CST);
}

/* ---- statistics ------------------------------------------------------------ */

rlock_stats h_stats(rlock_client *c) {
    rlock_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    H_ASSERT_RC(rlock_client_stats(c, &st), RLOCK_OK);
    if (st.struct_size != sizeof st)
        H_FAIL("rlock_client_stats wrote %zu bytes of %zu", st.struct_size, sizeof st);
    return st;
}

/* ---- timed calls ------------------------------------------------------- */

static long long op_close(void *client) {
    rlock_client_close(client);
    return 0;
}

long long h_timed_close(rlock_client *c, long long timeout_ms) {
    h_actor *a = h_actor_start();
    long long t0 = h_now_ms(), dt;
    h_actor_post(a, op_close, c);
    h_actor_wait(a, timeout_ms);
    dt = h_actor_finished_ms(a) - t0;
    h_actor_stop(a);
    return dt;
}

void *h_timed_try_main(void *arg) {
    struct h_timed_try *t = arg;
    long long t0 = h_now_ms();
    t->rc = rlock_try_lock(t->lock, t->wait_ms, t->lease_ms);
    t->elapsed_ms = h_now_ms() - t0;
    __atomic_store_n(&t->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int h_timed_try_done(struct h_timed_try *t) {
    return __atomic_load_n(&t->done, __ATOMIC_SEQ_CST);
}
