/*
 * cluster_exclusion.c - mutual exclusion on a Redis Cluster while the
 * lock's slot changes hands: 4 processes x 4 threads (each process opens its
 * own redis-cluster:// client) take one lock over and over. Each holder
 * checks, in memory the processes share, that nobody else is inside, and
 * increments a counter with a read, a pause and a write: the counter is
 * exact only if no two holders overlapped.
 *
 *   migration   the lock's slot is moved to another master and back, twice,
 *               in the three phases (IMPORTING/MIGRATING, MIGRATE of
 *               whatever lock key exists at that moment, SETSLOT NODE),
 *               with pauses in each phase: zero overlaps, exact count, and
 *               every unlock RLOCK_OK (no hold lost)
 *   failover    CLUSTER FAILOVER of the lock's master, then back (a
 *               coordinated failover loses no acknowledged write, so no
 *               WAIT is needed): zero overlaps, exact count, every unlock
 *               RLOCK_OK
 *
 * Both also require that every process kept acquiring, and that acquiring
 * went on after the last change. Durations are scaled by TEST_TIMEOUT_SCALE.
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
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define PROCESSES 4
#define THREADS 4

/* Shared by every process (MAP_SHARED before fork). */
typedef struct shared {
    atomic_int inside;   /* holders in the critical section now */
    atomic_int overlaps; /* times a holder found another inside */
    long counter;        /* read, pause, write: exact only under exclusion */
    atomic_long acquisitions;
    atomic_long per_process[PROCESSES];
    atomic_long refused[PROCESSES]; /* EIO, BUSY, ...: tried again */
    atomic_int last_error[PROCESSES];
    atomic_long bad_unlocks; /* unlocks not RLOCK_OK (a hold lost meanwhile) */
    atomic_int last_bad_unlock;
    char bad_unlock_msg[256]; /* rlock_last_error() of one of them */
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
            atomic_store(&w->sh->last_error[w->process], rc);
            usleep(20000);
            continue;
        }
        critical_section(w->sh, w->process);
        rc = rlock_unlock(w->lock);
        if (rc != RLOCK_OK) {
            atomic_store(&w->sh->last_bad_unlock, rc);
            snprintf(w->sh->bad_unlock_msg, sizeof w->sh->bad_unlock_msg, "%s", rlock_last_error());
            atomic_fetch_add(&w->sh->bad_unlocks, 1);
        }
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
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves none behind */
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = 3000;
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

typedef struct contest {
    shared *sh;
    pid_t pid[PROCESSES];
    char name[128];
    int slot;
} contest;

static void start_contest(contest *ct, h_cluster *hc, h_server *master) {
    ct->sh = mmap(NULL, sizeof *ct->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(ct->sh != MAP_FAILED);
    memset(ct->sh, 0, sizeof *ct->sh);
    h_cluster_name_on(hc, master, h_unique_name("exclusion"), ct->name, sizeof ct->name);
    ct->slot = h_slot(ct->name, strlen(ct->name));
    fflush(stdout);
    for (int p = 0; p < PROCESSES; p++) {
        ct->pid[p] = fork();
        assert_true(ct->pid[p] >= 0);
        if (ct->pid[p] == 0)
            run_process(hc->url, ct->name, ct->sh, p);
    }
    H_WAIT_FOR(atomic_load(&ct->sh->acquisitions) > 100, 20000); /* going */
}

static void finish_contest(contest *ct) {
    shared *sh = ct->sh;
    long at_last = atomic_load(&sh->acquisitions);
    H_WAIT_FOR(atomic_load(&sh->acquisitions) > at_last + 50, 20000); /* still going */
    atomic_store(&sh->stop, 1);
    for (int p = 0; p < PROCESSES; p++)
        assert_int_equal(h_child_code(h_wait_child(ct->pid[p], 30000)), 0);
    printf("      %ld acquisitions, counter %ld, overlaps %d, unlocks not OK %ld (last %s)\n",
           atomic_load(&sh->acquisitions), sh->counter, atomic_load(&sh->overlaps),
           atomic_load(&sh->bad_unlocks), rlock_status_name(atomic_load(&sh->last_bad_unlock)));
    if (atomic_load(&sh->bad_unlocks) > 0)
        printf("      an unlock said: %s\n", sh->bad_unlock_msg);
    for (int p = 0; p < PROCESSES; p++)
        printf("      process %d: %ld acquisitions, %ld attempts refused (last %s)\n", p,
               atomic_load(&sh->per_process[p]), atomic_load(&sh->refused[p]),
               rlock_status_name(atomic_load(&sh->last_error[p])));
    assert_int_equal(atomic_load(&sh->overlaps), 0);
    assert_int_equal(sh->counter, atomic_load(&sh->acquisitions));
    for (int p = 0; p < PROCESSES; p++)
        assert_true(atomic_load(&sh->per_process[p]) > 0);
    assert_int_equal(atomic_load(&sh->bad_unlocks), 0); /* no hold lost on the way */
    munmap(sh, sizeof *sh);
}

/* One move of the slot, pausing in each phase while the contest goes on. */
static void move_slot(h_cluster *hc, contest *ct, h_server *target) {
    h_migration m;
    long long pause = H_MS(400);
    long before = atomic_load(&ct->sh->acquisitions);
    h_cluster_migrate_begin(hc, ct->slot, target, &m);
    h_cluster_migrate_keys(hc, &m); /* at once: the lock is likely held, its key moves */
    h_sleep_ms(pause);
    h_cluster_migrate_keys(hc, &m); /* none: new keys are made on the target (ASK) */
    h_sleep_ms(pause);
    h_cluster_migrate_finish(hc, &m);
    printf("      slot %d :%d -> :%d (%d key(s) moved), %ld acquisitions meanwhile\n", ct->slot,
           h_server_port(m.source), h_server_port(target), m.moved,
           atomic_load(&ct->sh->acquisitions) - before);
    h_sleep_ms(pause);
}

static void test_exclusion_during_migration(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    contest ct;
    h_cluster_masters(hc, masters);
    start_contest(&ct, hc, masters[0]);
    for (int round = 0; round < 2; round++) {
        move_slot(hc, &ct, masters[1]);
        move_slot(hc, &ct, masters[0]);
    }
    finish_contest(&ct);
}

static void test_exclusion_during_failover(void **state) {
    h_cluster *hc = *state;
    h_server *masters[H_CLUSTER_NODES];
    contest ct;
    h_cluster_masters(hc, masters);
    h_server *replica = h_cluster_replica_of(hc, masters[2]);
    start_contest(&ct, hc, masters[2]);
    for (int round = 0; round < 2; round++) {
        h_server *to = round == 0 ? replica : masters[2];
        long before = atomic_load(&ct.sh->acquisitions);
        long long t0 = h_now_ms();
        h_cluster_failover(hc, to);
        printf("      CLUSTER FAILOVER to :%d in %lld ms, %ld acquisitions meanwhile\n",
               h_server_port(to), h_now_ms() - t0, atomic_load(&ct.sh->acquisitions) - before);
        h_cluster_wait_settled(hc, 1, 20000); /* the next failover needs a linked replica */
        long now = atomic_load(&ct.sh->acquisitions);
        H_WAIT_FOR(atomic_load(&ct.sh->acquisitions) > now + 50, 20000);
    }
    finish_contest(&ct);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_exclusion_during_migration),
        H_CLUSTER_TEST(test_exclusion_during_failover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
