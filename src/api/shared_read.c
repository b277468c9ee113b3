/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shared_read.c - shared read holds (rlock_config.shared_reads_ms): the
 * threads of one client that read-lock one read-write lock share one Redis
 * read hold, taken for an explicit owner id of its own (fresh for every
 * hold). The first reader takes it; for shared_reads_ms after that (its
 * join time) readers join it with a local count, and it stays taken while
 * idle (no joined holds) so that the next reader joins too; after the join
 * time only the threads in it re-enter, and the last to leave gives it
 * back -- or, if it is idle at that time, the releaser thread does.
 * Everything else -- a lease, an explicit owner, a reader that comes while
 * the hold is being taken or given back, or after its join time, or that
 * holds a hold of its own already -- takes a hold of its own through the
 * generic path, so a waiting writer holds new readers back after at most
 * shared_reads_ms (docs/design.md section 13).
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
 * its own (also through the _as calls with the thread's id).
 *
 * One state per (client, lock name), pointed to by both handles of every
 * rlock_get_rw() pair of that name; freed with the last of them, or, if it
 * still holds then, by the releaser's pass that gives its hold back.
 *
 * Threads: application threads (lock, unlock, queries), exiting threads
 * (thread_gone, through registry.c), the client's releaser thread.
 * Locking: client->mutex guards the client's chains and each state's refs;
 * s->mutex guards the rest of a state; the releaser's mutex guards
 * releaser_due_ms. Order: registry mutex, client->mutex, s->mutex, then the
 * holds table's; the releaser's mutex is taken with none of them held (but
 * for the registry mutex, on a thread's exit). No mutex is held across a
 * Redis call.
 */
#include <string.h>

#include "api.h"

enum {
    SHARED_FREE,      /* no shared hold: the next reader takes one */
    SHARED_TAKING,    /* a thread is taking it: other readers take their own */
    SHARED_HELD,      /* taken (count may be 0: idle): joins until joins_until_ms */
    SHARED_RELEASING  /* being given back: other readers take their own */
};

/* How long to wait before giving back again an idle hold whose release failed. */
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
    int take_unsure;            /* the last take's outcome is unknown (RLOCK_EIO, cancelled):
                                   the next take re-sends it for the same owner */
    int release_failed;         /* HELD: its last give-back failed or its outcome is unknown:
                                   nobody joins; the next lock call or the releaser re-sends it */
    int writer_came;            /* a writer of the client came while it was being taken:
                                   its join time ends at once */
    int64_t joins_until_ms;     /* its join time's end (monotonic ms) */
    int64_t retry_ms;           /* release_failed: the releaser tries again then */
    long long count;            /* joined holds of all threads: the sum of readers' counts */
    joined *readers;            /* owned list */
};

/* ---- the client's states -------------------------------------------------------------- */

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

void rlock__shared_read_detach(rlock *lock) {
    rlock__shared_read *s = lock->shared_read;
    if (s == NULL)
        return;
    lock->shared_read = NULL;
    unref(lock->client, s);
}

void rlock__shared_read_free_all(rlock_client *c) {
    for (size_t i = 0; i < RLOCK__SHARED_READ_BUCKETS; i++) {
        while (c->shared_reads[i] != NULL) {
            rlock__shared_read *s = c->shared_reads[i];
            c->shared_reads[i] = s->next;
            free_state(s);
        }
    }
    rlock__worker_destroy(&c->releaser);
}

/* ---- a state's bookkeeping (s->mutex held) ---------------------------------------------- */

static joined **find(rlock__shared_read *s, uint64_t owner) {
    joined **link = &s->readers;
    while (*link != NULL && (*link)->thread != owner)
        link = &(*link)->next;
    return link;
}

static rlock__owner holder_of(const rlock__shared_read *s) {
    return (rlock__owner){.id = s->holder, .is_thread = 0};
}

/* Whether the shared hold is known lost (reported once, by rlock__known_hold). */
static int holder_lost(const rlock__shared_read *s) {
    rlock__owner holder = holder_of(s);
    return s->phase == SHARED_HELD &&
           rlock__known_hold(s->reader, &rlock__rw_read, &holder) == RLOCK__HOLD_LOST;
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

/*
 * Whether owner has holds of its own of the lock, by the holds table: a
 * reader that holds the write lock (a downgrade) or a read hold of its own
 * must not wait behind the shared owner's acquire (a waiting writer would
 * hold it back, and the writer waits for the owner), and one whose own read
 * hold was lost must be told (RLOCK_ELOST): its call goes the generic way.
 */
static int holds_own(const rlock__shared_read *s, const rlock__owner *owner) {
    return rlock__known_hold(s->reader, &rlock__rw_read, owner) != RLOCK__HOLD_NONE ||
           rlock__known_hold(s->reader, &rlock__rw_write, owner) == RLOCK__HOLD_HELD;
}

/* Tells the releaser to look at the states no later than due_ms (no-op once it stopped). */
static void wake_releaser(rlock_client *c, int64_t due_ms) {
    rlock__worker *w = &c->releaser;
    pthread_mutex_lock(&w->mutex);
    if (!w->stop && (c->releaser_due_ms == 0 || c->releaser_due_ms > due_ms)) {
        c->releaser_due_ms = due_ms;
        pthread_cond_signal(&w->wake);
    }
    pthread_mutex_unlock(&w->mutex);
}

/* ---- giving back ------------------------------------------------------------------------- */

/*
 * Gives the shared hold back (s is SHARED_RELEASING, its mutex NOT held).
 * What the holds table says afterwards decides: the hold is gone (released,
 * or found lost), or Redis may still have it (a refusal, or an unknown
 * outcome). Then it is kept, marked release_failed, so that nobody joins a
 * hold that may be gone; thread (0: none, an idle hold) gets one joined
 * hold back and may unlock again, as after a failed unlock of a hold of its
 * own; an idle one is given back by the next lock call or by the releaser
 * (woken for it). Returns the release's status.
 */
static int give_back(rlock_client *c, rlock__shared_read *s, uint64_t thread) {
    rlock__owner holder = holder_of(s);
    int status = rlock__release(s->reader, &holder);
    if (status == RLOCK_OK && thread == 0) /* no unlock call of the application's: */
        rlock__count(&c->events.stats, RLOCK__COUNT_UNLOCKS, (unsigned long long)-1); /* uncounted */
    int kept = status != RLOCK_OK &&
               rlock__known_hold(s->reader, &rlock__rw_read, &holder) == RLOCK__HOLD_HELD;
    if (status != RLOCK_OK && !kept) /* gone: a tombstone no call of this owner will clear */
        rlock__holds_owner_gone(&s->reader->engine->holds, holder.id);
    int64_t retry_ms = rlock__now_ms() + RELEASE_RETRY_MS;
    pthread_mutex_lock(&s->mutex);
    s->phase = kept ? SHARED_HELD : SHARED_FREE;
    s->release_failed = kept;
    s->retry_ms = retry_ms;
    if (kept && thread != 0) {
        joined **link = find(s, thread);
        if (*link == NULL && (*link = rlock__calloc(1, sizeof(**link))) != NULL)
            (*link)->thread = thread;
        if (*link != NULL) {
            (*link)->count++;
            s->count++;
        } /* else: idle, as if the thread had unlocked */
    }
    int idle = kept && s->count == 0;
    pthread_mutex_unlock(&s->mutex);
    if (idle)
        wake_releaser(c, retry_ms);
    return status;
}

/* ---- taking, joining --------------------------------------------------------------------- */

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
    t->s->take_unsure = 1; /* an attempt may have been sent */
    pthread_mutex_unlock(&t->s->mutex);
    rlock__free(t->me);
    t->call->on_cancel(t->call->arg);
}

/* Takes the shared hold for the thread (s is SHARED_TAKING, its mutex NOT held). */
static int take(rlock *lock, rlock__shared_read *s, uint64_t thread, long long wait_ms,
                const rlock__call *call) {
    joined *me = rlock__calloc(1, sizeof(*me));
    int status = RLOCK_ENOMEM;
    if (me != NULL) {
        rlock__owner holder = holder_of(s);
        taking t = {s, me, call};
        rlock__call mine = *call;
        mine.on_cancel = taking_cancelled;
        mine.arg = &t;
        status = rlock__acquire(s->reader, &holder, wait_ms, RLOCK_LEASE_WATCHDOG, &mine);
    }
    int64_t until = rlock__now_ms() + lock->client->settings.shared_reads_ms;
    pthread_mutex_lock(&s->mutex);
    s->phase = SHARED_FREE;
    s->take_unsure = status == RLOCK_EIO; /* it may hold in Redis */
    if (status == RLOCK_OK) {
        me->thread = thread;
        me->count = 1;
        me->next = s->readers;
        s->readers = me;
        s->count = 1;
        s->phase = SHARED_HELD;
        s->release_failed = 0;
        s->joins_until_ms = s->writer_came ? 0 : until;
        me = NULL;
    }
    s->writer_came = 0;
    pthread_mutex_unlock(&s->mutex);
    rlock__free(me);
    if (status == RLOCK_OK)
        wake_releaser(lock->client, until); /* it gives the hold back if idle then */
    return status;
}

/* The state is SHARED_HELD and its mutex held: one more joined hold of owner. */
static int join(rlock *lock, rlock__shared_read *s, joined **link, uint64_t owner) {
    if (*link == NULL) {
        *link = rlock__calloc(1, sizeof(**link));
        if (*link == NULL)
            return RLOCK__NOT_SHARED;
        (*link)->thread = owner;
    }
    (*link)->count++;
    s->count++;
    rlock__count_acquired(lock, 0, 0);
    return RLOCK_OK;
}

/* The shared hold is lost (s->mutex held): owner, if in it, is told (ELOST) and leaves it. */
static int learn_loss(rlock *lock, rlock__shared_read *s, joined **link) {
    s->joins_until_ms = 0;
    if (*link == NULL) {
        forget_lost_if_empty(s);
        return RLOCK__NOT_SHARED;
    }
    drop(s, link);
    forget_lost_if_empty(s);
    return rlock__fail(RLOCK_ELOST, 0, "read-write lock '%.200s': the client's shared read hold "
                                       "was lost; the caller's joined holds are gone, nothing "
                                       "acquired", lock->name);
}

/* What a lock call does, decided under the state's mutex. */
enum { DO_OWN, DO_DONE, DO_TAKE, DO_GIVE_BACK_THEN_TAKE, DO_CHECK_KEPT };

/*
 * Decides a read lock call of owner (s->mutex held): joins (DO_DONE with
 * *status), or leaves the state TAKING or RELEASING for the caller to act
 * on, or sends it the generic way (DO_OWN). An owner already in the shared
 * hold always re-enters it, whatever the call's lease: the generic way
 * would wait behind a waiting writer, which waits for the shared hold.
 */
static int decide_read(rlock *lock, rlock__shared_read *s, const rlock__owner *owner,
                       long long lease_ms, int *status) {
    joined **link = find(s, owner->id);
    if (holder_lost(s)) {
        *status = learn_loss(lock, s, link);
        return *status == RLOCK__NOT_SHARED ? DO_OWN : DO_DONE;
    }
    if (*link != NULL && s->release_failed) { /* its kept hold: is it still in Redis? */
        s->phase = SHARED_RELEASING;
        return DO_CHECK_KEPT;
    }
    if (*link != NULL) {
        *status = join(lock, s, link, owner->id);
        return *status == RLOCK__NOT_SHARED ? DO_OWN : DO_DONE;
    }
    if (!owner->is_thread || lease_ms != RLOCK_LEASE_WATCHDOG || holds_own(s, owner))
        return DO_OWN; /* explicit owners and leases never join; see holds_own */
    if (s->phase == SHARED_HELD && !s->release_failed && rlock__now_ms() < s->joins_until_ms) {
        *status = join(lock, s, link, owner->id);
        return *status == RLOCK__NOT_SHARED ? DO_OWN : DO_DONE;
    }
    if (s->phase == SHARED_HELD && s->count == 0) { /* idle past its join time, or kept */
        s->phase = SHARED_RELEASING;
        return DO_GIVE_BACK_THEN_TAKE;
    }
    if (s->phase != SHARED_FREE)
        return DO_OWN;
    s->phase = SHARED_TAKING;
    if (!s->take_unsure) /* else the same owner: a re-sent acquire is idempotent */
        s->holder = rlock__owner_id_new();
    return DO_TAKE;
}

/*
 * owner re-enters a hold whose give-back failed (s is RELEASING, its mutex
 * NOT held): Redis tells whether the give-back did apply. Held: the hold is
 * sound again (joins resume) and owner joins it. Gone: the holds table
 * forgets it, owner's kept hold goes with it, and owner goes on as a new
 * reader (DO_OWN here: the caller decides again). Not known: the call
 * fails with that status, nothing changed.
 */
static int check_kept(rlock *lock, rlock__shared_read *s, const rlock__owner *owner,
                      int *status) {
    rlock__owner holder = holder_of(s);
    long long held = 0;
    int asked = s->reader->kind->ask(s->reader, RLOCK__ASK_HELD, &holder, &held);
    int action = DO_DONE;
    pthread_mutex_lock(&s->mutex);
    joined **link = find(s, owner->id);
    s->phase = SHARED_HELD;
    if (asked != RLOCK_OK) {
        *status = asked;
    } else if (held) {
        s->release_failed = 0;
        *status = *link != NULL ? join(lock, s, link, owner->id) : RLOCK__NOT_SHARED;
        action = *status == RLOCK__NOT_SHARED ? DO_OWN : DO_DONE;
    } else {
        while (s->readers != NULL) /* nobody holds a hold that is gone */
            drop(s, &s->readers);
        rlock__holds_owner_gone(&s->reader->engine->holds, s->holder);
        s->phase = SHARED_FREE;
        action = DO_OWN;
    }
    pthread_mutex_unlock(&s->mutex);
    return action;
}

/* An upgrade: an owner with joined read holds asks for the write lock. */
static int refuse_upgrade(rlock *lock, long long count) {
    return rlock__fail(RLOCK_EDEADLK, 0, "read-write lock '%.200s': the caller holds its read "
                                         "lock (%lld joined holds of the client's shared read "
                                         "hold) and asks for its write lock: it would wait for "
                                         "itself", lock->name, count);
}

/*
 * Decides a write lock call (s->mutex held): an upgrade is refused; else
 * nobody joins any more, and an idle hold goes now (DO_GIVE_BACK_THEN_TAKE
 * here means "give it back, then go the generic way"): the writer would
 * otherwise wait for its own client's hold that no thread uses.
 */
static int decide_write(rlock *lock, rlock__shared_read *s, const rlock__owner *owner,
                        int *status) {
    joined **link = find(s, owner->id);
    if (*link != NULL && holder_lost(s)) {
        *status = learn_loss(lock, s, link);
        return DO_DONE;
    }
    if (*link != NULL) {
        *status = refuse_upgrade(lock, (*link)->count);
        return DO_DONE;
    }
    s->joins_until_ms = 0;
    s->writer_came = s->phase == SHARED_TAKING; /* the take, once done, ends it too */
    if (s->phase != SHARED_HELD || s->count > 0)
        return DO_OWN;
    s->phase = SHARED_RELEASING;
    return DO_GIVE_BACK_THEN_TAKE;
}

/* The shared owner's own id in an _as call: refused (its holds are the state's). */
static int refuse_holder_id(rlock *lock, const rlock__shared_read *s, const rlock__owner *owner) {
    if (owner->is_thread || owner->id != s->holder || s->phase == SHARED_FREE)
        return RLOCK__NOT_SHARED;
    return rlock__fail(RLOCK_EINVAL, 0, "read-write lock '%.200s': owner %llu is the client's "
                                        "shared read hold's (rlock_config.shared_reads_ms), not "
                                        "the caller's", lock->name, (unsigned long long)owner->id);
}

int rlock__shared_read_lock(rlock *lock, const rlock__owner *owner, long long wait_ms,
                            long long lease_ms, const rlock__call *call) {
    rlock__shared_read *s = lock->shared_read;
    int write = lock->kind == &rlock__rw_write, status = RLOCK__NOT_SHARED;
    /* Armed before it can join: its exit must drop its joined holds. */
    if (owner->is_thread && rlock__thread_watch_exit() != RLOCK_OK)
        return RLOCK__NOT_SHARED;
    pthread_mutex_lock(&s->mutex);
    int action = DO_DONE;
    status = refuse_holder_id(lock, s, owner);
    if (status == RLOCK__NOT_SHARED)
        action = write ? decide_write(lock, s, owner, &status)
                       : decide_read(lock, s, owner, lease_ms, &status);
    pthread_mutex_unlock(&s->mutex);
    if (action == DO_CHECK_KEPT)
        action = check_kept(lock, s, owner, &status);
    if (action == DO_GIVE_BACK_THEN_TAKE) {
        (void)give_back(lock->client, s, 0); /* if kept, the caller waits for it as for any */
        if (write)
            return RLOCK__NOT_SHARED;
        action = DO_OWN;
    }
    if (action == DO_OWN && !write) { /* the state may have changed: decide again, once */
        pthread_mutex_lock(&s->mutex);
        action = s->phase == SHARED_FREE ? decide_read(lock, s, owner, lease_ms, &status) : DO_OWN;
        pthread_mutex_unlock(&s->mutex);
        if (action != DO_TAKE && action != DO_DONE)
            action = DO_OWN; /* anything else the generic way: no loop */
    }
    if (action == DO_TAKE)
        return take(lock, s, owner->id, wait_ms, call);
    return action == DO_DONE ? status : RLOCK__NOT_SHARED;
}

/* ---- unlocking ----------------------------------------------------------------------------- */

int rlock__shared_read_unlock(rlock *lock, const rlock__owner *owner) {
    rlock__shared_read *s = lock->shared_read;
    if (lock->kind != &rlock__rw_read)
        return RLOCK__NOT_SHARED;
    pthread_mutex_lock(&s->mutex);
    joined **link = find(s, owner->id);
    int refused = refuse_holder_id(lock, s, owner);
    if (*link == NULL || refused != RLOCK__NOT_SHARED) {
        pthread_mutex_unlock(&s->mutex);
        return refused;
    }
    if (holder_lost(s)) { /* as for a hold of its own: ELOST unless this was its last */
        long long had = (*link)->count;
        drop(s, link);
        forget_lost_if_empty(s);
        pthread_mutex_unlock(&s->mutex);
        return rlock__fail(had >= 2 ? RLOCK_ELOST : RLOCK_ENOTOWNER, 0,
                           "read-write lock '%.200s': the client's shared read hold was lost "
                           "(reported); the caller's %lld joined holds are gone", lock->name,
                           had);
    }
    long long left = --(*link)->count;
    s->count--;
    if (left == 0)
        drop(s, link);
    /* Still joined by others, or idle in its join time (the releaser comes at its end). */
    if (s->count > 0 || (!s->release_failed && rlock__now_ms() < s->joins_until_ms)) {
        pthread_mutex_unlock(&s->mutex);
        rlock__count_released(lock, left, 0);
        return RLOCK_OK;
    }
    s->phase = SHARED_RELEASING;
    pthread_mutex_unlock(&s->mutex);
    return give_back(lock->client, s, owner->id); /* its last joined hold: the release's answer */
}

/* ---- queries, thread exit ------------------------------------------------------------------ */

long long rlock__shared_read_joined(rlock *lock, uint64_t owner, uint64_t *holder) {
    rlock__shared_read *s = lock->shared_read;
    long long count = 0;
    if (s == NULL || lock->kind != &rlock__rw_read)
        return 0;
    pthread_mutex_lock(&s->mutex);
    joined **link = find(s, owner);
    if (*link != NULL && !holder_lost(s)) {
        count = (*link)->count;
        *holder = s->holder;
    }
    pthread_mutex_unlock(&s->mutex);
    return count;
}

void rlock__shared_read_thread_gone(rlock_client *c, uint64_t thread) {
    int idle = 0;
    if (c->settings.shared_reads_ms == 0)
        return;
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

/* ---- the releaser -------------------------------------------------------------------------- */

/* When an idle hold of s is due to go (0: s holds no idle hold, nor may soon). */
static int64_t due_of(const rlock__shared_read *s) {
    if (s->phase != SHARED_HELD)
        return 0;
    if (s->release_failed)
        return s->retry_ms;
    return s->joins_until_ms > 0 ? s->joins_until_ms : 1;
}

/*
 * Finds in bucket i an idle hold due by now (every idle one if all), marks
 * it RELEASING and references it; returns it, or NULL. *next: the earliest
 * later due time seen.
 */
static rlock__shared_read *claim_due(rlock_client *c, size_t i, int all, int64_t now,
                                     int64_t *next) {
    rlock__shared_read *due = NULL;
    pthread_mutex_lock(&c->mutex);
    for (rlock__shared_read *s = c->shared_reads[i]; s != NULL && due == NULL; s = s->next) {
        pthread_mutex_lock(&s->mutex);
        int64_t at = due_of(s);
        if (at != 0 && s->count == 0 && (all || at <= now)) {
            s->phase = SHARED_RELEASING;
            s->refs++;
            due = s;
        } else if (at > now && (*next == 0 || at < *next)) {
            *next = at;
        }
        pthread_mutex_unlock(&s->mutex);
    }
    pthread_mutex_unlock(&c->mutex);
    return due;
}

/*
 * One pass over the client's states: gives back the idle holds that are
 * due (every idle hold if all: closing, when one that cannot be given back
 * is left to its lease). Returns when the next is due (0: none known).
 */
static int64_t release_idle(rlock_client *c, int all) {
    int64_t next = 0;
    for (size_t i = 0; i < RLOCK__SHARED_READ_BUCKETS; i++) {
        rlock__shared_read *s;
        while ((s = claim_due(c, i, all, rlock__now_ms(), &next)) != NULL) {
            (void)give_back(c, s, 0);
            if (all) { /* not renewed any more if kept: it ends with its lease */
                pthread_mutex_lock(&s->mutex);
                if (s->phase == SHARED_HELD) {
                    rlock__holds_owner_gone(&s->reader->engine->holds, s->holder);
                    s->phase = SHARED_FREE;
                }
                pthread_mutex_unlock(&s->mutex);
            } /* a kept one woke the releaser for its retry (give_back) */
            unref(c, s);
        }
    }
    return next;
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
    /* Destroyed by rlock__shared_read_free_all: calls still in flight may wake it. */
    rlock__worker_stop(&c->releaser);
}
