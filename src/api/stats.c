/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.c - rlock_client_stats: a client's counters, gauges and histograms
 * (kept by core/stats.c, fed by every layer) copied out for the caller, as
 * much of them as the caller's struct holds (struct_size).
 *
 * Threads: any application thread, inside the call guard.
 */
#include <stddef.h>
#include <string.h>

#include "api.h"

/*
 * The bytes of the caller's struct to write: its size, cut to the library's
 * struct and to the last whole field (every field after struct_size is an
 * unsigned long long), so a size that ends inside a field leaves it alone.
 */
static size_t whole_fields(size_t size) {
    const size_t first = offsetof(rlock_stats, acquisitions), field = sizeof(unsigned long long);
    if (size >= sizeof(rlock_stats))
        return sizeof(rlock_stats);
    return first + (size - first) / field * field;
}

int rlock_client_stats(rlock_client *client, rlock_stats *out) {
    rlock__guard g;
    rlock_stats all;
    if (out == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_client_stats: NULL out");
    size_t size = out->struct_size;
    if (size < offsetof(rlock_stats, acquisitions) + sizeof(out->acquisitions))
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_client_stats: struct_size %zu: set it to "
                                            "sizeof(rlock_stats) first", size);
    int status = rlock__enter(&g, client);
    if (status != RLOCK_OK)
        return status;
    memset(&all, 0, sizeof(all));
    rlock__stats_read(&client->events.stats, &all);
    all.held_locks = rlock__holds_held(&client->engine.holds);
    all.struct_size = whole_fields(size);
    memcpy(out, &all, all.struct_size);
    rlock__leave(&g);
    return RLOCK_OK;
}
