/*
 * prometheus.c - rlock_client_stats() in Prometheus's text format.
 *
 *   prometheus [URL]   opens a client, locks and unlocks "example:prometheus"
 *                      a few times, and prints the exposition on stdout
 *
 * rlock_metrics() is the part to copy: call it from your /metrics handler (or
 * write its output to node_exporter's textfile directory) every scrape.
 */
#include <rlock.h>
#include <stddef.h>
#include <stdio.h>

#define FIELD(f) offsetof(rlock_stats, f)

static const struct {
    const char *name, *type, *help;
    size_t offset;
} metrics[] = {
    {"acquisitions_total", "counter", "lock/try_lock calls that got the lock", FIELD(acquisitions)},
    {"acquired_after_wait_total", "counter", "acquisitions that waited",
     FIELD(acquired_after_wait)},
    {"busy_total", "counter", "try_lock calls that returned RLOCK_BUSY", FIELD(busy)},
    {"unlocks_total", "counter", "unlock calls that worked", FIELD(unlocks)},
    {"handoffs_local_total", "counter", "waits ended by a thread of this client",
     FIELD(handoffs_local)},
    {"handoffs_remote_total", "counter", "waits ended through Redis", FIELD(handoffs_remote)},
    {"renewals_total", "counter", "lock leases renewed", FIELD(renewals)},
    {"renewal_failures_total", "counter", "lock renewals that failed", FIELD(renewal_failures)},
    {"losses_total", "counter", "holds lost", FIELD(losses)},
    {"reconnects_total", "counter", "connections working again", FIELD(reconnects)},
    {"resubscriptions_total", "counter", "channels subscribed again", FIELD(resubscriptions)},
    {"held_locks", "gauge", "holds of this client now", FIELD(held_locks)},
    {"waiting_threads", "gauge", "threads waiting for a lock now", FIELD(waiting_threads)},
    {"pool_in_use", "gauge", "pooled connections in use now", FIELD(pool_in_use)},
};

static void histogram(FILE *out, const char *name, const char *id, const rlock_histogram *h) {
    unsigned long long below = 0;
    fprintf(out, "# TYPE rlock_%s_seconds histogram\n", name);
    for (int i = 0; i < RLOCK_STATS_BUCKETS; i++) {
        below += h->buckets[i]; /* Prometheus buckets are cumulative */
        if (rlock_stats_bucket_us(i) < 0)
            fprintf(out, "rlock_%s_seconds_bucket{client=\"%s\",le=\"+Inf\"} %llu\n", name, id,
                    below);
        else
            fprintf(out, "rlock_%s_seconds_bucket{client=\"%s\",le=\"%g\"} %llu\n", name, id,
                    (double)rlock_stats_bucket_us(i) / 1e6, below);
    }
    fprintf(out, "rlock_%s_seconds_sum{client=\"%s\"} %g\n", name, id, (double)h->sum_us / 1e6);
    fprintf(out, "rlock_%s_seconds_count{client=\"%s\"} %llu\n", name, id, h->count);
}

/* Writes client's statistics to out; 0, or the rlock status of the failure. */
int rlock_metrics(rlock_client *client, FILE *out) {
    rlock_stats st = {.struct_size = sizeof st};
    char id[9];
    int rc = rlock_client_stats(client, &st);
    if (rc != RLOCK_OK)
        return rc;
    snprintf(id, sizeof id, "%s", rlock_client_id(client)); /* the CLIENT LIST name's suffix */
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        fprintf(out, "# HELP rlock_%s %s\n# TYPE rlock_%s %s\nrlock_%s{client=\"%s\"} %llu\n",
                metrics[i].name, metrics[i].help, metrics[i].name, metrics[i].type,
                metrics[i].name, id,
                *(const unsigned long long *)((const char *)&st + metrics[i].offset));
    fprintf(out, "# TYPE rlock_errors_total counter\n");
    for (int i = 1; i < RLOCK_STATS_ERROR_SLOTS; i++)
        if (st.errors[i] > 0)
            fprintf(out, "rlock_errors_total{client=\"%s\",status=\"%s\"} %llu\n", id,
                    rlock_status_name(-i), st.errors[i]);
    histogram(out, "wait", id, &st.wait_time);
    histogram(out, "hold", id, &st.hold_time);
    return RLOCK_OK;
}

int main(int argc, char **argv) {
    rlock_config cfg;
    rlock_client *client;
    rlock *lock;
    rlock_config_init(&cfg);
    cfg.url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    int rc = rlock_client_open(&cfg, &client);
    if (rc == RLOCK_OK && (rc = rlock_get(client, "example:prometheus", &lock)) == RLOCK_OK) {
        for (int i = 0; i < 10 && rc == RLOCK_OK; i++)
            if ((rc = rlock_lock(lock)) == RLOCK_OK)
                rc = rlock_unlock(lock);
        rlock_free(lock);
    }
    if (rc == RLOCK_OK)
        rc = rlock_metrics(client, stdout);
    if (rc != RLOCK_OK)
        fprintf(stderr, "rlock: %s: %s\n", rlock_status_name(rc), rlock_last_error());
    rlock_client_close(client);
    return rc == RLOCK_OK ? 0 : 1;
}
