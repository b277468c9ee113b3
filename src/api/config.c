/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.c - the application's rlock_config checked and copied into the
 * settings every layer reads. A config from an older header (a smaller
 * struct_size) gets the defaults for the fields it lacks. The url is parsed
 * by the network layer (net/url.c) when the client opens.
 *
 * Pure: any thread, no shared state.
 */
#include <string.h>

#include "api.h"

#define HOUR_MS 3600000

/* 1 if lo <= v <= hi; else records which field is out of range. */
static int in_range(long long v, long long lo, long long hi, const char *field) {
    if (v >= lo && v <= hi)
        return 1;
    rlock__fail(RLOCK_EINVAL, 0, "%s %lld: must be %lld..%lld", field, v, lo, hi);
    return 0;
}

/* Whether the caller's struct (of its struct_size) has the field at offset. */
static int has_field(const rlock_config *cfg, size_t offset, size_t size) {
    return cfg->struct_size >= offset + size;
}

/* The fields of 0.5 (registration, log): defaults when the caller's struct lacks them. */
static int observing_from(const rlock_config *cfg, const rlock_config *defaults,
                          rlock__settings *s) {
    const rlock_config *from = cfg;
    if (!has_field(cfg, offsetof(rlock_config, log_level), sizeof(int)))
        from = defaults;
    s->register_client = from->register_client;
    s->log = from->log;
    s->log_arg = from->log_arg;
    s->log_level = from->log_level;
    if (!in_range(s->register_client, 0, 1, "register_client") ||
        !in_range(s->log_level, RLOCK_LOG_ERROR, RLOCK_LOG_DEBUG, "log_level"))
        return RLOCK_EINVAL;
    return RLOCK_OK;
}

/* Copies a tls_* path or name (NULL: "") into dst; RLOCK_EINVAL if it does not fit. */
static int tls_string(char *dst, size_t size, const char *src, const char *field) {
    dst[0] = '\0';
    if (src == NULL)
        return RLOCK_OK;
    if (strlen(src) >= size)
        return rlock__fail(RLOCK_EINVAL, 0, "%s: longer than %zu bytes", field, size - 1);
    memcpy(dst, src, strlen(src) + 1);
    return RLOCK_OK;
}

/* The fields of 0.6 (TLS, credentials): defaults when the caller's struct lacks them. */
static int tls_from(const rlock_config *cfg, rlock__settings *s) {
    rlock__tls_settings *t = &s->tls;
    memset(t, 0, sizeof(*t));
    s->credentials = NULL;
    s->credentials_arg = NULL;
    if (!has_field(cfg, offsetof(rlock_config, credentials_arg), sizeof(void *)))
        return RLOCK_OK;
    t->verify = cfg->tls_verify;
    s->credentials = cfg->credentials;
    s->credentials_arg = cfg->credentials_arg;
    if (!in_range(t->verify, RLOCK_TLS_VERIFY_FULL, RLOCK_TLS_VERIFY_NONE, "tls_verify") ||
        tls_string(t->ca, sizeof(t->ca), cfg->tls_ca, "tls_ca") != RLOCK_OK ||
        tls_string(t->cert, sizeof(t->cert), cfg->tls_cert, "tls_cert") != RLOCK_OK ||
        tls_string(t->key, sizeof(t->key), cfg->tls_key, "tls_key") != RLOCK_OK ||
        tls_string(t->server_name, sizeof(t->server_name), cfg->tls_server_name,
                   "tls_server_name") != RLOCK_OK)
        return RLOCK_EINVAL;
    return RLOCK_OK;
}

int rlock__settings_from(const rlock_config *cfg, rlock__settings *s) {
    rlock_config defaults;
    rlock_config_init(&defaults);
    if (cfg == NULL)
        cfg = &defaults;
    /* A struct not made by rlock_config_init, or by a header older than the first. */
    if (!has_field(cfg, offsetof(rlock_config, callback_arg), sizeof(void *)))
        return rlock__fail(RLOCK_EINVAL, 0, "config not initialised by rlock_config_init()");
    if (cfg->watchdog_timeout_ms < 30 || cfg->watchdog_timeout_ms > RLOCK_MAX_LEASE_MS)
        return rlock__fail(RLOCK_EINVAL, 0, "watchdog_timeout_ms %lld: must be 30..%lld",
                           cfg->watchdog_timeout_ms, (long long)RLOCK_MAX_LEASE_MS);
    if (!in_range(cfg->connect_timeout_ms, 1, HOUR_MS, "connect_timeout_ms") ||
        !in_range(cfg->command_timeout_ms, 1, HOUR_MS, "command_timeout_ms") ||
        !in_range(cfg->pool_size, 1, 1024, "pool_size") ||
        !in_range(cfg->retry_attempts, 0, 100, "retry_attempts") ||
        !in_range(cfg->retry_interval_ms, 0, HOUR_MS, "retry_interval_ms"))
        return RLOCK_EINVAL;
    /* Fields appended after the first release: absent from an older caller's struct. */
    s->local_handoffs = defaults.local_handoffs;
    if (has_field(cfg, offsetof(rlock_config, local_handoffs), sizeof(int)))
        s->local_handoffs = cfg->local_handoffs;
    if (!in_range(s->local_handoffs, 0, 1000, "local_handoffs"))
        return RLOCK_EINVAL;
    s->on_event = NULL;
    if (has_field(cfg, offsetof(rlock_config, on_event), sizeof(cfg->on_event)))
        s->on_event = cfg->on_event;
    s->replica_acks = defaults.replica_acks;
    s->replica_ack_timeout_ms = defaults.replica_ack_timeout_ms;
    if (has_field(cfg, offsetof(rlock_config, replica_ack_timeout_ms), sizeof(int))) {
        s->replica_acks = cfg->replica_acks;
        s->replica_ack_timeout_ms = cfg->replica_ack_timeout_ms;
    }
    if (!in_range(s->replica_acks, 0, 100, "replica_acks") ||
        !in_range(s->replica_ack_timeout_ms, 1, HOUR_MS, "replica_ack_timeout_ms"))
        return RLOCK_EINVAL;
    s->pubsub_mode = defaults.pubsub_mode;
    if (has_field(cfg, offsetof(rlock_config, pubsub_mode), sizeof(int)))
        s->pubsub_mode = cfg->pubsub_mode;
    if (!in_range(s->pubsub_mode, RLOCK_PUBSUB_AUTO, RLOCK_PUBSUB_SHARDED, "pubsub_mode"))
        return RLOCK_EINVAL;
    s->fair_wait_timeout_ms = defaults.fair_wait_timeout_ms;
    if (has_field(cfg, offsetof(rlock_config, fair_wait_timeout_ms), sizeof(long long)))
        s->fair_wait_timeout_ms = cfg->fair_wait_timeout_ms;
    if (!in_range(s->fair_wait_timeout_ms, 1, RLOCK_MAX_LEASE_MS, "fair_wait_timeout_ms"))
        return RLOCK_EINVAL;
    if (observing_from(cfg, &defaults, s) != RLOCK_OK)
        return RLOCK_EINVAL;
    /* ignored (client.c logs it), still range-checked: a value refused before stays refused */
    s->shared_reads_ms = defaults.shared_reads_ms;
    if (has_field(cfg, offsetof(rlock_config, shared_reads_ms), sizeof(int)))
        s->shared_reads_ms = cfg->shared_reads_ms;
    if (!in_range(s->shared_reads_ms, 0, 1000, "shared_reads_ms"))
        return RLOCK_EINVAL;
    if (tls_from(cfg, s) != RLOCK_OK)
        return RLOCK_EINVAL;
    s->watchdog_timeout_ms = cfg->watchdog_timeout_ms;
    s->connect_timeout_ms = cfg->connect_timeout_ms;
    s->command_timeout_ms = cfg->command_timeout_ms;
    s->pool_size = cfg->pool_size;
    s->retry_attempts = cfg->retry_attempts;
    s->retry_interval_ms = cfg->retry_interval_ms;
    s->on_lock_lost = cfg->on_lock_lost;
    s->callback_arg = cfg->callback_arg;
    return RLOCK_OK;
}

