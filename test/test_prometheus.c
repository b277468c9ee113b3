/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_prometheus.c - examples/prometheus.c's rlock_metrics(), the part
 * docs/operations.md tells users to copy into a /metrics handler, checked
 * against Prometheus's text exposition format (0.0.4): every sample line is
 * "name{labels} value" of a family declared by a TYPE line before it;
 * histogram buckets have increasing "le" bounds, cumulative counts, a +Inf
 * bucket equal to _count and a _sum exact to the microsecond; and every
 * counter and gauge of rlock_stats is exported ("prints everything").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The example itself, its main() renamed: the test checks the very code users copy. */
#define main prometheus_example_main
#include "../examples/prometheus.c"
#undef main

#define LINES_MAX 512
#define LINE_MAX_LEN 512

typedef struct exposition {
    char line[LINES_MAX][LINE_MAX_LEN];
    int n;
} exposition;

/* rlock_metrics(c) into e, line by line. */
static void scrape(rlock_client *c, exposition *e) {
    FILE *f = tmpfile();
    assert_non_null(f);
    H_ASSERT_RC(rlock_metrics(c, f), RLOCK_OK);
    rewind(f);
    e->n = 0;
    while (e->n < LINES_MAX && fgets(e->line[e->n], LINE_MAX_LEN, f) != NULL) {
        size_t len = strlen(e->line[e->n]);
        assert_true(len > 0 && e->line[e->n][len - 1] == '\n'); /* whole lines, none too long */
        e->line[e->n++][len - 1] = '\0';
    }
    assert_true(e->n < LINES_MAX);
    fclose(f);
}

/* Whether name is declared by a "# TYPE" line among the first upto lines (its family's). */
static int declared(const exposition *e, int upto, const char *name) {
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    char family[LINE_MAX_LEN];
    for (int i = 0; i < upto; i++) {
        if (strncmp(e->line[i], "# TYPE ", 7) != 0)
            continue;
        if (sscanf(e->line[i] + 7, "%511s", family) != 1)
            continue;
        size_t flen = strlen(family);
        if (strcmp(family, name) == 0)
            return 1;
        for (size_t s = 0; s < sizeof suffixes / sizeof suffixes[0]; s++)
            if (strncmp(name, family, flen) == 0 && strcmp(name + flen, suffixes[s]) == 0 &&
                strstr(e->line[i], " histogram") != NULL)
                return 1;
    }
    return 0;
}

/* Every line a comment (# HELP / # TYPE) or a well-formed sample of a declared family. */
static void assert_well_formed(const exposition *e) {
    for (int i = 0; i < e->n; i++) {
        const char *l = e->line[i];
        if (l[0] == '#') {
            assert_true(strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0);
            continue;
        }
        char name[LINE_MAX_LEN];
        size_t k = 0;
        if (!(isalpha((unsigned char)l[0]) || l[0] == '_' || l[0] == ':'))
            fail_msg("line %d: bad metric name: %s", i, l);
        while (isalnum((unsigned char)l[k]) || l[k] == '_' || l[k] == ':')
            name[k] = l[k], k++;
        name[k] = '\0';
        const char *rest = l + k;
        if (*rest == '{') {
            rest = strchr(rest, '}');
            if (rest == NULL)
                fail_msg("line %d: unterminated labels: %s", i, l);
            rest++;
        }
        char *end = NULL;
        if (*rest != ' ' || (strtod(rest + 1, &end), end == rest + 1) || *end != '\0')
            fail_msg("line %d: not \"name{labels} value\": %s", i, l);
        if (!declared(e, i, name))
            fail_msg("line %d: %s has no TYPE line before it", i, name);
    }
}

/* The value of the sample line that starts with prefix; fails if none. */
static double value_of(const exposition *e, const char *prefix) {
    for (int i = 0; i < e->n; i++)
        if (strncmp(e->line[i], prefix, strlen(prefix)) == 0)
            return strtod(strrchr(e->line[i], ' ') + 1, NULL);
    fail_msg("no sample line starts with %s", prefix);
    return -1;
}

/* name's buckets: increasing le, cumulative, +Inf == _count == h's count, _sum exact. */
static void assert_histogram(const exposition *e, const char *name, const rlock_histogram *h) {
    char prefix[128], le[64];
    double last_le = -1, last_count = -1;
    int buckets = 0;
    snprintf(prefix, sizeof prefix, "rlock_%s_seconds_bucket{", name);
    for (int i = 0; i < e->n; i++) {
        if (strncmp(e->line[i], prefix, strlen(prefix)) != 0)
            continue;
        const char *at = strstr(e->line[i], "le=\"");
        assert_non_null(at);
        assert_int_equal(sscanf(at + 4, "%63[^\"]", le), 1);
        double bound = strcmp(le, "+Inf") == 0 ? 1e300 : strtod(le, NULL);
        double count = strtod(strrchr(e->line[i], ' ') + 1, NULL);
        assert_true(bound > last_le);
        assert_true(count >= last_count);
        last_le = bound;
        last_count = count;
        buckets++;
    }
    assert_int_equal(buckets, RLOCK_STATS_BUCKETS);
    assert_true(last_le == 1e300); /* the last bucket is +Inf */
    snprintf(prefix, sizeof prefix, "rlock_%s_seconds_count{", name);
    assert_true(value_of(e, prefix) == last_count);
    assert_true(last_count == (double)h->count);
    snprintf(prefix, sizeof prefix, "rlock_%s_seconds_sum{", name);
    double sum_us = value_of(e, prefix) * 1e6;
    if (sum_us < (double)h->sum_us - 0.5 || sum_us > (double)h->sum_us + 0.5)
        fail_msg("rlock_%s_seconds_sum is %.0f us, the statistics say %llu us", name, sum_us,
                 h->sum_us);
}

/*
 * A client that held a lock past a second (so the hold-time sum has more
 * than six significant digits) and waited for one: its exposition parses,
 * and says what rlock_client_stats says.
 */
static void test_exposition(void **state) {
    rlock_client *c = h_open(H_MS(3000), 0), *other = h_open(H_MS(3000), 0);
    const char *name = h_unique_name("prom");
    rlock *l = h_get(c, name), *lo = h_get(other, name);
    exposition *e = malloc(sizeof *e);
    (void)state;
    assert_non_null(e);

    H_ASSERT_RC(rlock_lock(lo), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(lo), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_sleep_ms(1234);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    scrape(c, e);
    rlock_stats st = h_stats(c);
    assert_well_formed(e);
    assert_histogram(e, "wait", &st.wait_time);
    assert_histogram(e, "hold", &st.hold_time);
    assert_true(st.hold_time.sum_us > 1000000);

    /* every counter and gauge of rlock_stats, with the value it has */
    static const struct {
        const char *prefix;
        size_t offset;
    } fields[] = {
        {"rlock_acquisitions_total{", offsetof(rlock_stats, acquisitions)},
        {"rlock_acquired_immediately_total{", offsetof(rlock_stats, acquired_immediately)},
        {"rlock_acquired_after_wait_total{", offsetof(rlock_stats, acquired_after_wait)},
        {"rlock_busy_total{", offsetof(rlock_stats, busy)},
        {"rlock_unlocks_total{", offsetof(rlock_stats, unlocks)},
        {"rlock_handoffs_local_total{", offsetof(rlock_stats, handoffs_local)},
        {"rlock_handoffs_remote_total{", offsetof(rlock_stats, handoffs_remote)},
        {"rlock_renewals_total{", offsetof(rlock_stats, renewals)},
        {"rlock_renewal_failures_total{", offsetof(rlock_stats, renewal_failures)},
        {"rlock_losses_total{", offsetof(rlock_stats, losses)},
        {"rlock_connections_total{", offsetof(rlock_stats, connections)},
        {"rlock_connection_failures_total{", offsetof(rlock_stats, connection_failures)},
        {"rlock_reconnects_total{", offsetof(rlock_stats, reconnects)},
        {"rlock_resubscriptions_total{", offsetof(rlock_stats, resubscriptions)},
        {"rlock_master_switches_total{", offsetof(rlock_stats, master_switches)},
        {"rlock_subscribe_refusals_total{", offsetof(rlock_stats, subscribe_refusals)},
        {"rlock_name_refusals_total{", offsetof(rlock_stats, name_refusals)},
        {"rlock_registration_failures_total{", offsetof(rlock_stats, registration_failures)},
        {"rlock_held_locks{", offsetof(rlock_stats, held_locks)},
        {"rlock_waiting_threads{", offsetof(rlock_stats, waiting_threads)},
        {"rlock_pool_in_use{", offsetof(rlock_stats, pool_in_use)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        unsigned long long want =
            *(const unsigned long long *)(const void *)((const char *)&st + fields[i].offset);
        double got = value_of(e, fields[i].prefix);
        if (got != (double)want && strstr(fields[i].prefix, "renewals") == NULL &&
            strstr(fields[i].prefix, "connections") == NULL) /* the watchdog's, still moving */
            fail_msg("%s} is %.0f, rlock_client_stats says %llu", fields[i].prefix, got, want);
    }
    assert_true(value_of(e, "rlock_errors_total{") >= 1); /* the ENOTOWNER */

    free(e);
    rlock_free(l);
    rlock_free(lo);
    rlock_client_close(c);
    rlock_client_close(other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exposition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
