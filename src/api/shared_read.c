/*
 * shared_read.c - shared read holds (rlock_config.shared_reads_ms): the
 * calling threads of one client that read-lock one read-write lock share
 * one Redis read hold, taken for an explicit owner id of its own (fresh for
 * every hold). The first reader takes it; for shared_reads_ms after that
 * (its join time) readers join it with a local count, and it stays taken
 * while idle (no joined holds) so that the next reader joins too; after
 * the join time only the threads in it re-enter, and the last to leave
 * gives it back -- or, if it is idle at that time, the releaser thread
 * does. Everything else -- a lease, an _as call, a reader that comes while
 * the hold is being taken or given back, or after its join time -- takes a
 * hold of its own through the generic path, so a waiting writer holds new
 * readers back after at most shared_reads_ms (docs/design.md section 13).
 *
 * Why: a read cycle in Redisson's layout writes a key per hold and reads
 * the mode and the writers' set on the server's one thread, two round trips
 * per cycle; joining takes both away from every reader but the first.
 *
 * The renewal, the loss of the shared hold and its release are the generic
 * code's (acquire.c, release.c, the holds table) for that explicit owner,
 * on the state's own read handle: this file only decides who goes to Redis
 * and counts the joined holds per thread, so that each thread's hold count,
 * its "held" answer, its upgrade's RLOCK_EDEADLK and its RLOCK_ELOST stay
 * its own.
 *
 * One state per (client, lock name), pointed to by both handles of every
 * rlock_get_rw() pair of that name, freed with the last of them.
 *
 * Threads: application threads (lock, unlock, queries), exiting threads
 * (thread_gone, through registry.c), the client's releaser thread.
 * Locking: client->mutex guards the client's chains and each state's refs;
 * s->mutex guards the rest of a state; the releaser's mutex guards
 * releaser_due_ms. Order: registry mutex, client->mutex, s->mutex, then the
 * holds table's or the releaser's. No mutex is held across a Redis call.
 */
#include <string.h>

#include "api.h"

enum {
    SHARED_FREE,      /* no shared hold: the next reader takes one */
    SHARED_TAKING,    /* a thread is taking it: other readers take their own */
    SHARED_HELD,      /* taken (count may be 0: idle): joins until joins_until_ms */
    SHARED_RELEASING  /* being given back: other readers take their own */
};

/* How long the releaser waits to try again after a release that failed. */
#define RELEASE_RETRY_MS 100

/* A thread's joined holds of the shared hold. */
typedef struct joined joined;
struct joined {
    joined *next;
    uint64_t thread;
    long long count;            /* >= 1 while listed */
};

struct rlock__shared_read {
    rlock__shared_read *next;   /* the client's bucket chain; guarded by client->mutex */
    int refs;                   /* handles and releaser passes using it; guarded by
                                   client->mutex */
    rlock *reader;              /* owned read handle of the name, the shared hold's calls' */
    pthread_mutex_t mutex;      /* guards the fields below */
    int phase;                  /* SHARED_* */
    uint64_t holder;            /* the explicit owner id of the hold taken last */
    int holder_unsure;          /* its last acquire's outcome is unknown (RLOCK_EIO): the
                                   next take re-sends it for the same owner */
    int64_t joins_until_ms;     /* its join time's end (monotonic ms) */
    long long count;            /* joined holds of all threads: the sum of readers' counts */
    joined *readers;            /* owned list */
};

static rlock__shared_read **bucket(rlock_client *c, const char *name, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 16777619u;
    return &c->shared_reads[h % RLOCK__SHARED_READ_BUCKETS];
}

static int same_name(const rlock *a, const rlock *b) {
    return a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

/* A state for read_lock's name (client->mutex held); NULL if out of memory. */
static rlock__shared_read *new_state(rlock_client *c, const rlock *read_lock) {
    rlock__shared_read *s = rlock__calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->reader = rlock__handle_new(c, &rlock__rw_read, read_lock->name, read_lock->name_len);
    if (s->reader == NULL) {
        rlock__free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mutex, NULL);
    return s;
}

int rlock__shared_read_attach(rlock_client *c, rlock *read_lock, rlock *write_lock) {
    if (c->settings.shared_reads_ms == 0)
        return RLOCK_OK;
    pthread_mutex_lock(&c->mutex);
    rlock__shared_read **head = bucket(c, read_lock->name, read_lock->name_len), *s = *head;
    while (s != NULL && !same_name(s->reader, read_lock))
        s = s->next;
    if (s == NULL && (s = new_state(c, read_lock)) != NULL) {
        s->next = *head;
        *head = s;
    }
    if (s != NULL) {
        s->refs += 2;
        read_lock->shared_read = write_lock->shared_read = s;
    }
    pthread_mutex_unlock(&c->mutex);
    return s != NULL ? RLOCK_OK : rlock__fail(RLOCK_ENOMEM, 0, "out of memory");
}

static void free_state(rlock__shared_read *s) {
    while (s->readers != NULL) {
        joined *r = s->readers;
        s->readers = r->next;
        rlock__free(r);
    }
    pthread_mutex_destroy(&s->mutex);
    rlock__handle_free(s->reader);
    rlock__free(s);
}

/*
 * Drops a reference to s. The last frees it if it holds nothing; one that
 * still holds (idle, or joined by threads that have no handle left) stays
 * in the client's chains, for the releaser (whose pass then frees it) or
 * for the next handle of the name.
 */
static void unref(rlock_client *c, rlock__shared_read *s) {
    pthread_mutex_lock(&c->mutex);
    pthread_mutex_lock(&s->mutex);
    int last = --s->refs == 0 && s->phase == SHARED_FREE;
    pthread_mutex_unlock(&s->mutex);
    if (last) {
        rlock__shared_read **link = bucket(c, s->reader->name, s->reader->name_len);
        while (*link != s)
            link = &(*link)->next;
        *link = s->next;
    }
    pthread_mutex_unlock(&c->mutex);
    if (last)
        free_state(s);
}

void rlock__shared_read_free_all(rlock_client *c) {
    for (size_t i = 0; i < RLOCK__SHARED_READ_BUCKETS; i++) {
        while (c->shared_reads[i] != NULL) {
            rlock__shared_read *s = c->shared_reads[i];
            c->shared_reads[i] = s->next;
            free_state(s);
        }
    }
}

void rlock__shared_read_detach(rlock *lock) {
    rlock__shared_read *s = lock->shared_read;
    if (s == NULL)
        return;
    lock->shared_read = NULL;
    unref(lock->client, s);
}

/* ---- the state's bookkeeping (s->mutex held) ---------------------------------------------- */

static joined **find(rlock__shared_read *s, uint64_t thread) {
    joined **link = &s->readers;
    while (*link != NULL && (*link)->thread != thread)
        link = &(*link)->next;
    return link;
}

static rlock__owner holder_of(const rlock__shared_read *s) {
    return (rlock__owner){.id = s->holder, .is_thread = 0};
}

/* Whether the shared hold is known lost (reported once, by rlock__known_hold). */
static int holder_lost(const rlock__shared_read *s) {
    rlock__owner holder = holder_of(s);
    return rlock__known_hold(s->reader, &rlock__rw_read, &holder) == RLOCK__HOLD_LOST;
}

/* Takes *link's thread out of the shared hold: all its joined holds. */
static void drop(rlock__shared_read *s, joined **link) {
    joined *r = *link;
    s->count -= r->count;
    *link = r->next;
    rlock__free(r);
}

/*
 * A lost hold whose last joined thread has learnt of it: the holds table
 * forgets it (Redis has it no more) and the next reader takes a new one.
 */
static void forget_lost_if_empty(rlock__shared_read *s) {
    if (s->count > 0 || s->phase != SHARED_HELD)
        return;
    rlock__holds_owner_gone(&s->reader->engine->holds, s->holder);
    s->phase = SHARED_FREE;
}

/* Whether the thread holds the write lock by the holds table (a downgrade's reader). */
static int may_hold_write(const rlock__shared_read *s, const rlock__owner *thread) {
    return rlock__known_hold(s->reader, &rlock__rw_write, thread) == RLOCK__HOLD_HELD;
}

/* Tells the releaser to look at the state no later than due_ms. */
static void wake_releaser(rlock_client *c, int64_t due_ms) {
    pthread_mutex_lock(&c->releaser.mutex);
    if (c->releaser_due_ms == 0 || c->releaser_due_ms > due_ms) {
        c->releaser_due_ms = due_ms;
        pthread_cond_signal(&c->releaser.wake);
    }
    pthread_mutex_unlock(&c->releaser.mutex);
}

/* ---- giving back --------------------------------------------------------------------------- */

/*
 * Gives the shared hold back (s is SHARED_RELEASING, its mutex NOT held).
 * A failure that leaves it in Redis keeps it: thread (0: none, an idle
 * hold) gets one joined hold back and may unlock again, as after a failed
 * unlock of a hold of its own; an idle one waits for the next reader or
 * the releaser. Returns the release's status; *kept 1 if kept.
 */
static int give_back(rlock__shared_read *s, uint64_t thread, int *kept) {
    rlock__owner holder = holder_of(s);
    int status = rlock__release(s->reader, &holder);
    *kept = status != RLOCK_OK && status != RLOCK_ELOST && status != RLOCK_ENOTOWNER;
    pthread_mutex_lock(&s->mutex);
    s->phase = *kept ? SHARED_HELD : SHARED_FREE;
    if (*kept && thread != 0) {
        joined **link = find(s, thread);
        if (*link == NULL && (*link = rlock__calloc(1, sizeof(**link))) != NULL)
            (*link)->thread = thread;
        if (*link != NULL) {
            (*link)->count++;
            s->count++;
        } /* else: idle, as if the thread had unlocked */
    }
    pthread_mutex_unlock(&s->mutex);
    return status;
}

/* ---- taking, joining ------------------------------------------------------------------- */

/* A taking thread cancelled in its wait: the state is free again, then the call's own cleanup. */
typedef struct taking {
    rlock__shared_read *s;
    joined *me;                 /* owned: the thread's entry once it holds */
    const rlock__call *call;
} taking;

static void taking_cancelled(void *arg) {
    taking *t = arg;
    pthread_mutex_lock(&t->s->mutex);
    t->s->phase = SHARED_FREE;
    pthread_mutex_unlock(&t->s->mutex);
    rlock__free(t->me);
    t->call->on_cancel(t->call->arg);
}

/* The state is SHARED_FREE and its mutex held: takes the shared hold for the thread (unlocks). */
static int take(rlock *lock, rlock__shared_read *s, const rlock__owner *thread, long long wait_ms,
                const rlock__call *call) {
    joined *me = rlock__calloc(1, sizeof(*me));
    if (me == NULL) {
        pthread_mutex_unlock(&s->mutex);
        return RLOCK__NOT_SHARED;
    }
    s->phase = SHARED_TAKING;
    if (!s->holder_unsure) /* else the same owner: a re-sent acquire is idempotent */
        s->holder = rlock__owner_id_new();
    rlock__owner holder = holder_of(s);
    pthread_mutex_unlock(&s->mutex);

    taking t = {s, me, call};
    rlock__call mine = *call;
    mine.on_cancel = taking_cancelled;
    mine.arg = &t;
    int status = rlock__acquire(s->reader, &holder, wait_ms, RLOCK_LEASE_WATCHDOG, &mine);

    int64_t until = 0;
    pthread_mutex_lock(&s->mutex);
    s->phase = SHARED_FREE;
    s->holder_unsure = status == RLOCK_EIO; /* it may hold in Redis */
    if (status == RLOCK_OK) {
        me->thread = thread->id;
        me->count = 1;
        me->next = s->readers;
        s->readers = me;
        s->count = 1;
        s->phase = SHARED_HELD;
        until = s->joins_until_ms = rlock__now_ms() + lock->client->settings.shared_reads_ms;
        me = NULL;
    }
    pthread_mutex_unlock(&s->mutex);
    rlock__free(me);
    if (status == RLOCK_OK)
        wake_releaser(lock->client, until); /* it gives the hold back if idle then */
    return status;
}

/* The state is SHARED_HELD and its mutex held: one more joined hold of the thread. */
static int join(rlock *lock, rlock__shared_read *s, joined **link, uint64_t thread) {
    if (holder_lost(s)) {
        s->joins_until_ms = 0;
        if (*link == NULL) {
            forget_lost_if_empty(s);
            return RLOCK__NOT_SHARED;
        }
        drop(s, link);
        forget_lost_if_empty(s);
        return rlock__fail(RLOCK_ELOST, 0, "read-write lock '%.200s': the client's shared read "
                                           "hold was lost; this thread's joined holds are gone, "
                                           "nothing acquired", lock->name);
    }
    if (*link == NULL) {
        *link = rlock__calloc(1, sizeof(**link));
        if (*link == NULL)
            return RLOCK__NOT_SHARED;
        (*link)->thread = thread;
    }
    (*link)->count++;
    s->count++;
    rlock__count_acquired(lock, 0, 0);
    return RLOCK_OK;
}

/* An upgrade: a thread with joined read holds asks for the write lock. */
static int refuse_upgrade(rlock *lock, long long count) {
    return rlock__fail(RLOCK_EDEADLK, 0, "read-write lock '%.200s': the calling thread holds its "
                                         "read lock (%lld joined holds of the client's shared "
                                         "read hold) and asks for its write lock: it would wait "
                                         "for itself", lock->name, count);
}

/*
 * A thread of this client asks for the write lock (s->mutex held; unlocks).
 * Nobody joins any more, and an idle hold goes now: the writer would
 * otherwise wait for its own client's hold that no thread uses.
 */
static int writer_comes(rlock *lock, rlock__shared_read *s, long long mine) {
    int kept;
    if (mine > 0) {
        pthread_mutex_unlock(&s->mutex);
        return refuse_upgrade(lock, mine);
    }
    s->joins_until_ms = 0;
    if (s->phase != SHARED_HELD || s->count > 0) {
        pthread_mutex_unlock(&s->mutex);
        return RLOCK__NOT_SHARED;
    }
    s->phase = SHARED_RELEASING;
    pthread_mutex_unlock(&s->mutex);
    (void)give_back(s, 0, &kept); /* if kept, the writer waits for it as for any reader */
    return RLOCK__NOT_SHARED;
}

int rlock__shared_read_lock(rlock *lock, const rlock__owner *thread, long long wait_ms,
                            long long lease_ms, const rlock__call *call) {
    rlock__shared_read *s = lock->shared_read;
    int kept;
    pthread_mutex_lock(&s->mutex);
    joined **link = find(s, thread->id);
    long long mine = *link != NULL ? (*link)->count : 0;
    if (lock->kind == &rlock__rw_write)
        return writer_comes(lock, s, mine); /* unlocks */
    if (lease_ms != RLOCK_LEASE_WATCHDOG) {
        pthread_mutex_unlock(&s->mutex);
        return RLOCK__NOT_SHARED;
    }
    int status = RLOCK__NOT_SHARED;
    if (s->phase == SHARED_HELD && (mine > 0 || rlock__now_ms() < s->joins_until_ms)) {
        status = join(lock, s, link, thread->id);
    } else if (s->phase == SHARED_HELD && s->count == 0) {
        /* Idle past its join time, the releaser not there yet: give it back, take anew. */
        s->phase = SHARED_RELEASING;
        pthread_mutex_unlock(&s->mutex);
        (void)give_back(s, 0, &kept);
        pthread_mutex_lock(&s->mutex);
    }
    if (status == RLOCK__NOT_SHARED && s->phase == SHARED_FREE && !may_hold_write(s, thread))
        status = take(lock, s, thread, wait_ms, call); /* unlocks */
    else
        pthread_mutex_unlock(&s->mutex);
    if (status == RLOCK_OK)
        (void)rlock__thread_watch_exit(); /* its joined holds end when it exits */
    return status;
}

/* ---- unlocking --------------------------------------------------------------------------- */

int rlock__shared_read_unlock(rlock *lock, const rlock__owner *thread) {
    rlock__shared_read *s = lock->shared_read;
    int kept;
    pthread_mutex_lock(&s->mutex);
    joined **link = find(s, thread->id);
    if (lock->kind != &rlock__rw_read || *link == NULL) {
        pthread_mutex_unlock(&s->mutex);
        return RLOCK__NOT_SHARED;
    }
    if (holder_lost(s)) { /* as for a hold of its own: ELOST unless this was its last */
        long long had = (*link)->count;
        drop(s, link);
        forget_lost_if_empty(s);
        pthread_mutex_unlock(&s->mutex);
        return rlock__fail(had >= 2 ? RLOCK_ELOST : RLOCK_ENOTOWNER, 0,
                           "read-write lock '%.200s': the client's shared read hold was lost "
                           "(reported); this thread's %lld joined holds are gone", lock->name,
                           had);
    }
    long long left = --(*link)->count;
    s->count--;
    if (left == 0)
        drop(s, link);
    /* Still joined by others, or idle in its join time (the releaser comes at its end). */
    if (s->count > 0 || rlock__now_ms() < s->joins_until_ms) {
        pthread_mutex_unlock(&s->mutex);
        rlock__count_released(lock, left, 0);
        return RLOCK_OK;
    }
    s->phase = SHARED_RELEASING;
    pthread_mutex_unlock(&s->mutex);
    return give_back(s, thread->id, &kept); /* its last joined hold: the release's answer */
}

/* ---- queries, thread exit ---------------------------------------------------------------- */

long long rlock__shared_read_joined(rlock *lock, uint64_t thread, uint64_t *holder) {
    rlock__shared_read *s = lock->shared_read;
    long long count = 0;
    if (s == NULL || lock->kind != &rlock__rw_read)
        return 0;
    pthread_mutex_lock(&s->mutex);
    joined **link = find(s, thread);
    if (*link != NULL && !holder_lost(s)) {
        count = (*link)->count;
        *holder = s->holder;
    }
    pthread_mutex_unlock(&s->mutex);
    return count;
}

void rlock__shared_read_thread_gone(rlock_client *c, uint64_t thread) {
    int idle = 0;
    pthread_mutex_lock(&c->mutex);
    for (size_t i = 0; i < RLOCK__SHARED_READ_BUCKETS; i++) {
        for (rlock__shared_read *s = c->shared_reads[i]; s != NULL; s = s->next) {
            pthread_mutex_lock(&s->mutex);
            joined **link = find(s, thread);
            if (*link != NULL) {
                drop(s, link);
                idle |= s->count == 0 && s->phase == SHARED_HELD;
            }
            pthread_mutex_unlock(&s->mutex);
        }
    }
    pthread_mutex_unlock(&c->mutex);
    if (idle) /* the releaser gives it back, past its join time (no Redis call here) */
        wake_releaser(c, rlock__now_ms());
}

/* ---- the releaser ------------------------------------------------------------------------ */

/*
 * One pass: gives back the idle holds past their join time (every idle
 * hold if all), one at a time, each referenced while its mutexes are let
 * go. Returns when the next one is due (0: none known).
 */
static int64_t release_idle(rlock_client *c, int all) {
    int64_t next = 0;
    for (;;) {
        rlock__shared_read *due = NULL;
        int64_t now = rlock__now_ms();
        next = 0;
        pthread_mutex_lock(&c->mutex);
        for (size_t i = 0; i < RLOCK__SHARED_READ_BUCKETS && due == NULL; i++) {
            for (rlock__shared_read *s = c->shared_reads[i]; s != NULL && due == NULL;
                 s = s->next) {
                pthread_mutex_lock(&s->mutex);
                if (s->phase == SHARED_HELD && s->count == 0 && (all || now >= s->joins_until_ms)) {
                    s->phase = SHARED_RELEASING;
                    s->refs++;
                    due = s;
                } else if (s->phase == SHARED_HELD && now < s->joins_until_ms &&
                           (next == 0 || s->joins_until_ms < next)) {
                    next = s->joins_until_ms;
                }
                pthread_mutex_unlock(&s->mutex);
            }
        }
        pthread_mutex_unlock(&c->mutex);
        if (due == NULL)
            return next;
        int kept;
        (void)give_back(due, 0, &kept);
        if (kept && all) { /* closing: not renewed any more, it ends with its lease */
            pthread_mutex_lock(&due->mutex);
            rlock__holds_owner_gone(&due->reader->engine->holds, due->holder);
            due->phase = SHARED_FREE;
            pthread_mutex_unlock(&due->mutex);
        }
        unref(c, due);
        if (kept && !all)
            return now + RELEASE_RETRY_MS;
    }
}

static void *releaser_main(void *arg) {
    rlock_client *c = arg;
    rlock__worker *w = &c->releaser;
    pthread_mutex_lock(&w->mutex);
    while (!w->stop) {
        int64_t due = c->releaser_due_ms;
        if (due == 0) {
            pthread_cond_wait(&w->wake, &w->mutex);
            continue;
        }
        if (rlock__now_ms() < due) {
            rlock__cond_wait_until(&w->wake, &w->mutex, due);
            continue;
        }
        c->releaser_due_ms = 0;
        pthread_mutex_unlock(&w->mutex);
        int64_t next = release_idle(c, 0);
        pthread_mutex_lock(&w->mutex);
        if (next != 0 && (c->releaser_due_ms == 0 || next < c->releaser_due_ms))
            c->releaser_due_ms = next;
    }
    pthread_mutex_unlock(&w->mutex);
    /* Closing: no one will join them now. */
    (void)release_idle(c, 1);
    return NULL;
}

int rlock__shared_read_start(rlock_client *c) {
    int status = rlock__worker_init(&c->releaser);
    if (status != RLOCK_OK)
        return status;
    return rlock__worker_start(&c->releaser, releaser_main, c);
}

void rlock__shared_read_stop(rlock_client *c) {
    rlock__worker_stop(&c->releaser);
    rlock__worker_destroy(&c->releaser);
}
