/*
 * fault_wait_reply_lost.c - with replica_acks, the script's reply arrives
 * and the WAIT behind it is lost (the connection cut while WAIT blocks: a
 * sentinel demoting an old master kills its clients so). The outcome is
 * unknown: RLOCK_EIO, never an error reply that is not one (the script's
 * reply was kept and reported as "unexpected reply type", RLOCK_EREDIS:
 * issue 22, item 2).
 *
 * One redis-server for the whole file (h_server_fixture_*), without
 * replicas: WAIT 1 blocks for replica_ack_timeout_ms; the proxy cuts the
 * connection as its reply comes.
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

#include "harness.h"
#include "proxy.h"

typedef struct attempt {
    rlock *lock;
    int rc;
    rlock_error_info info;
} attempt;

static void *try_main(void *arg) {
    attempt *a = arg;
    a->rc = rlock_try_lock(a->lock, 0, RLOCK_LEASE_WATCHDOG);
    rlock_last_error_info(&a->info);
    return NULL;
}

static void test_wait_reply_lost(void **state) {
    rlock_config cfg;
    pthread_t th;
    (void)state;
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    h_config(&cfg);
    cfg.url = h_proxy_url(px);
    cfg.replica_acks = 1;
    cfg.replica_ack_timeout_ms = H_MS(1000);
    cfg.retry_attempts = 0;
    rlock_client *c = h_open_config(&cfg);
    attempt a = {.lock = h_get(c, h_unique_name("wait-reply-lost"))};
    assert_int_equal(pthread_create(&th, NULL, try_main, &a), 0);
    h_sleep_ms(H_MS(300)); /* the script's reply is in; WAIT blocks for a replica */
    h_proxy_drop_replies(px, 1);
    pthread_join(th, NULL);
    printf("      try_lock: %d (%s)\n", a.rc, a.info.message);
    H_ASSERT_RC(a.rc, RLOCK_EIO);
    assert_null(strstr(a.info.message, "unexpected reply type"));
    rlock_free(a.lock);
    rlock_client_close(c);
    h_proxy_stop(px);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_reply_lost),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The proxy drops the next reply whoever it is for: no registration writes. */
    h_register_clients = 0;
    return cmocka_run_group_tests(tests, h_server_fixture_start, h_server_fixture_stop);
}
