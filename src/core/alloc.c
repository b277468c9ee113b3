/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc.c - allocation wrappers for everything rlock allocates itself.
 *
 * They exist so that a test can make the n-th allocation fail and check that
 * every call then returns RLOCK_ENOMEM or succeeds, without leaks. hiredis
 * 0.14 allocates on its own and aborts when out of memory; that is outside
 * our reach and documented. Any thread; the failure countdown is atomic.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static atomic_long fail_countdown; /* 0 = off; n = the n-th allocation fails */

void rlock__alloc_fail_after(long n) {
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}

static int should_fail(void) {
    long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1))
            return n == 1;
    }
    return 0;
}

void *rlock__malloc(size_t size) {
    return should_fail() ? NULL : malloc(size);
}

void *rlock__calloc(size_t count, size_t size) {
    return should_fail() ? NULL : calloc(count, size);
}

void rlock__free(void *ptr) {
    free(ptr);
}

char *rlock__memdup0(const void *src, size_t len) {
    char *copy = rlock__malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, src, len);
    copy[len] = '\0';
    return copy;
}

int rlock__buf_reserve(rlock__buf *b, size_t bytes) {
    if (bytes <= b->cap)
        return RLOCK_OK;
    size_t cap = b->cap > 0 ? b->cap : 256;
    while (cap < bytes)
        cap *= 2;
    void *data = rlock__malloc(cap);
    if (data == NULL)
        return RLOCK_ENOMEM;
    rlock__free(b->data);
    b->data = data;
    b->cap = cap;
    return RLOCK_OK;
}

void rlock__buf_free(rlock__buf *b) {
    rlock__free(b->data);
    b->data = NULL;
    b->cap = 0;
}
