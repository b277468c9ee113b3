/*
 * sentinel_exclusion.c - mutual exclusion through repeated failovers: 4
 * processes x 4 threads take one lock through a redis-sentinel:// url while
 * the test runs SENTINEL FAILOVER twice. Each holder checks, in memory the
 * processes share, that nobody else is inside, and increments a counter
 * with a read, a pause and a write: the counter is exact only if no two
 * holders overlapped.
 *
 * The clients use replica_acks 2 (every replica): an acquisition a failover
 * could lose is never reported as taken (docs/design.md, "What WAIT
 * guarantees"). With fewer acknowledgements a failover can promote a
 * replica that never saw a lock, and this test could legitimately see two
 * holders.
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
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define PROCESSES 4
#define THREADS 4

/* Shared by every process (MAP_SHARED before fork). */
typedef struct shared {
    atomic_int inside;          /* holders in the critical section now */
    atomic_int overlaps;        /* times a holder found another inside */
    long counter;               /* read, pause, write: exact only under exclusion */
    atomic_long acquisitions;
    atomic_long per_process[PROCESSES];
    atomic_long refused[PROCESSES]; /* ENOREPL, EIO, BUSY: tried again */
    atomic_int stop;
} shared;

typedef struct worker {
    shared *sh;
    rlock *lock;
    int process;
} worker;

static void critical_section(shared *sh, int process) {
    if (atomic_fetch_add(&sh->inside, 1) != 0)
        atomic_fetch_add(&sh->overlaps, 1);
    long seen = sh->counter;
    usleep(300);
    sh->counter = seen + 1;
    atomic_fetch_add(&sh->acquisitions, 1);
    atomic_fetch_add(&sh->per_process[process], 1);
    atomic_fetch_sub(&sh->inside, 1);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    while (!atomic_load(&w->sh->stop)) {
        int rc = rlock_try_lock(w->lock, 2000, RLOCK_LEASE_WATCHDOG);
        if (rc != RLOCK_OK) {
            atomic_fetch_add(&w->sh->refused[w->process], 1);
            usleep(20000);
            continue;
        }
        critical_section(w->sh, w->process);
        rlock_unlock(w->lock); /* RLOCK_ENOREPL is possible: the hold is gone either way */
    }
    return NULL;
}

/* One process: its own client, THREADS threads on one lock. */
H_NORETURN static void run_process(const char *url, const char *name, shared *sh, int process) {
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock *lock = NULL;
    pthread_t th[THREADS];
    worker w = {.sh = sh, .process = process};
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = 3000;
    cfg.replica_acks = 2;
    cfg.replica_ack_timeout_ms = 1000;
    cfg.retry_attempts = 40;
    cfg.retry_interval_ms = 250;
    H_CHILD_CHECK(rlock_client_open(&cfg, &c) == RLOCK_OK, 2);
    H_CHILD_CHECK(rlock_get(c, name, &lock) == RLOCK_OK, 3);
    w.lock = lock;
    for (int t = 0; t < THREADS; t++)
        H_CHILD_CHECK(pthread_create(&th[t], NULL, worker_main, &w) == 0, 4);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    rlock_free(lock);
    rlock_client_close(c);
    h_child_exit(0);
}

static void test_exclusion_across_failovers(void **state) {
    (void)state;
    h_sentinels *hs = h_sentinels_start();
    shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    const char *name = h_unique_name("sentinel-exclusion");
    pid_t pid[PROCESSES];
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    for (int p = 0; p < PROCESSES; p++) {
        pid[p] = fork();
        assert_true(pid[p] >= 0);
        if (pid[p] == 0)
            run_process(hs->url, name, sh, p);
    }
    h_sleep_ms(H_MS(2000));
    long before = atomic_load(&sh->acquisitions);
    for (int f = 0; f < 2; f++) {
        long long t0 = h_now_ms();
        h_server *now = h_sentinels_failover(hs);
        printf("      failover %d: new master :%d after %lld ms, %ld acquisitions so far\n", f + 1,
               h_server_port(now), h_now_ms() - t0, atomic_load(&sh->acquisitions));
        /* The next failover needs a settled set-up: both replicas following the new master. */
        H_WAIT_FOR(h_replicas_linked(now) == 2, 30000);
    }
    long at_last = atomic_load(&sh->acquisitions);
    H_WAIT_FOR(atomic_load(&sh->acquisitions) > at_last + 50, 20000); /* going again */
    atomic_store(&sh->stop, 1);
    for (int p = 0; p < PROCESSES; p++)
        assert_int_equal(h_child_code(h_wait_child(pid[p], 30000)), 0);
    printf("      %ld acquisitions (%ld before the first failover), counter %ld, overlaps %d\n",
           atomic_load(&sh->acquisitions), before, sh->counter, atomic_load(&sh->overlaps));
    for (int p = 0; p < PROCESSES; p++)
        printf("      process %d: %ld acquisitions, %ld attempts refused or timed out\n", p,
               atomic_load(&sh->per_process[p]), atomic_load(&sh->refused[p]));
    assert_int_equal(atomic_load(&sh->overlaps), 0);
    assert_int_equal(sh->counter, atomic_load(&sh->acquisitions));
    for (int p = 0; p < PROCESSES; p++)
        assert_true(atomic_load(&sh->per_process[p]) > 0);
    munmap(sh, sizeof(*sh));
    h_sentinels_stop(hs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusion_across_failovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
