/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * thread.c - thread identity: owner ids and the thread-exit hook.
 *
 * Ids: each thread gets a number from a process-wide counter the first time
 * it asks. Numbers are never reused (unlike kernel tids or pthread_t), so a
 * new thread can never inherit a dead thread's hold in Redis. Explicit
 * owners (rlock_owner_new) draw from the same counter, so an owner id is
 * never a thread's id either.
 *
 * Thread exit: a thread that takes a lock arms a pthread key whose
 * destructor calls the exit hook the client layer set (it drops the
 * thread's holds from every open client, so they stop being renewed and
 * expire: see docs/design.md §5).
 *
 * Threads: any. State: atomics and thread-locals, the once-init of the key,
 * and the hook (written once, before any thread is watched).
 */
#include "internal.h"

static atomic_ullong next_owner_id;
static _Thread_local uint64_t current_thread_id;
static _Thread_local int exit_watch_armed;

static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int exit_key_status;
static void (*_Atomic exit_hook)(uint64_t thread_id);

uint64_t rlock__owner_id_new(void) {
    return atomic_fetch_add(&next_owner_id, 1) + 1;
}

uint64_t rlock__thread_id(void) {
    if (current_thread_id == 0)
        current_thread_id = rlock__owner_id_new();
    return current_thread_id;
}

static void on_thread_exit(void *value) {
    void (*hook)(uint64_t) = atomic_load(&exit_hook);
    (void)value;
    exit_watch_armed = 0; /* a later destructor that locks again re-arms it */
    if (current_thread_id != 0 && hook != NULL)
        hook(current_thread_id);
}

static void make_exit_key(void) {
    exit_key_status = pthread_key_create(&exit_key, on_thread_exit);
}

void rlock__thread_set_exit_hook(void (*hook)(uint64_t thread_id)) {
    atomic_store(&exit_hook, hook);
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
