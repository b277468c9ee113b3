/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory.c - bench_rlock memory: client heap and Redis memory per handle, held
 * lock and waiter (run.sh section 7).
 */
#include <malloc.h>
#include <unistd.h>

#include "bench_rlock.h"

/* Bytes the process has malloc'ed and not freed (all arenas, plus mmap'ed blocks). */
static long long heap_bytes(void) {
    struct mallinfo2 mi = mallinfo2();
    return (long long)mi.uordblks + (long long)mi.hblkhd;
}

typedef struct mem_waiter {
    rlock *lock;
    pthread_barrier_t *go;
    atomic_long *errors;
} mem_waiter;

static void *mem_waiter_main(void *arg) {
    mem_waiter *w = arg;
    /* This thread's malloc bookkeeping (glibc's per-thread cache header) is
     * made now, not in the library; volatile, or the compiler drops the pair. */
    void *volatile first = malloc(64);
    free(first);
    pthread_barrier_wait(w->go);
    if (check(rlock_lock(w->lock), "rlock_lock (waiter)") < 0 ||
        check(rlock_unlock(w->lock), "rlock_unlock (waiter)") < 0)
        atomic_fetch_add(w->errors, 1);
    return NULL;
}

/*
 * Heap per waiting thread: W threads already created and parked, then sent
 * into rlock_lock() on locks the main thread holds (one shared lock, or one
 * lock each); measured once they are all asleep.
 */
static double mem_waiters(rlock_client *c, redisContext *redis, int nw, int shared_lock,
                          atomic_long *errors) {
    rlock **locks = calloc((size_t)nw, sizeof *locks);
    mem_waiter *ws = calloc((size_t)nw, sizeof *ws);
    pthread_t *tids = calloc((size_t)nw, sizeof *tids);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)nw + 1);
    int nlocks = shared_lock ? 1 : nw;
    for (int i = 0; i < nlocks; i++) {
        locks[i] = get_lock(c, "bench:mem:wait:%ld:%ld", shared_lock, i);
        check(rlock_lock(locks[i]), "rlock_lock (main)");
    }
    for (int i = 0; i < nw; i++) {
        ws[i] = (mem_waiter){locks[shared_lock ? 0 : i], &go, errors};
        pthread_create(&tids[i], NULL, mem_waiter_main, &ws[i]);
    }
    raw_sleep_ms(100); /* let every thread make its malloc cache */
    long long before = heap_bytes();
    pthread_barrier_wait(&go);
    wait_scripts_quiet(redis, 200, 20000);
    raw_sleep_ms(100);
    long long after = heap_bytes();
    for (int i = 0; i < nlocks; i++)
        check(rlock_unlock(locks[i]), "rlock_unlock (main)");
    for (int i = 0; i < nw; i++)
        pthread_join(tids[i], NULL);
    for (int i = 0; i < nlocks; i++)
        rlock_free(locks[i]);
    pthread_barrier_destroy(&go);
    free(locks);
    free(ws);
    free(tids);
    return (double)(after - before) / nw;
}

/*
 * used_memory once it has settled: Redis resizes its key tables in the
 * background (serverCron) after many keys come or go, which would otherwise
 * land in whichever measurement runs next.
 */
static long long redis_memory(redisContext *redis) {
    rstats s;
    long long last = -1;
    for (int i = 0; i < 50; i++) {
        rstats_take(redis, "memory", &s);
        if (last >= 0 && llabs(s.used_memory - last) < 512)
            break;
        last = s.used_memory;
        raw_sleep_ms(200);
    }
    return s.used_memory;
}

/*
 * glibc counts chunks parked in a thread's malloc cache (tcache) as in use:
 * every thread that ever freed a few small blocks would look like it holds
 * them. The memory figures are taken with the cache off, by re-running
 * ourselves with the tunable set.
 */
void without_tcache(char **argv) {
    const char *t = getenv("GLIBC_TUNABLES");
    if (t != NULL && strstr(t, "glibc.malloc.tcache_count=0") != NULL)
        return;
    setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", 1);
    execv("/proc/self/exe", argv);
    perror("execv"); /* carry on with the cache: figures a little high */
}

int bench_memory(const options *o) {
    long n = o->count;
    /* One arena: a thread that finds its arena busy may get a new one, whose
     * bookkeeping mallinfo2() would count as in use. */
    mallopt(M_ARENA_MAX, 1);
    rlock_client *c = open_client(o, 0, 0);
    redisContext *redis = raw_or_exit(o->url);
    atomic_long errors = 0;
    rlock **locks = calloc((size_t)n, sizeof *locks);
    rlock *warm = get_lock(c, "bench:mem:warm:%ld:%ld", (long)getpid(), 0);
    check(rlock_lock(warm), "rlock_lock");
    check(rlock_unlock(warm), "rlock_unlock");
    rlock_free(warm);
    fprintf(stderr, "memory: %ld handles and held locks, %d waiting threads\n", n, o->waiters);

    long long h0 = heap_bytes();
    for (long k = 0; k < n; k++)
        locks[k] = get_lock(c, "bench:mem:%ld:%06ld", (long)getpid(), k);
    long long h1 = heap_bytes(), r0 = redis_memory(redis);
    for (long k = 0; k < n; k++)
        if (check(rlock_lock(locks[k]), "rlock_lock") < 0)
            atomic_fetch_add(&errors, 1);
    long long h2 = heap_bytes(), r1 = redis_memory(redis);
    for (long k = 0; k < n; k++)
        if (check(rlock_unlock(locks[k]), "rlock_unlock") < 0)
            atomic_fetch_add(&errors, 1);
    long long h3 = heap_bytes();
    for (long k = 0; k < n; k++)
        rlock_free(locks[k]);
    long long h4 = heap_bytes();

    /* A first, unmeasured pass grows the connection pool to its full size
     * (W threads asking at once): the pool is a per-client cost. */
    mem_waiters(c, redis, o->waiters, 0, &errors);
    double same = mem_waiters(c, redis, o->waiters, 1, &errors);
    double own = mem_waiters(c, redis, o->waiters, 0, &errors);
    rlock_client_close(c);
    redisFree(redis);
    free(locks);
    jsonw j;
    j_begin(&j, "memory");
    j_int(&j, "locks", n);
    j_int(&j, "waiters", o->waiters);
    j_num(&j, "heap_per_handle", (double)(h1 - h0) / (double)n);
    j_num(&j, "heap_per_held_lock", (double)(h2 - h1) / (double)n);
    j_num(&j, "heap_left_after_unlock", (double)(h3 - h1) / (double)n);
    j_num(&j, "heap_left_after_free", (double)(h4 - h0) / (double)n);
    j_num(&j, "heap_per_waiter_same_lock", same);
    j_num(&j, "heap_per_waiter_own_lock", own);
    j_num(&j, "redis_bytes_per_held_lock", (double)(r1 - r0) / (double)n);
    j_int(&j, "errors", atomic_load(&errors));
    j_end(&j);
    return atomic_load(&errors) ? 1 : 0;
}
