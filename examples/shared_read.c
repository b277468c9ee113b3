/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shared_read.c - the threads of one process reading one read-write lock
 * through ONE Redis read hold, built by the application on an explicit owner.
 *
 *   shared_read [URL [THREADS [READS]]]
 *       THREADS threads (default 8) each read "example:shared_read" READS
 *       times (default 200) through one shared hold, while a writer thread
 *       of the same client takes the write lock now and then; prints how many
 *       Redis holds the reads took and exits 1 if a reader ever saw the
 *       writer inside (or a call failed).
 *
 * Why: every rlock_lock() on a read handle is a round trip, and each reading
 * thread is a field of its own in the lock's hash ("<client id>:<thread
 * id>"), as Redisson's readers are. Threads that read one lock at a high rate
 * can instead share one hold: the first takes it for an owner of its own
 * (rlock_owner_new(), rlock_lock_as()), the others only count themselves in
 * under a mutex, and the last one out gives it back (rlock_unlock_as()).
 * rlock 0.5 did this inside the library (rlock_config.shared_reads_ms, now
 * ignored); the part to copy is struct shared_read and its three functions.
 *
 * Caveats -- what the library does for a thread's own read hold and this
 * code does not:
 * - Per-thread truth is the application's. Redis, rlockctl and Redisson see
 *   ONE reader, "<client id>:<owner>" with hold count 1.
 *   rlock_is_held_by_current_thread() and rlock_hold_count() answer 0 on a
 *   joined thread: ask the local count, or rlock_is_held_by(read, owner).
 * - A join does not ask Redis. A loss of the shared hold (forced away,
 *   expired, a failover) is found by the watchdog; on_lock_lost and
 *   on_event (RLOCK_EVENT_LOCK_LOST, event.owner) name the shared owner, not
 *   the threads: the callback has to tell them (here: s->lost, after which
 *   nobody joins and each joined thread's unlock answers RLOCK_ELOST).
 * - No re-entry: a thread that holds must not lock again (after the join
 *   time it would wait for its own unlock). Keep a thread-local depth if
 *   your code re-enters.
 * - No upgrade: a joined thread that asks for the write lock waits for the
 *   shared hold, that is for itself (a thread's own read hold gets
 *   RLOCK_EDEADLK instead).
 * - An explicit owner's hold outlives threads: a thread that exits or is
 *   cancelled while joined leaves the count up, and the watchdog renews the
 *   hold until the client closes. Unlock on every path
 *   (pthread_cleanup_push).
 * - Writers: a hold is joined only within join_ms of its taking, after that
 *   readers wait until it is given back and take a new one, so a writer
 *   (rlock's writers go first) waits at most join_ms plus the longest read
 *   beyond what it waits for readers with holds of their own. Without the
 *   limit, overlapping readers would keep the hold for ever.
 * - One call at a time per owner and lock (rlock_lock_as refuses a second
 *   with RLOCK_EINVAL): the mutex is held across the Redis calls, so readers
 *   that come while the hold is taken or given back wait for that call.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <rlock.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define JOIN_MS 20 /* the demonstration's join time */

struct shared_read {
    rlock *read;         /* the read handle of the lock */
    uint64_t owner;      /* the shared hold's owner: rlock_owner_new() */
    long long join_ms;   /* how long after its taking the hold may be joined */
    pthread_mutex_t mu;  /* guards the fields below and the Redis calls for owner */
    pthread_cond_t gone; /* signalled when the hold is given back */
    int count;           /* joined threads; 0: no hold */
    long long taken_ms;  /* when the hold was taken (CLOCK_MONOTONIC) */
    atomic_int lost;     /* the hold was lost (set by the loss callback) */
    unsigned long takes; /* holds taken in Redis (for the demonstration) */
};

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void shared_read_init(struct shared_read *s, rlock *read, long long join_ms) {
    s->read = read;
    s->owner = rlock_owner_new();
    s->join_ms = join_ms;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->gone, NULL);
    s->count = 0;
    s->taken_ms = 0;
    atomic_init(&s->lost, 0);
    s->takes = 0;
}

/* Call from on_event: a loss of the shared owner's hold is every joined thread's. */
static void shared_read_event(struct shared_read *s, const rlock_event *ev) {
    if (ev->kind == RLOCK_EVENT_LOCK_LOST && ev->owner == s->owner)
        atomic_store(&s->lost, 1);
}

/* Joins the shared hold, or takes it for s->owner (waiting as rlock_lock does). */
static int shared_read_lock(struct shared_read *s) {
    int rc = RLOCK_OK;
    pthread_mutex_lock(&s->mu);
    /* a hold too old to join (or lost) is drained first: a writer gets in */
    while (s->count > 0 && (now_ms() - s->taken_ms >= s->join_ms || atomic_load(&s->lost)))
        pthread_cond_wait(&s->gone, &s->mu);
    if (s->count == 0) {
        rc = rlock_lock_as(s->read, s->owner, RLOCK_LEASE_WATCHDOG);
        s->taken_ms = now_ms();
        s->takes += rc == RLOCK_OK;
    }
    s->count += rc == RLOCK_OK;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/*
 * Leaves the shared hold; the last one out gives it back. RLOCK_ELOST once
 * the hold was lost (the thread held nothing since), RLOCK_ENOTOWNER if no
 * thread is in it, else what rlock_unlock_as answers.
 */
static int shared_read_unlock(struct shared_read *s) {
    int rc = RLOCK_OK;
    pthread_mutex_lock(&s->mu);
    if (s->count == 0) {
        pthread_mutex_unlock(&s->mu);
        return RLOCK_ENOTOWNER;
    }
    int lost = atomic_load(&s->lost);
    if (--s->count == 0) {
        rc = rlock_unlock_as(s->read, s->owner); /* after a loss: forgets it */
        atomic_store(&s->lost, 0);
        pthread_cond_broadcast(&s->gone);
    }
    pthread_mutex_unlock(&s->mu);
    return lost ? RLOCK_ELOST : rc;
}

/* ---- the demonstration ------------------------------------------------------ */

static struct shared_read shared;
static rlock *write_lock;
static atomic_int writer_in, readers_done, failed;
static int reads = 200;

static void on_event(const rlock_event *ev, void *arg) {
    (void)arg;
    shared_read_event(&shared, ev);
}

static void report(const char *what, int rc) {
    fprintf(stderr, "shared_read: %s: %s: %s\n", what, rlock_status_name(rc), rlock_last_error());
    atomic_store(&failed, 1);
}

static void *reader(void *arg) {
    (void)arg;
    for (int i = 0; i < reads && !atomic_load(&failed); i++) {
        int rc = shared_read_lock(&shared);
        if (rc != RLOCK_OK) {
            report("read lock", rc);
            break;
        }
        if (atomic_load(&writer_in)) {
            fprintf(stderr, "shared_read: a reader saw the writer inside\n");
            atomic_store(&failed, 1);
        }
        if ((rc = shared_read_unlock(&shared)) != RLOCK_OK)
            report("read unlock", rc);
    }
    atomic_fetch_add(&readers_done, 1);
    return NULL;
}

static void *writer(void *arg) {
    int threads = *(int *)arg;
    while (atomic_load(&readers_done) < threads && !atomic_load(&failed)) {
        int rc = rlock_lock(write_lock);
        if (rc != RLOCK_OK) {
            report("write lock", rc);
            break;
        }
        atomic_store(&writer_in, 1);
        nanosleep(&(struct timespec){0, 1000000L}, NULL);
        atomic_store(&writer_in, 0);
        if ((rc = rlock_unlock(write_lock)) != RLOCK_OK)
            report("write unlock", rc);
        nanosleep(&(struct timespec){0, 5000000L}, NULL);
    }
    return NULL;
}

static int run(rlock_client *client, int threads) {
    rlock *read_lock;
    pthread_t th[64], wr;
    int rc = rlock_get_rw(client, "example:shared_read", &read_lock, &write_lock);
    if (rc != RLOCK_OK) {
        report("rlock_get_rw", rc);
        return 1;
    }
    shared_read_init(&shared, read_lock, JOIN_MS);
    pthread_create(&wr, NULL, writer, &threads);
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, reader, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    pthread_join(wr, NULL);
    printf("shared_read: %d threads, %d reads, %lu Redis read holds, owner %llu\n", threads,
           threads * reads, shared.takes, (unsigned long long)shared.owner);
    rlock_free(read_lock);
    rlock_free(write_lock);
    return atomic_load(&failed);
}

int main(int argc, char **argv) {
    rlock_config cfg;
    rlock_client *client;
    int threads = argc > 2 ? atoi(argv[2]) : 8;
    rlock_config_init(&cfg);
    if (argc > 1)
        cfg.url = argv[1];
    if (argc > 3)
        reads = atoi(argv[3]);
    if (threads < 1 || threads > 64 || reads < 1) {
        fprintf(stderr, "usage: shared_read [URL [THREADS (1..64) [READS]]]\n");
        return 2;
    }
    cfg.on_event = on_event;
    int rc = rlock_client_open(&cfg, &client);
    if (rc != RLOCK_OK) {
        report("rlock_client_open", rc);
        return 1;
    }
    int status = run(client, threads);
    rlock_client_close(client);
    return status;
}
