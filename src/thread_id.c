/*
 * thread_id.c - thread identity and fork detection.
 *
 * Owner ids: each thread gets a number from a process-wide counter the first
 * time it asks. Numbers are never reused (unlike kernel tids or pthread_t), so
 * a new thread can never inherit a dead thread's hold in Redis.
 *
 * Thread exit: a thread that takes a lock arms a pthread key whose destructor
 * tells every open client that the thread is gone, so its holds stop being
 * renewed and expire (see docs/design.md).
 *
 * Fork: a pthread_atfork child handler bumps a generation counter; clients
 * remember the generation they were opened in, and calls on an inherited one
 * return RLOCK_ECLOSED (client.c).
 *
 * Threads: any. State: atomics and thread-locals only, plus the once-inits.
 */
#include "internal.h"

static atomic_ullong next_thread_id;
static _Thread_local uint64_t current_thread_id;
static _Thread_local int exit_watch_armed;

static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int exit_key_status;

static atomic_uint fork_generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

uint64_t rlock__thread_id(void) {
    if (current_thread_id == 0)
        current_thread_id = atomic_fetch_add(&next_thread_id, 1) + 1;
    return current_thread_id;
}

static void on_thread_exit(void *value) {
    (void)value;
    exit_watch_armed = 0; /* a later destructor that locks again re-arms it */
    if (current_thread_id != 0)
        rlock__registry_thread_exited(current_thread_id);
}

static void make_exit_key(void) {
    exit_key_status = pthread_key_create(&exit_key, on_thread_exit);
}

int rlock__thread_watch_exit(void) {
    if (exit_watch_armed)
        return RLOCK_OK;
    pthread_once(&exit_key_once, make_exit_key);
    if (exit_key_status != 0 || pthread_setspecific(exit_key, &exit_watch_armed) != 0)
        return RLOCK_ENOMEM;
    exit_watch_armed = 1;
    return RLOCK_OK;
}

unsigned rlock__fork_generation(void) {
    return atomic_load_explicit(&fork_generation, memory_order_relaxed);
}

static void fork_child(void) {
    atomic_fetch_add(&fork_generation, 1);
    rlock__registry_fork_child();
}

static void register_fork_handlers(void) {
    pthread_atfork(rlock__registry_fork_prepare, rlock__registry_fork_parent, fork_child);
}

void rlock__fork_init(void) {
    pthread_once(&fork_once, register_fork_handlers);
}
