/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * url_tls.c - the TLS parameters of a rediss url (tls_ca, tls_cert,
 * tls_key, tls_verify, tls_server_name: include/rlock.h), parsed for url.c,
 * and laid over the config's TLS settings at open (rlock__url_tls): a
 * parameter the url gives replaces the config's field.
 *
 * Pure functions: any thread, no shared state.
 */
#include <string.h>

#include "conn.h"

static const char tls_expected[] =
    "expected tls_ca=, tls_cert=, tls_key=, tls_verify=full|ca|none or tls_server_name=";

enum { TLS_CA = 1, TLS_CERT = 2, TLS_KEY = 4, TLS_VERIFY = 8, TLS_SERVER_NAME = 16 };

/* The field and bit of a tls_* key, or NULL. */
static char *tls_field(rlock__url *u, const char *key, size_t len, int *bit, size_t *size) {
    static const struct { const char *name; int bit; } keys[] = {
        {"tls_ca", TLS_CA}, {"tls_cert", TLS_CERT}, {"tls_key", TLS_KEY},
        {"tls_verify", TLS_VERIFY}, {"tls_server_name", TLS_SERVER_NAME}};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (strlen(keys[i].name) != len || memcmp(keys[i].name, key, len) != 0)
            continue;
        *bit = keys[i].bit;
        *size = *bit == TLS_SERVER_NAME ? sizeof(u->tls.server_name) : sizeof(u->tls.ca);
        return *bit == TLS_CA ? u->tls.ca : *bit == TLS_CERT ? u->tls.cert
             : *bit == TLS_KEY ? u->tls.key : *bit == TLS_SERVER_NAME ? u->tls.server_name
                                                                      : NULL;
    }
    *bit = 0;
    return NULL;
}

static int parse_tls_verify(const char *url, const char *v, size_t len, rlock__url *u) {
    static const char *const modes[] = {"full", "ca", "none"}; /* RLOCK_TLS_VERIFY_* order */
    for (int i = 0; i < 3; i++)
        if (strlen(modes[i]) == len && memcmp(modes[i], v, len) == 0) {
            u->tls.verify = i;
            return RLOCK_OK;
        }
    return rlock__url_bad_part(url, v, len, "tls_verify", "expected full, ca or none");
}

/*
 * One tls_* parameter (key [s, s+key_len), its value after the '='): 1 if
 * it is one (*status its outcome), 0 if the key is no TLS parameter.
 */
int rlock__url_tls_param(const char *url, const char *s, size_t key_len, size_t value_len,
                         rlock__url *u, int *status) {
    const char *value = s + key_len + 1;
    int bit;
    size_t size;
    char *field = tls_field(u, s, key_len, &bit, &size);
    if (bit == 0)
        return 0;
    if (!u->tls.on)
        *status = rlock__url_bad_part(url, s, key_len, "TLS parameter",
                           "TLS parameters need a rediss scheme (rediss://, rediss-sentinel://, "
                           "rediss-cluster://)");
    else if (u->tls_given & bit)
        *status = rlock__url_bad_part(url, s, key_len, "repeated parameter", "");
    else if (value_len == 0)
        *status = rlock__url_bad_part(url, s, key_len, "empty value of", "");
    else if (bit == TLS_VERIFY)
        *status = parse_tls_verify(url, value, value_len, u);
    else {
        char *decoded = rlock__url_decode(url, value, value_len, "TLS parameter", status);
        if (decoded != NULL && strlen(decoded) >= size)
            *status = rlock__url_bad_part(url, s, key_len, "too long a value of", "");
        else if (decoded != NULL)
            memcpy(field, decoded, strlen(decoded) + 1);
        rlock__free(decoded);
    }
    u->tls_given |= bit;
    return 1;
}

/* The query of a rediss:// or rediss-cluster:// url: tls_* parameters only. */
int rlock__url_tls_query(const char *url, const char *s, rlock__url *u) {
    while (*s != '\0') {
        size_t len = strcspn(s, "&");
        const char *eq = memchr(s, '=', len);
        int status = RLOCK_OK;
        if (eq == NULL || !rlock__url_tls_param(url, s, (size_t)(eq - s), len - (size_t)(eq - s) - 1, u,
                                     &status))
            return rlock__url_bad_part(url, s, eq != NULL ? (size_t)(eq - s) : len,
                            eq == NULL ? "the parameter" : "unknown parameter", tls_expected);
        if (status != RLOCK_OK)
            return status;
        s += len + (s[len] == '&');
    }
    return RLOCK_OK;
}

int rlock__url_tls(const char *url, rlock__tls_settings *t) {
    rlock__url u;
    int status = rlock__parse_url(url, &u);
    if (status != RLOCK_OK)
        return status;
    t->on = u.tls.on;
    if (u.tls_given & TLS_VERIFY)
        t->verify = u.tls.verify;
    if (u.tls_given & TLS_CA)
        memcpy(t->ca, u.tls.ca, sizeof(t->ca));
    if (u.tls_given & TLS_CERT)
        memcpy(t->cert, u.tls.cert, sizeof(t->cert));
    if (u.tls_given & TLS_KEY)
        memcpy(t->key, u.tls.key, sizeof(t->key));
    if (u.tls_given & TLS_SERVER_NAME)
        memcpy(t->server_name, u.tls.server_name, sizeof(t->server_name));
    rlock__url_clear(&u);
    if (t->on && (t->cert[0] == '\0') != (t->key[0] == '\0'))
        return rlock__fail(RLOCK_EINVAL, 0, "TLS: %s without %s (a client certificate needs "
                                            "both tls_cert and tls_key)",
                           t->cert[0] != '\0' ? "tls_cert" : "tls_key",
                           t->cert[0] != '\0' ? "tls_key" : "tls_cert");
    return RLOCK_OK;
}
