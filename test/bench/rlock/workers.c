/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * workers.c - P processes x T threads looping lock, critical section, unlock
 * on one lock, until told to stop: the harness of bench_rlock contention and
 * fifo, which differ in their lock kind and critical section.
 *
 * Each process has one client and one handle shared by its threads; each
 * thread has a raw connection of its own for its critical section.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "bench_rlock.h"

typedef struct worker {
    const workers_spec *spec;
    rlock *lock;
    long index;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    workers_shm *sh = w->spec->sh;
    redisContext *redis = raw_connect(w->spec->o->url);
    atomic_fetch_add(&sh->ready, 1);
    if (redis == NULL) {
        atomic_fetch_add(&sh->errors, 1);
        return NULL;
    }
    while (atomic_load(&sh->phase) == WORKERS_WAIT)
        raw_sleep_ms(1);
    while (atomic_load(&sh->phase) == WORKERS_RUN) {
        if (check(rlock_lock(w->lock), "rlock_lock") < 0) {
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        int bad = w->spec->critical(w->spec, w->index, redis);
        if (check(rlock_unlock(w->lock), "rlock_unlock") < 0 || bad) {
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
    }
    redisFree(redis);
    return NULL;
}

static void workers_child(const workers_spec *spec, int proc) {
    const options *o = spec->o;
    rlock_client *c = open_client(o, 0, o->threads);
    rlock *lock = NULL;
    int status = spec->fair ? rlock_get_fair(c, spec->name, &lock) : rlock_get(c, spec->name, &lock);
    if (check(status, "rlock_get") < 0)
        _exit(1);
    worker w[256];
    pthread_t tid[256];
    for (int t = 0; t < o->threads; t++) {
        w[t] = (worker){spec, lock, (long)proc * o->threads + t};
        pthread_create(&tid[t], NULL, worker_main, &w[t]);
    }
    for (int t = 0; t < o->threads; t++)
        pthread_join(tid[t], NULL);
    rlock_free(lock);
    rlock_client_close(c);
    _exit(atomic_load(&spec->sh->errors) ? 1 : 0);
}

void workers_start(const workers_spec *spec, pid_t *pids) {
    for (int p = 0; p < spec->o->procs; p++)
        if ((pids[p] = fork_child()) == 0)
            workers_child(spec, p);
    wait_at_least(&spec->sh->ready, spec->o->procs * spec->o->threads, &spec->sh->errors);
}

int workers_stop(const workers_spec *spec, const pid_t *pids) {
    atomic_store(&spec->sh->phase, WORKERS_STOP);
    int failed = 0;
    for (int p = 0; p < spec->o->procs; p++) {
        int ws;
        waitpid(pids[p], &ws, 0);
        failed += !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
    }
    return failed;
}
