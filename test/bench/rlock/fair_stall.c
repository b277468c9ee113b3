/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fair_stall.c - bench_rlock fair-stall: how long a dead waiter at the head
 * of a fair lock's queue holds up the live waiter behind it, against the
 * bound docs/design.md section 9 gives: until the dead waiter's deadline in
 * redisson_lock_timeout:{name}, plus at most a round trip.
 *
 * Each of R rounds, on a fresh fair lock: a holder takes it with a lease of
 * --lease ms (default 500); a waiter process queues with try_lock(wait
 * 1000 ms) and is SIGKILLed while queued at the head (nothing can remove
 * its entry); a live waiter (a thread with a client of its own) queues
 * behind it with try_lock(wait 10 s); the holder unlocks, which publishes to
 * the head's channel -- the dead waiter's, so nobody hears it. Measured, by
 * the wall clock the deadlines are written in: the stall (unlock -> the live
 * waiter's return), the bound (unlock -> the dead waiter's deadline) and the
 * excess (return - deadline; the target is a round trip plus timer slack).
 *
 * The waiter processes are forked before this process opens any client.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_rlock.h"

#define STALL_DEAD_WAIT_MS 1000
#define STALL_LIVE_WAIT_MS 10000
#define STALL_MAX_ROUNDS 100

typedef struct stall_shm {
    atomic_long go[STALL_MAX_ROUNDS]; /* round i's dead-to-be waiter queues */
    atomic_long opened, errors;
} stall_shm;

static long long wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stall_name(char *buf, size_t size, pid_t parent, int round) {
    snprintf(buf, size, "bench:fair:stall:%d:%d", (int)parent, round);
}

/* The waiter of round i: queues when told, and is killed there. */
static void stall_child(const options *o, stall_shm *sh, pid_t parent, int round) {
    char name[64];
    rlock *l = NULL;
    rlock_client *c = open_client(o, 0, 1);
    stall_name(name, sizeof name, parent, round);
    if (check(rlock_get_fair(c, name, &l), "rlock_get_fair") < 0)
        _exit(1);
    atomic_fetch_add(&sh->opened, 1);
    while (atomic_load(&sh->go[round]) == 0)
        raw_sleep_ms(1);
    rlock_try_lock(l, STALL_DEAD_WAIT_MS, RLOCK_LEASE_WATCHDOG);
    _exit(2); /* not reached in time: killed while queued */
}

typedef struct live_waiter {
    rlock *lock;
    int rc;
    long long returned_ms;
} live_waiter;

static void *live_main(void *arg) {
    live_waiter *w = arg;
    w->rc = rlock_try_lock(w->lock, STALL_LIVE_WAIT_MS, RLOCK_LEASE_WATCHDOG);
    w->returned_ms = wall_ms();
    return NULL;
}

/* Waits (1 ms steps, 5 s at most) until the queue has n entries. */
static int queue_reaches(redisContext *r, const char *name, long long n) {
    for (int i = 0; i < 5000; i++) {
        long long len = -1;
        if (raw_int(r, &len, "LLEN redisson_lock_queue:{%s}", name) < 0)
            return -1;
        if (len >= n)
            return 0;
        raw_sleep_ms(1);
    }
    return -1;
}

/* The deadline (wall ms) of the queue's head, or -1. */
static long long head_deadline(redisContext *r, const char *name) {
    redisReply *head = redisCommand(r, "LINDEX redisson_lock_queue:{%s} 0", name);
    long long deadline = -1;
    if (head != NULL && head->type == REDIS_REPLY_STRING) {
        redisReply *score = redisCommand(r, "ZSCORE redisson_lock_timeout:{%s} %b", name,
                                         head->str, head->len);
        if (score != NULL && score->type == REDIS_REPLY_STRING)
            deadline = atoll(score->str);
        if (score)
            freeReplyObject(score);
    }
    if (head)
        freeReplyObject(head);
    return deadline;
}

typedef struct stall_round {
    double stall, bound, excess;
} stall_round;

/* One round; -1 if something failed (said on stderr). */
static int stall_once(const options *o, stall_shm *sh, rlock_client *hc, rlock_client *lc,
                      redisContext *r, pid_t child, int round, stall_round *out) {
    char name[64];
    rlock *hl = NULL, *ll = NULL;
    *out = (stall_round){NAN, NAN, NAN};
    stall_name(name, sizeof name, getpid(), round);
    if (check(rlock_get_fair(hc, name, &hl), "rlock_get_fair") < 0 ||
        check(rlock_get_fair(lc, name, &ll), "rlock_get_fair") < 0 ||
        check(rlock_lock_lease(hl, o->lease > 0 ? o->lease : 500), "holder's lock") < 0)
        return -1;
    atomic_store(&sh->go[round], 1);
    int bad = queue_reaches(r, name, 1) < 0;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    long long deadline = head_deadline(r, name);
    live_waiter w = {.lock = ll};
    pthread_t tid;
    pthread_create(&tid, NULL, live_main, &w);
    bad |= deadline < 0 || queue_reaches(r, name, 2) < 0;
    long long unlocked = wall_ms();
    bad |= check(rlock_unlock(hl), "holder's unlock") < 0;
    pthread_join(tid, NULL);
    bad |= check(w.rc, "live waiter's try_lock") < 0;
    if (w.rc == RLOCK_OK)
        rlock_unlock(ll);
    raw_ok(r, "DEL %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", name, name, name);
    rlock_free(hl);
    rlock_free(ll);
    *out = (stall_round){(double)(w.returned_ms - unlocked), (double)(deadline - unlocked),
                         (double)(w.returned_ms - deadline)};
    fprintf(stderr, "  round %d: stall %.0f ms, bound (the dead waiter's deadline) %.0f ms, "
                    "excess %.0f ms%s\n", round + 1, out->stall, out->bound, out->excess,
            bad ? " (FAILED)" : "");
    return bad ? -1 : 0;
}

int bench_fair_stall(const options *o) {
    int rounds = o->rounds > STALL_MAX_ROUNDS ? STALL_MAX_ROUNDS : o->rounds;
    stall_shm *sh = shared_alloc(sizeof *sh);
    pid_t parent = getpid(), kids[STALL_MAX_ROUNDS];
    fprintf(stderr, "fair-stall: %d rounds; holder's lease %lld ms, the killed waiter's wait "
                    "%d ms\n", rounds, o->lease > 0 ? o->lease : 500, STALL_DEAD_WAIT_MS);
    for (int i = 0; i < rounds; i++)
        if ((kids[i] = fork_child()) == 0)
            stall_child(o, sh, parent, i);
    while (atomic_load(&sh->opened) < rounds)
        raw_sleep_ms(1);
    rlock_client *hc = open_client(o, 0, 1), *lc = open_client(o, 0, 1);
    redisContext *r = raw_or_exit(o->url);
    double stall[STALL_MAX_ROUNDS], bound[STALL_MAX_ROUNDS], excess[STALL_MAX_ROUNDS];
    double worst = 0;
    int failed = 0;
    for (int i = 0; i < rounds; i++) {
        stall_round res = {NAN, NAN, NAN};
        failed |= stall_once(o, sh, hc, lc, r, kids[i], i, &res) < 0;
        stall[i] = res.stall, bound[i] = res.bound, excess[i] = res.excess;
        worst = i == 0 || res.excess > worst ? res.excess : worst;
    }
    redisFree(r);
    rlock_client_close(hc);
    rlock_client_close(lc);
    jsonw j;
    j_begin(&j, "fair_stall");
    j_int(&j, "rounds", rounds);
    j_num(&j, "stall_ms", median(stall, rounds));
    j_num(&j, "bound_ms", median(bound, rounds));
    j_num(&j, "excess_ms", median(excess, rounds));
    j_num(&j, "excess_max_ms", worst);
    j_int(&j, "errors", failed);
    j_end(&j);
    munmap(sh, sizeof *sh);
    return failed ? 1 : 0;
}
