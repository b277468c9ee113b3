/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slot.c - Redis Cluster's key -> slot rule (cluster spec, "Keys distribution
 * model"): CRC16 (XMODEM: poly 0x1021, init 0) of the key's hash tag -- the
 * bytes between the first '{' and the first '}' after it, when there are
 * any -- or else of the whole key, mod 16384. Redisson's calcSlot differs
 * for keys like "a}b{c}" (it looks for '}' from the start); the server's
 * rule is the one that decides where a key lives, so it is the one here.
 *
 * Pure functions: any thread, no shared state.
 */
#include <string.h>

#include "route.h"

static uint16_t crc16_table[256];
static pthread_once_t crc16_once = PTHREAD_ONCE_INIT;

static void crc16_init(void) {
    for (int byte = 0; byte < 256; byte++) {
        uint16_t crc = (uint16_t)(byte << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        crc16_table[byte] = crc;
    }
}

static uint16_t crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    pthread_once(&crc16_once, crc16_init);
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ crc16_table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

int rlock__key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & (RLOCK__CLUSTER_SLOTS - 1);
    }
    return crc16(key, len) & (RLOCK__CLUSTER_SLOTS - 1);
}
