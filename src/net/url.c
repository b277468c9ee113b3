/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * url.c - the url forms rlock accepts (include/rlock.h has the grammar):
 *   redis://[[user]:password@]host[:port][/db]   (host may be [ipv6])
 *   unix:///path/to/socket[?db=N]
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/master
 *                    [?db=N][&sentinel_user=U][&sentinel_password=P]
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]
 *   rediss://, rediss-sentinel://, rediss-cluster:// the same over TLS, with
 *                    ?tls_ca=&tls_cert=&tls_key=&tls_verify=&tls_server_name=
 *                    after the path (the sentinel form: among its parameters)
 * with %XX escapes in user, password, master and the sentinel credentials.
 *
 * Pure functions: any thread, no shared state.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"

static int hex_value(char ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/*
 * A malformed url is reported by the part that is wrong, its text and its
 * position (counted from 1), so a person can find it in a long url; text
 * that may be a password is never quoted.
 */
static int position(const char *url, const char *at) {
    return (int)(at - url) + 1;
}

int rlock__url_bad_part(const char *url, const char *at, size_t len, const char *what,
                         const char *expected) {
    return rlock__fail(RLOCK_EINVAL, 0, "malformed url: %s \"%.*s\" at position %d%s%s", what,
                       len > 64 ? 64 : (int)len, at, position(url, at),
                       expected[0] != '\0' ? "; " : "", expected);
}

/* As bad_part, without quoting the text (a credential). */
static int bad_secret(const char *url, const char *at, const char *what) {
    return rlock__fail(RLOCK_EINVAL, 0, "malformed url: %s at position %d", what,
                       position(url, at));
}

/* Copies [s, s+len) with %XX decoded; NULL on a bad escape (reported) or no memory. */
char *rlock__url_decode(const char *url, const char *s, size_t len, const char *what,
                        int *status) {
    char *out = rlock__malloc(len + 1);
    size_t n = 0;
    if (out == NULL) {
        *status = RLOCK_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            out[n++] = s[i];
            continue;
        }
        int hi = i + 2 < len ? hex_value(s[i + 1]) : -1;
        int lo = i + 2 < len ? hex_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            char why[160];
            rlock__free(out);
            snprintf(why, sizeof(why), "'%%' not followed by two hex digits (not %%00) in the %s",
                     what);
            *status = bad_secret(url, s + i, why);
            return NULL;
        }
        out[n++] = (char)(hi * 16 + lo);
        i += 2;
    }
    out[n] = '\0';
    return out;
}

/* Parses a decimal in [lo, hi] spanning exactly [s, s+len). */
static int parse_int(const char *s, size_t len, long long lo, long long hi, int *out) {
    long long v = 0;
    if (len == 0 || len > 10)
        return RLOCK_EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return RLOCK_EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return RLOCK_EINVAL;
    *out = (int)v;
    return RLOCK_OK;
}

static int parse_port(const char *url, const char *s, size_t len, int *out) {
    if (parse_int(s, len, 1, 65535, out) == RLOCK_OK)
        return RLOCK_OK;
    return rlock__url_bad_part(url, s, len, "the port", "expected a number 1..65535");
}

static int parse_db(const char *url, const char *s, size_t len, int *out) {
    if (parse_int(s, len, 0, INT_MAX, out) == RLOCK_OK)
        return RLOCK_OK;
    return rlock__url_bad_part(url, s, len, "the db", "expected a number 0..2147483647");
}

static int parse_userinfo(const char *url, const char *s, size_t len, rlock__endpoint *ep) {
    const char *colon = memchr(s, ':', len);
    int status = RLOCK_OK;
    if (colon == NULL) /* "user@" without a password is ambiguous */
        return bad_secret(url, s, "the credentials before '@' have no ':' (write :password@ "
                                  "or user:password@)");
    size_t user_len = (size_t)(colon - s);
    if (user_len > 0 &&
        (ep->user = rlock__url_decode(url, s, user_len, "user name", &status)) == NULL)
        return status;
    ep->password = rlock__url_decode(url, colon + 1, len - user_len - 1, "password", &status);
    return ep->password == NULL ? status : RLOCK_OK;
}

static int parse_hostport(const char *url, const char *s, size_t len, int default_port,
                          rlock__endpoint *ep) {
    const char *host = s, *port = NULL;
    size_t host_len;
    if (len > 0 && s[0] == '[') { /* [ipv6]:port */
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return rlock__url_bad_part(url, s, len, "the IPv6 address", "'[' without a closing ']'");
        host = s + 1;
        host_len = (size_t)(close - host);
        if (close + 1 < s + len) {
            if (close[1] != ':')
                return rlock__url_bad_part(url, close + 1, (size_t)(s + len - close - 1),
                                "the text after ']'", "expected ':port'");
            port = close + 2;
        }
    } else {
        port = memchr(s, ':', len);
        host_len = port != NULL ? (size_t)(port - s) : len;
        if (port != NULL)
            port++;
    }
    if (host_len == 0)
        return rlock__fail(RLOCK_EINVAL, 0, "malformed url: no host at position %d",
                           position(url, host));
    if (memchr(host, '\0', host_len) != NULL)
        return RLOCK_EINVAL;
    ep->port = default_port;
    if (port != NULL && parse_port(url, port, (size_t)(s + len - port), &ep->port) != RLOCK_OK)
        return RLOCK_EINVAL;
    ep->host = rlock__memdup0(host, host_len);
    return ep->host == NULL ? RLOCK_ENOMEM : RLOCK_OK;
}

/*
 * A '/' (or '?') before an '@' is most likely a password's unencoded '/':
 * the url ends its host part at the '/', so say that rather than "no host".
 */
static int slash_in_password(const char *url, const char *slash) {
    if (strchr(slash, '@') == NULL)
        return 0;
    bad_secret(url, slash, "'/' or '?' before the '@' (in a password write '/' as %2F, "
                           "'?' as %3F, '@' as %40)");
    return 1;
}

static int parse_tcp_url(const char *url, const char *rest, rlock__endpoint *ep) {
    size_t len = strlen(rest);
    const char *slash = memchr(rest, '/', len);
    size_t authority_len = slash != NULL ? (size_t)(slash - rest) : len;
    const char *at = NULL;
    int status;

    if (slash != NULL && slash_in_password(url, slash))
        return RLOCK_EINVAL;
    for (size_t i = 0; i < authority_len; i++) /* the last '@' ends the userinfo */
        if (rest[i] == '@')
            at = rest + i;
    if (at != NULL) {
        status = parse_userinfo(url, rest, (size_t)(at - rest), ep);
        if (status != RLOCK_OK)
            return status;
    }
    const char *hostport = at != NULL ? at + 1 : rest;
    status = parse_hostport(url, hostport, (size_t)(rest + authority_len - hostport), 6379, ep);
    if (status != RLOCK_OK)
        return status;
    if (slash != NULL && slash[1] != '\0')
        return parse_db(url, slash + 1, strlen(slash + 1), &ep->db);
    return RLOCK_OK;
}

static int parse_unix_url(const char *url, const char *rest, rlock__endpoint *ep) {
    const char *query = strchr(rest, '?');
    size_t path_len = query != NULL ? (size_t)(query - rest) : strlen(rest);
    if (path_len == 0 || rest[0] != '/')
        return rlock__url_bad_part(url, rest, path_len, "the socket path",
                        "expected an absolute path: unix:///path/to/socket[?db=N]");
    if (query != NULL) {
        if (strncmp(query, "?db=", 4) != 0)
            return rlock__url_bad_part(url, query, strlen(query), "the query", "expected ?db=N");
        if (parse_db(url, query + 4, strlen(query + 4), &ep->db) != RLOCK_OK)
            return RLOCK_EINVAL;
    }
    ep->unix_path = rlock__memdup0(rest, path_len);
    return ep->unix_path == NULL ? RLOCK_ENOMEM : RLOCK_OK;
}

/* A list of host[:port] separated by commas: sentinels or cluster seeds. */
static int parse_hosts(const char *url, const char *s, size_t len, int max, int default_port,
                       rlock__url *u) {
    size_t count = 1;
    for (size_t i = 0; i < len; i++)
        count += s[i] == ',';
    if (count > (size_t)max)
        return rlock__fail(RLOCK_EINVAL, 0, "malformed url: %zu hosts, at most %d", count, max);
    u->hosts = rlock__calloc(count, sizeof(*u->hosts));
    if (u->hosts == NULL)
        return RLOCK_ENOMEM;
    for (const char *p = s, *end = s + len; u->nhosts < (int)count;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma != NULL ? comma : end;
        int status =
            parse_hostport(url, p, (size_t)(stop - p), default_port, &u->hosts[u->nhosts]);
        if (status != RLOCK_OK)
            return status;
        u->nhosts++;
        p = stop + 1;
    }
    return RLOCK_OK;
}

/* The userinfo before the last '@' in [s, end), if any; returns where the hosts start. */
static const char *parse_leading_userinfo(const char *url, const char *s, const char *end,
                                          rlock__endpoint *ep, int *status) {
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p;
    *status = at != NULL ? parse_userinfo(url, s, (size_t)(at - s), ep) : RLOCK_OK;
    return at != NULL ? at + 1 : s;
}

/* One "key=value" of a sentinel url's query. */
static int parse_sentinel_param(const char *url, const char *s, size_t len, rlock__url *u) {
    static const char expected[] = "expected db=N, sentinel_user=U or sentinel_password=P (with "
                                   "rediss-sentinel:// also tls_*)";
    const char *eq = memchr(s, '=', len);
    int status = RLOCK_OK;
    if (eq == NULL)
        return rlock__url_bad_part(url, s, len, "the parameter", expected);
    size_t key_len = (size_t)(eq - s), value_len = len - key_len - 1;
    char **target = NULL;
    const char *what = "sentinel user name";
    if (key_len == 2 && memcmp(s, "db", 2) == 0)
        return parse_db(url, eq + 1, value_len, &u->server.db);
    if (rlock__url_tls_param(url, s, key_len, value_len, u, &status))
        return status;
    if (key_len == 13 && memcmp(s, "sentinel_user", 13) == 0) {
        target = &u->sentinel_user;
    } else if (key_len == 17 && memcmp(s, "sentinel_password", 17) == 0) {
        target = &u->sentinel_password;
        what = "sentinel password";
    }
    if (target == NULL)
        return rlock__url_bad_part(url, s, key_len, "unknown parameter", expected);
    if (*target != NULL)
        return rlock__url_bad_part(url, s, key_len, "repeated parameter", "");
    *target = rlock__url_decode(url, eq + 1, value_len, what, &status);
    return *target == NULL ? status : RLOCK_OK;
}

static int parse_sentinel_query(const char *url, const char *s, rlock__url *u) {
    while (*s != '\0') {
        const char *amp = strchr(s, '&');
        size_t len = amp != NULL ? (size_t)(amp - s) : strlen(s);
        int status = parse_sentinel_param(url, s, len, u);
        if (status != RLOCK_OK)
            return status;
        s += len + (amp != NULL);
    }
    return RLOCK_OK;
}

static int no_master_name(const char *url, const char *at) {
    return rlock__fail(RLOCK_EINVAL, 0, "malformed url: no master name at position %d; "
                                        "expected redis-sentinel://host:26379[,host...]/"
                                        "master-name (the name the sentinels monitor)",
                       position(url, at));
}

/* [[user]:password@]host[:port][,host[:port]...]/master[?params] */
static int parse_sentinel_url(const char *url, const char *rest, rlock__url *u) {
    const char *slash = strchr(rest, '/');
    int status = RLOCK_OK;
    if (slash == NULL) /* the master's name is required */
        return no_master_name(url, rest + strlen(rest));
    if (slash_in_password(url, slash))
        return RLOCK_EINVAL;
    const char *hosts = parse_leading_userinfo(url, rest, slash, &u->server, &status);
    if (status != RLOCK_OK ||
        (status = parse_hosts(url, hosts, (size_t)(slash - hosts), RLOCK__MAX_SENTINELS, 26379,
                              u)) != RLOCK_OK)
        return status;
    const char *query = strchr(slash + 1, '?');
    size_t name_len = query != NULL ? (size_t)(query - slash - 1) : strlen(slash + 1);
    if (name_len == 0)
        return no_master_name(url, slash + 1);
    if ((u->master_name = rlock__url_decode(url, slash + 1, name_len, "master name", &status)) ==
        NULL)
        return status;
    return query != NULL ? parse_sentinel_query(url, query + 1, u) : RLOCK_OK;
}

/* [[user]:password@]host[:port][,host[:port]...]: a cluster has no db, no path. */
static int parse_cluster_url(const char *url, const char *rest, rlock__url *u) {
    const char *end = rest + strlen(rest);
    const char *path = strpbrk(rest, "/?");
    int status = RLOCK_OK;
    if (path != NULL) {
        if (slash_in_password(url, path))
            return RLOCK_EINVAL;
        return rlock__url_bad_part(url, path, strlen(path), "the path",
                        "a redis-cluster:// url has no db (a cluster has only db 0) and no query");
    }
    const char *hosts = parse_leading_userinfo(url, rest, end, &u->server, &status);
    if (status != RLOCK_OK)
        return status;
    return parse_hosts(url, hosts, (size_t)(end - hosts), RLOCK__MAX_SEEDS, 6379, u);
}

static const char schemes[] = "expected redis://, unix://, redis-sentinel://, redis-cluster:// "
                              "or, over TLS, rediss://, rediss-sentinel://, rediss-cluster://";

/* The url's scheme is none rlock knows: say what it has instead. */
static int bad_scheme(const char *url) {
    const char *sep = strstr(url, "://");
    if (url[0] == '\0')
        return rlock__fail(RLOCK_EINVAL, 0, "malformed url: empty; %s", schemes);
    if (sep == NULL)
        return rlock__url_bad_part(url, url, strlen(url), "no scheme in", schemes);
    return rlock__url_bad_part(url, url, (size_t)(sep - url) + 3, "unknown scheme", schemes);
}

/*
 * A rediss:// or rediss-cluster:// url: what comes before its query parsed
 * as the plaintext form's (a copy cut at the '?': positions stay the
 * url's), then the query's tls_* parameters.
 */
static int parse_tls_url(const char *url, size_t scheme_len, rlock__url *u) {
    const char *query = strchr(url + scheme_len, '?');
    int status;
    if (query != NULL && slash_in_password(url, query))
        return RLOCK_EINVAL;
    size_t head_len = query != NULL ? (size_t)(query - url) : strlen(url);
    char *head = rlock__memdup0(url, head_len);
    if (head == NULL)
        return RLOCK_ENOMEM;
    if (u->kind == RLOCK__URL_CLUSTER)
        status = parse_cluster_url(head, head + scheme_len, u);
    else
        status = parse_tcp_url(head, head + scheme_len, &u->server);
    rlock__free(head);
    if (status == RLOCK_OK && query != NULL)
        status = rlock__url_tls_query(url, query + 1, u);
    return status;
}

int rlock__parse_url(const char *url, rlock__url *u) {
    int status = RLOCK_EINVAL;
    memset(u, 0, sizeof(*u));
    if (url == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "url is NULL");
    u->tls.on = strncmp(url, "rediss", 6) == 0;
    if (strncmp(url, "redis://", 8) == 0) {
        status = parse_tcp_url(url, url + 8, &u->server);
    } else if (strncmp(url, "rediss://", 9) == 0) {
        status = parse_tls_url(url, 9, u);
    } else if (strncmp(url, "rediss-cluster://", 17) == 0) {
        u->kind = RLOCK__URL_CLUSTER;
        status = parse_tls_url(url, 17, u);
    } else if (strncmp(url, "rediss-sentinel://", 18) == 0) {
        u->kind = RLOCK__URL_SENTINEL;
        status = parse_sentinel_url(url, url + 18, u);
    } else if (strncmp(url, "unix://", 7) == 0) {
        status = parse_unix_url(url, url + 7, &u->server);
    } else if (strncmp(url, "redis-sentinel://", 17) == 0) {
        u->kind = RLOCK__URL_SENTINEL;
        status = parse_sentinel_url(url, url + 17, u);
    } else if (strncmp(url, "redis-cluster://", 16) == 0) {
        u->kind = RLOCK__URL_CLUSTER;
        status = parse_cluster_url(url, url + 16, u);
    } else {
        status = bad_scheme(url);
    }
    if (status != RLOCK_OK)
        rlock__url_clear(u);
    return status;
}

void rlock__url_clear(rlock__url *u) {
    rlock__endpoint_clear(&u->server);
    for (int i = 0; i < u->nhosts; i++)
        rlock__endpoint_clear(&u->hosts[i]);
    rlock__free(u->hosts);
    rlock__free(u->master_name);
    rlock__free(u->sentinel_user);
    if (u->sentinel_password != NULL)
        memset(u->sentinel_password, 0, strlen(u->sentinel_password));
    rlock__free(u->sentinel_password);
    memset(u, 0, sizeof(*u));
}

void rlock__endpoint_clear(rlock__endpoint *ep) {
    rlock__free(ep->host);
    rlock__free(ep->unix_path);
    rlock__free(ep->user);
    if (ep->password != NULL)
        memset(ep->password, 0, strlen(ep->password));
    rlock__free(ep->password);
    memset(ep, 0, sizeof(*ep));
}

int rlock__endpoint_set(rlock__endpoint *ep, const char *host, int port, const char *user,
                         const char *password, int db) {
    memset(ep, 0, sizeof(*ep));
    ep->port = port;
    ep->db = db;
    ep->host = rlock__memdup0(host, strlen(host));
    ep->user = user != NULL ? rlock__memdup0(user, strlen(user)) : NULL;
    ep->password = password != NULL ? rlock__memdup0(password, strlen(password)) : NULL;
    if (ep->host == NULL || (user != NULL && ep->user == NULL) ||
        (password != NULL && ep->password == NULL)) {
        rlock__endpoint_clear(ep);
        return RLOCK_ENOMEM;
    }
    return RLOCK_OK;
}

int rlock__endpoint_is(const rlock__endpoint *ep, const char *host, int port) {
    return ep->host != NULL && ep->port == port && strcmp(ep->host, host) == 0;
}

/* Whether the query parameter at p (up to '&' or the end) names a credential. */
static int is_credential_param(const char *p) {
    return strncmp(p, "sentinel_password=", 18) == 0 || strncmp(p, "sentinel_user=", 14) == 0;
}

const char *rlock__url_redacted(const char *url, char *buf, size_t size) {
    const char *scheme_end = url != NULL ? strstr(url, "://") : NULL;
    size_t used = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    if (scheme_end == NULL) {
        snprintf(buf, size, "%s", url != NULL ? url : "");
        return buf;
    }
    const char *rest = scheme_end + 3;
    const char *hosts_end = rest + strcspn(rest, "/?");
    const char *at = NULL;
    for (const char *p = rest; p < hosts_end; p++)
        if (*p == '@')
            at = p; /* the userinfo ends at the last '@' before the path (as parsed) */
    const char *query = strchr(hosts_end, '?');
    size_t keep = query != NULL ? (size_t)(query - (at != NULL ? at + 1 : rest))
                                : strlen(at != NULL ? at + 1 : rest);
    used = (size_t)snprintf(buf, size, "%.*s%.*s", (int)(rest - url), url, (int)keep,
                            at != NULL ? at + 1 : rest);
    char sep = '?';
    const char *p = query != NULL ? query + 1 : NULL;
    while (p != NULL && *p != '\0' && used < size) {
        size_t len = strcspn(p, "&");
        if (!is_credential_param(p)) {
            used += (size_t)snprintf(buf + used, size - used, "%c%.*s", sep, (int)len, p);
            sep = '&';
        }
        p += len + (p[len] == '&');
    }
    return buf;
}
