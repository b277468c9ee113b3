/* SPDX-License-Identifier: BSD-3-Clause */
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
    {"acquired_immediately_total", "counter", "acquisitions at the first attempt",
     FIELD(acquired_immediately)},
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
    {"connections_total", "counter", "connections opened", FIELD(connections)},
    {"connection_failures_total", "counter", "connections lost (CONNECTION_LOST)",
     FIELD(connection_failures)},
    {"reconnects_total", "counter", "connections working again", FIELD(reconnects)},
    {"resubscriptions_total", "counter", "channels subscribed again", FIELD(resubscriptions)},
    {"master_switches_total", "counter", "failovers seen (MASTER_SWITCHED)",
     FIELD(master_switches)},
    {"subscribe_refusals_total", "counter", "channels an ACL refused (SUBSCRIBE_REFUSED)",
     FIELD(subscribe_refusals)},
    {"name_refusals_total", "counter", "connections left unnamed (CLIENT SETNAME refused)",
     FIELD(name_refusals)},
    {"registration_failures_total", "counter", "failed writes of the registration hash",
     FIELD(registration_failures)},
    {"held_locks", "gauge", "holds of this client now", FIELD(held_locks)},
    {"waiting_threads", "gauge", "threads waiting for a lock now", FIELD(waiting_threads)},
    {"pool_in_use", "gauge", "pooled connections in use now", FIELD(pool_in_use)},
};

/*
 * us in seconds, exactly and shortest ("0.00001", "1.234308", "100"): %g
 * would keep six digits, and a sum past a second would lose microseconds.
 */
static const char *seconds(unsigned long long us, char *buf, size_t size) {
    int n = snprintf(buf, size, "%llu.%06llu", us / 1000000, us % 1000000);
    while (n > 0 && buf[n - 1] == '0')
        buf[--n] = '\0';
    if (n > 0 && buf[n - 1] == '.')
        buf[--n] = '\0';
    return buf;
}

static void histogram(FILE *out, const char *name, const char *id, const rlock_histogram *h) {
    unsigned long long below = 0;
    char s[32];
    fprintf(out, "# TYPE rlock_%s_seconds histogram\n", name);
    for (int i = 0; i < RLOCK_STATS_BUCKETS; i++) {
        below += h->buckets[i]; /* Prometheus buckets are cumulative */
        long long bound = rlock_stats_bucket_us(i);
        fprintf(out, "rlock_%s_seconds_bucket{client=\"%s\",le=\"%s\"} %llu\n", name, id,
                bound < 0 ? "+Inf" : seconds((unsigned long long)bound, s, sizeof(s)), below);
    }
    fprintf(out, "rlock_%s_seconds_sum{client=\"%s\"} %s\n", name, id,
            seconds(h->sum_us, s, sizeof(s)));
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
