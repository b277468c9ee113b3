/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * status.c - the status table, the version, and configuration defaults.
 *
 * Pure functions over static data: any thread, no locks, no allocation.
 */
#include <string.h>

#include "internal.h"

const char *rlock_version(void) {
    return RLOCK_VERSION_STRING;
}

unsigned rlock_version_num(void) {
    return RLOCK_VERSION_NUM;
}

const char *rlock_strerror(int status) {
    switch (status) {
#define XX(name, value, message)                                                                   \
    case value:                                                                                    \
        return message;
        RLOCK_STATUS_MAP(XX)
#undef XX
    default:
        return "unknown rlock status";
    }
}

const char *rlock_status_name(int status) {
    switch (status) {
#define XX(name, value, message)                                                                   \
    case value:                                                                                    \
        return "RLOCK_" #name;
        RLOCK_STATUS_MAP(XX)
#undef XX
    default:
        return "RLOCK_UNKNOWN";
    }
}

void rlock_config_init(rlock_config *cfg) {
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->struct_size = sizeof(*cfg);
    cfg->url = "redis://127.0.0.1:6379";
    cfg->watchdog_timeout_ms = 30000;
    cfg->connect_timeout_ms = 5000;
    cfg->command_timeout_ms = 3000;
    cfg->pool_size = 8;
    cfg->retry_attempts = 3;
    cfg->retry_interval_ms = 1000;
    cfg->local_handoffs = 4;
    cfg->replica_acks = 0;
    cfg->replica_ack_timeout_ms = 1000;
    cfg->pubsub_mode = RLOCK_PUBSUB_AUTO;
    cfg->fair_wait_timeout_ms = 300000;
    cfg->register_client = 1;
    cfg->log_level = RLOCK_LOG_WARN;
}
