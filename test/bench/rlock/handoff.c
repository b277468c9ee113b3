/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handoff.c - bench_rlock handoff: unlock-call-to-waiter-return latency, the
 * waiter in another process or in the same process (run.sh section 3).
 */
#include <sys/wait.h>
#include <unistd.h>

#include "bench_rlock.h"

/*
 * Two parties pass the lock back and forth. For hand-off i, party i % 2 is
 * the waiter: it announces itself and calls rlock_lock(); the other party,
 * which holds the lock, waits for the announcement plus settle_us (so that
 * the waiter is asleep in the library, not still on its first attempt),
 * stamps CLOCK_MONOTONIC and unlocks. The waiter's latency is its return
 * time minus the stamp. The releaser then waits for the waiter to report
 * the lock before it turns waiter itself. Shared memory works for both the
 * thread and the process variant. --fair does the same with an
 * rlock_get_fair handle (the waiter queues; the unlock wakes the head).
 * --two-clients: the waiter is a thread of this process with an rlock_client
 * of its own (as two Redisson clients in one JVM: no in-process hand-off).
 */
typedef struct handoff_shm {
    atomic_long ready, go, errors;
    atomic_long waiting;           /* i + 1 once the waiter of hand-off i is about to lock */
    atomic_long got;               /* i + 1 once it has the lock */
    _Atomic uint64_t released_ns;
    long n;
    int settle_us;
    uint64_t lat[];                /* n latencies; each written by one waiter */
} handoff_shm;

typedef struct handoff_party {
    handoff_shm *sh;
    rlock *lock;
    int me;
} handoff_party;

static void handoff_wait(handoff_party *p, long i) {
    handoff_shm *sh = p->sh;
    atomic_store(&sh->waiting, i + 1);
    if (check(rlock_lock(p->lock), "rlock_lock (waiter)") < 0) {
        atomic_fetch_add(&sh->errors, 1);
        return;
    }
    sh->lat[i] = raw_now_ns() - atomic_load(&sh->released_ns);
    atomic_store(&sh->got, i + 1);
}

static void handoff_release(handoff_party *p, long i) {
    handoff_shm *sh = p->sh;
    while (atomic_load(&sh->waiting) != i + 1 && atomic_load(&sh->errors) == 0)
        raw_sleep_ms(0.02);
    raw_sleep_ms(sh->settle_us / 1000.0);
    atomic_store(&sh->released_ns, raw_now_ns());
    if (check(rlock_unlock(p->lock), "rlock_unlock (holder)") < 0)
        atomic_fetch_add(&sh->errors, 1);
    /* The lock is not fair: locking again at once would often beat the
     * woken waiter to it. Let it arrive first, polling slowly: on a small
     * machine a busy poller would steal the CPU the hand-off needs. */
    while (atomic_load(&sh->got) != i + 1 && atomic_load(&sh->errors) == 0)
        raw_sleep_ms(0.5);
}

static void *handoff_main(void *arg) {
    handoff_party *p = arg;
    handoff_shm *sh = p->sh;
    if (p->me == 1 && check(rlock_lock(p->lock), "rlock_lock (first holder)") < 0)
        atomic_fetch_add(&sh->errors, 1);
    atomic_fetch_add(&sh->ready, 1);
    wait_at_least(&sh->go, 1, &sh->errors);
    for (long i = 0; i < sh->n && atomic_load(&sh->errors) == 0; i++) {
        if (i % 2 == p->me)
            handoff_wait(p, i);
        else
            handoff_release(p, i);
    }
    if ((sh->n - 1) % 2 == p->me && atomic_load(&sh->errors) == 0)
        check(rlock_unlock(p->lock), "rlock_unlock (last holder)");
    return NULL;
}

/* rlock_get, or rlock_get_fair with --fair. */
static int get_handle(const options *o, rlock_client *c, const char *name, rlock **out) {
    return o->fair ? rlock_get_fair(c, name, out) : rlock_get(c, name, out);
}

static void handoff_run(const options *o, handoff_shm *sh) {
    char name[64];
    snprintf(name, sizeof name, "bench:%shandoff:%d", o->fair ? "fair" : "", (int)getpid());
    int in_process = o->same_process || o->two_clients;
    pid_t child = -1;
    pthread_t tid;
    handoff_party peer = {sh, NULL, 1};
    rlock_client *c, *c2 = NULL;
    if (!in_process) {
        child = fork_child();
        if (child == 0) { /* party 1, with a client of its own */
            rlock_client *cc = open_client(o, 0, 0);
            handoff_party p = {sh, NULL, 1};
            if (check(get_handle(o, cc, name, &p.lock), "rlock_get") < 0)
                _exit(1);
            handoff_main(&p);
            rlock_free(p.lock);
            rlock_client_close(cc);
            _exit(atomic_load(&sh->errors) ? 1 : 0);
        }
    }
    c = open_client(o, 0, 0);
    handoff_party self = {sh, NULL, 0};
    if (check(get_handle(o, c, name, &self.lock), "rlock_get") < 0)
        exit(1);
    if (o->two_clients) { /* party 1: a thread with a client of its own */
        c2 = open_client(o, 0, 0);
        if (check(get_handle(o, c2, name, &peer.lock), "rlock_get") < 0)
            exit(1);
    } else if (o->same_process) {
        peer.lock = self.lock; /* one handle, shared by both threads */
    }
    if (in_process)
        pthread_create(&tid, NULL, handoff_main, &peer);
    pthread_t me;
    pthread_create(&me, NULL, handoff_main, &self);
    wait_at_least(&sh->ready, 2, &sh->errors);
    atomic_store(&sh->go, 1);
    pthread_join(me, NULL);
    if (in_process)
        pthread_join(tid, NULL);
    else if (child > 0) {
        int ws;
        waitpid(child, &ws, 0);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            atomic_fetch_add(&sh->errors, 1);
    }
    if (c2 != NULL) {
        rlock_free(peer.lock);
        rlock_client_close(c2);
    }
    rlock_free(self.lock);
    rlock_client_close(c);
}

int bench_handoff(const options *o) {
    handoff_shm *sh = shared_alloc(sizeof *sh + (size_t)o->count * sizeof(uint64_t));
    sh->n = o->count;
    sh->settle_us = o->settle_us;
    const char *where = o->two_clients ? "client" : o->same_process ? "thread" : "process";
    fprintf(stderr, "handoff: %ld hand-offs of %s lock to a waiter in another %s (settle %d us)\n",
            o->count, o->fair ? "a fair" : "an rlock", where, o->settle_us);
    uint64_t t0 = raw_now_ns();
    handoff_run(o, sh);
    double secs = (double)(raw_now_ns() - t0) / 1e9;
    samples s = {0};
    for (long i = 0; i < sh->n; i++)
        samples_add(&s, sh->lat[i]);
    samples_sort(&s);
    samples_write_cdf(&s, o->samples);
    jsonw j;
    j_begin(&j, "handoff");
    j_str(&j, "waiter", where);
    j_str(&j, "kind", o->fair ? "fair" : "rlock");
    j_int(&j, "handoffs", (long long)s.n);
    j_int(&j, "settle_us", o->settle_us);
    put_latency(&j, &s);
    j_num(&j, "run_s", secs);
    j_int(&j, "errors", atomic_load(&sh->errors));
    j_end(&j);
    samples_free(&s);
    return atomic_load(&sh->errors) ? 1 : 0;
}
