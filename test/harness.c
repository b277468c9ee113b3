/*
 * harness.c - shared helpers for rlock's tests (see harness.h).
 */
#include "harness.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* cmocka's failure entry point; NULL when the program is not linked with
 * cmocka (benchmarks, demo). */
extern void _fail(const char *const file, const int line) __attribute__((weak));

static pid_t h_main_pid;
static long long h_stamp;

__attribute__((constructor)) static void h_init(void)
{
    struct timespec ts;
    /* Line-buffered even into a pipe (run-tests.sh tees the output): a test
     * that hangs and is killed still shows how far it got. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    h_main_pid = getpid();
    clock_gettime(CLOCK_REALTIME, &ts);
    h_stamp = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- failing -------------------------------------------------------- */

void h_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    char msg[1024];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    fflush(stdout);
    if (getpid() != h_main_pid) {
        fprintf(stderr, "%s:%d: (child %d) %s\n", file, line, (int)getpid(), msg);
        fflush(stderr);
        h_child_exit(99);
    }
    fprintf(stderr, "%s:%d: %s\n", file, line, msg);
    fflush(stderr);
    if ((pid_t)syscall(SYS_gettid) != h_main_pid) {
        fprintf(stderr, "harness failure on a helper thread: aborting\n");
        abort();
    }
    if (_fail != NULL)
        _fail(file, line);
    abort();
}

/* ---- time ----------------------------------------------------------- */

long long h_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

long long h_now_ms(void)
{
    return h_now_us() / 1000;
}

void h_sleep_ms(long long ms)
{
    struct timespec ts;
    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Default scale when TEST_TIMEOUT_SCALE is not set: sanitizer builds are
 * slower (make test SAN=thread does not set it). */
#if defined(__SANITIZE_THREAD__)
#define H_DEFAULT_SCALE 4
#elif defined(__SANITIZE_ADDRESS__)
#define H_DEFAULT_SCALE 2
#else
#define H_DEFAULT_SCALE 1
#endif

double h_scale(void)
{
    static double scale;
    if (scale == 0) {
        const char *s = getenv("TEST_TIMEOUT_SCALE");
        double v = H_DEFAULT_SCALE;
        if (s && *s) {
            char *end;
            v = strtod(s, &end);
            if (*end || !(v >= 1) || v > 1000)
                v = H_DEFAULT_SCALE;
        }
        scale = v;
    }
    return scale;
}

long long h_scaled(long long ms)
{
    double v = (double)ms * h_scale();
    long long r = (long long)v;
    return (double)r < v ? r + 1 : r;
}

/* ---- the test server ------------------------------------------------ */

const char *h_url(void)
{
    const char *u = getenv("RLOCK_TEST_URL");
    return (u && *u) ? u : "redis://127.0.0.1:6379";
}

const char *h_url_db(int db)
{
    static char buf[512];
    const char *u = h_url();
    const char *rest;

    if (strncmp(u, "redis://", 8) != 0)
        return NULL;
    rest = u + 8;
    if (strchr(rest, '/') || strchr(rest, '?') || strlen(u) > 400)
        return NULL;
    snprintf(buf, sizeof buf, "%s/%d", u, db);
    return buf;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* %-decodes [s, s+n) into out (size outsz). */
static void pct_decode(const char *s, size_t n, char *out, size_t outsz)
{
    size_t i, o = 0;
    for (i = 0; i < n && o + 1 < outsz; i++) {
        if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = 0;
}

redisContext *h_redis_url(const char *url)
{
    char host[256] = "127.0.0.1", user[256] = "", pass[256] = "", path[1024] = "";
    int port = 6379, db = 0, have_pass = 0, have_user = 0;
    redisContext *c;
    struct timeval tv;

    if (strncmp(url, "unix://", 7) == 0) {
        const char *p = url + 7, *q = strchr(p, '?');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n >= sizeof path)
            H_FAIL("url too long: %s", url);
        memcpy(path, p, n);
        path[n] = 0;
        if (q && strncmp(q, "?db=", 4) == 0)
            db = atoi(q + 4);
    } else if (strncmp(url, "redis://", 8) == 0) {
        const char *p = url + 8, *at = strchr(p, '@'), *end;
        if (at) {
            const char *colon = memchr(p, ':', (size_t)(at - p));
            if (colon) {
                if (colon > p) {
                    pct_decode(p, (size_t)(colon - p), user, sizeof user);
                    have_user = 1;
                }
                pct_decode(colon + 1, (size_t)(at - colon - 1), pass, sizeof pass);
            } else {
                pct_decode(p, (size_t)(at - p), pass, sizeof pass);
            }
            have_pass = 1;
            p = at + 1;
        }
        if (*p == '[') {
            end = strchr(p, ']');
            if (!end || (size_t)(end - p - 1) >= sizeof host)
                H_FAIL("bad url: %s", url);
            memcpy(host, p + 1, (size_t)(end - p - 1));
            host[end - p - 1] = 0;
            p = end + 1;
        } else {
            size_t n = strcspn(p, ":/");
            if (n > 0) {
                if (n >= sizeof host)
                    H_FAIL("bad url: %s", url);
                memcpy(host, p, n);
                host[n] = 0;
            }
            p += n;
        }
        if (*p == ':') {
            port = atoi(p + 1);
            p += 1 + strspn(p + 1, "0123456789");
        }
        if (*p == '/' && p[1])
            db = atoi(p + 1);
    } else {
        H_FAIL("unsupported url: %s", url);
    }

    tv.tv_sec = (time_t)(h_scaled(5000) / 1000);
    tv.tv_usec = 0;
    c = path[0] ? redisConnectUnixWithTimeout(path, tv) : redisConnectWithTimeout(host, port, tv);
    if (!c || c->err) {
        char err[256];
        snprintf(err, sizeof err, "%s", c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        H_FAIL("cannot connect to %s: %s", url, err);
    }
    tv.tv_sec = (time_t)(h_scaled(10000) / 1000);
    redisSetTimeout(c, tv);
    if (have_pass) {
        redisReply *r = have_user ? redisCommand(c, "AUTH %s %s", user, pass)
                                  : redisCommand(c, "AUTH %s", pass);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            if (r)
                freeReplyObject(r);
            redisFree(c);
            H_FAIL("AUTH refused by %s", url);
        }
        freeReplyObject(r);
    }
    if (db != 0) {
        redisReply *r = redisCommand(c, "SELECT %d", db);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            if (r)
                freeReplyObject(r);
            redisFree(c);
            H_FAIL("SELECT %d refused by %s", db, url);
        }
        freeReplyObject(r);
    }
    return c;
}

redisContext *h_redis(void)
{
    return h_redis_url(h_url());
}

static redisReply *h_vcmd(redisContext *c, const char *fmt, va_list ap)
{
    redisReply *r = redisvCommand(c, fmt, ap);
    if (!r)
        H_FAIL("redis command \"%s\" failed: %s", fmt, c->errstr);
    return r;
}

redisReply *h_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    return r;
}

long long h_cmd_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    long long v;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    if (r->type != REDIS_REPLY_INTEGER) {
        char got[200];
        snprintf(got, sizeof got, "type %d %s", r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
        freeReplyObject(r);
        H_FAIL("\"%s\": expected an integer reply, got %s", fmt, got);
    }
    v = r->integer;
    freeReplyObject(r);
    return v;
}

void h_cmd_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    if (r->type == REDIS_REPLY_ERROR) {
        char got[200];
        snprintf(got, sizeof got, "%s", r->str);
        freeReplyObject(r);
        H_FAIL("\"%s\" answered %s", fmt, got);
    }
    freeReplyObject(r);
}

char *h_cmd_str(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    char *s = NULL;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        s = malloc(r->len + 1);
        if (!s)
            abort();
        memcpy(s, r->str, r->len);
        s[r->len] = 0;
    } else if (r->type != REDIS_REPLY_NIL) {
        int t = r->type;
        freeReplyObject(r);
        H_FAIL("\"%s\": expected a string reply, got type %d", fmt, t);
    }
    freeReplyObject(r);
    return s;
}

int h_exists(redisContext *c, const char *name, size_t len)
{
    return (int)h_cmd_int(c, "EXISTS %b", name, len);
}

long long h_pttl(redisContext *c, const char *name, size_t len)
{
    return h_cmd_int(c, "PTTL %b", name, len);
}

int h_lock_fields(redisContext *c, const char *name, size_t len, char **field,
                  long long *value)
{
    redisReply *r = h_cmd(c, "HGETALL %b", name, len);
    int n;
    if (field)
        *field = NULL;
    if (value)
        *value = 0;
    if (r->type != REDIS_REPLY_ARRAY) {
        int t = r->type;
        freeReplyObject(r);
        H_FAIL("HGETALL: expected an array, got type %d", t);
    }
    n = (int)(r->elements / 2);
    if (n > 0) {
        if (field) {
            *field = malloc(r->element[0]->len + 1);
            if (!*field)
                abort();
            memcpy(*field, r->element[0]->str, r->element[0]->len);
            (*field)[r->element[0]->len] = 0;
        }
        if (value) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)r->element[1]->len, r->element[1]->str);
            *value = strtoll(buf, NULL, 10);
        }
    }
    freeReplyObject(r);
    return n;
}

int h_lock_is(redisContext *c, const char *name, size_t len, const char *client_id,
              long long count)
{
    char *field = NULL;
    long long value = 0;
    int n = h_lock_fields(c, name, len, &field, &value);
    int ok = 1;
    size_t idlen = client_id ? strlen(client_id) : 0;

    if (n != 1) {
        fprintf(stderr, "lock key has %d fields, expected 1\n", n);
        ok = 0;
    } else if (!client_id || strncmp(field, client_id, idlen) != 0 || field[idlen] != ':' ||
               !field[idlen + 1] || strspn(field + idlen + 1, "0123456789") != strlen(field + idlen + 1)) {
        fprintf(stderr, "lock field is \"%s\", expected \"%s:<thread id>\"\n", field,
                client_id ? client_id : "(null)");
        ok = 0;
    } else if (value != count) {
        fprintf(stderr, "lock field \"%s\" = %lld, expected %lld\n", field, value, count);
        ok = 0;
    }
    free(field);
    return ok;
}

char *h_channel(const char *name, size_t len, size_t *out_len)
{
    static const char prefix[] = "redisson_lock__channel:";
    size_t plen = sizeof prefix - 1;
    int tagged = memchr(name, '{', len) != NULL;
    size_t n = plen + len + (tagged ? 0 : 2);
    char *s = malloc(n + 1), *p;
    if (!s)
        abort();
    memcpy(s, prefix, plen);
    p = s + plen;
    if (!tagged)
        *p++ = '{';
    memcpy(p, name, len);
    p += len;
    if (!tagged)
        *p++ = '}';
    *p = 0;
    if (out_len)
        *out_len = n;
    return s;
}

long long h_numsub(redisContext *c, const char *name, size_t len)
{
    size_t clen;
    char *ch = h_channel(name, len, &clen);
    redisReply *r = h_cmd(c, "PUBSUB NUMSUB %b", ch, clen);
    long long n;
    free(ch);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(r);
        H_FAIL("PUBSUB NUMSUB: unexpected reply");
    }
    n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

long long h_commandstat_calls(redisContext *c, const char *cmd)
{
    redisReply *r = h_cmd(c, "INFO commandstats");
    char key[128];
    const char *p;
    long long calls = 0;

    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        H_FAIL("INFO commandstats: unexpected reply");
    }
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    for (p = r->str; (p = strstr(p, key)) != NULL; p++) {
        if (p == r->str || p[-1] == '\n') {
            calls = strtoll(p + strlen(key), NULL, 10);
            break;
        }
    }
    freeReplyObject(r);
    return calls;
}

long long h_script_calls(redisContext *c)
{
    return h_commandstat_calls(c, "evalsha") + h_commandstat_calls(c, "eval");
}

long long h_scripts_quiet(redisContext *c, long long quiet_ms, long long timeout_ms)
{
    long long deadline = h_now_ms() + h_scaled(timeout_ms);
    long long last = h_script_calls(c), since = h_now_ms();
    for (;;) {
        long long v;
        h_sleep_ms(10);
        v = h_script_calls(c);
        if (v != last) {
            last = v;
            since = h_now_ms();
        } else if (h_now_ms() - since >= quiet_ms) {
            return v;
        }
        if (h_now_ms() > deadline)
            H_FAIL("waiters never went quiet: %lld script calls and counting", v);
    }
}

redisContext *h_sub_open(const char *url, const char *name, size_t len)
{
    redisContext *c = h_redis_url(url);
    size_t clen;
    char *ch = h_channel(name, len, &clen);
    redisReply *r = h_cmd(c, "SUBSCRIBE %b", ch, clen);
    free(ch);
    if (r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        redisFree(c);
        H_FAIL("SUBSCRIBE: unexpected reply");
    }
    freeReplyObject(r);
    return c;
}

char *h_sub_read(redisContext *sub, long long timeout_ms)
{
    long long ms = h_scaled(timeout_ms);
    struct timeval tv;
    void *reply = NULL;
    redisReply *r;
    char *s = NULL;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    redisSetTimeout(sub, tv);
    if (redisGetReply(sub, &reply) != REDIS_OK || !reply)
        return NULL;
    r = reply;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[2]->type == REDIS_REPLY_STRING) {
        s = malloc(r->element[2]->len + 1);
        if (!s)
            abort();
        memcpy(s, r->element[2]->str, r->element[2]->len);
        s[r->element[2]->len] = 0;
    }
    freeReplyObject(r);
    return s;
}

/* ---- names ---------------------------------------------------------- */

struct h_name {
    struct h_name *next;
    char s[];
};

static pthread_mutex_t h_names_mu = PTHREAD_MUTEX_INITIALIZER;
static struct h_name *h_names;
static unsigned long h_name_counter;

const char *h_unique_name(const char *prefix)
{
    char buf[512];
    struct h_name *n;
    unsigned long k;
    size_t len;

    pthread_mutex_lock(&h_names_mu);
    k = ++h_name_counter;
    pthread_mutex_unlock(&h_names_mu);
    len = (size_t)snprintf(buf, sizeof buf, "rlock-test:%s:%d:%lu:%llx",
                           prefix ? prefix : "x", (int)getpid(), k, h_stamp);
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    n = malloc(sizeof *n + len + 1);
    if (!n)
        abort();
    memcpy(n->s, buf, len + 1);
    pthread_mutex_lock(&h_names_mu);
    n->next = h_names;
    h_names = n;
    pthread_mutex_unlock(&h_names_mu);
    return n->s;
}

__attribute__((destructor)) static void h_names_free(void)
{
    struct h_name *n, *next;
    if (getpid() != h_main_pid)
        return;
    pthread_mutex_lock(&h_names_mu);
    for (n = h_names; n; n = next) {
        next = n->next;
        free(n);
    }
    h_names = NULL;
    pthread_mutex_unlock(&h_names_mu);
}

/* ---- rlock clients -------------------------------------------------- */

void h_config(rlock_config *cfg)
{
    rlock_config_init(cfg);
    cfg->url = h_url();
    cfg->connect_timeout_ms = (int)h_scaled(2000);
    cfg->command_timeout_ms = (int)h_scaled(2000);
}

rlock_client *h_open_config(const rlock_config *cfg)
{
    rlock_client *c = NULL;
    int rc = rlock_client_open(cfg, &c);
    if (rc != RLOCK_OK)
        H_FAIL("rlock_client_open(%s) = %s (%s)", cfg && cfg->url ? cfg->url : "(default)",
               rlock_status_name(rc), rlock_strerror(rc));
    if (!c)
        H_FAIL("rlock_client_open returned OK and a NULL client");
    return c;
}

static rlock_client *open_with(const char *url, long long wd, int cmd,
                               void (*cb)(const char *, void *), void *arg)
{
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    if (wd > 0)
        cfg.watchdog_timeout_ms = wd;
    if (cmd > 0)
        cfg.command_timeout_ms = cmd;
    cfg.on_lock_lost = cb;
    cfg.callback_arg = arg;
    return h_open_config(&cfg);
}

rlock_client *h_open(long long watchdog_timeout_ms, int command_timeout_ms)
{
    return open_with(h_url(), watchdog_timeout_ms, command_timeout_ms, NULL, NULL);
}

rlock_client *h_open_cb(long long watchdog_timeout_ms, int command_timeout_ms,
                        void (*cb)(const char *name, void *arg), void *arg)
{
    return open_with(h_url(), watchdog_timeout_ms, command_timeout_ms, cb, arg);
}

rlock_client *h_open_url(const char *url, long long watchdog_timeout_ms,
                         int command_timeout_ms)
{
    return open_with(url, watchdog_timeout_ms, command_timeout_ms, NULL, NULL);
}

rlock *h_get(rlock_client *client, const char *name)
{
    rlock *l = NULL;
    int rc = rlock_get(client, name, &l);
    if (rc != RLOCK_OK || !l)
        H_FAIL("rlock_get(%.100s) = %s", name, rlock_status_name(rc));
    return l;
}

/* ---- processes ------------------------------------------------------ */

int h_wait_child(pid_t pid, long long timeout_ms)
{
    long long deadline = h_now_ms() + h_scaled(timeout_ms);
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            H_FAIL("waitpid(%d): %s", (int)pid, strerror(errno));
        if (h_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return -1;
        }
        h_sleep_ms(5);
    }
}

void h_child_exit(int code)
{
    const char *pre = getenv("LD_PRELOAD");
    fflush(NULL);
    if (pre && strstr(pre, "vgpreload")) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "exit %d", code & 255);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    }
    _exit(code);
}

int h_child_code(int status)
{
    if (status == -1)
        return 2000;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 1000 + WTERMSIG(status);
    return 3000;
}

/* ---- actors -------------------------------------------------------- */

struct h_actor {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    h_actor_fn fn;
    void *arg;
    int posted;   /* a call is pending or running */
    int done;     /* the last call returned */
    int quit;
    long long result;
    long long finished_ms;
};

static void *actor_main(void *p)
{
    h_actor *a = p;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        h_actor_fn fn;
        void *arg;
        long long r;
        while (!a->posted && !a->quit)
            pthread_cond_wait(&a->cv, &a->mu);
        if (!a->posted && a->quit)
            break;
        fn = a->fn;
        arg = a->arg;
        pthread_mutex_unlock(&a->mu);
        r = fn(arg);
        pthread_mutex_lock(&a->mu);
        a->result = r;
        a->finished_ms = h_now_ms();
        a->posted = 0;
        a->done = 1;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

h_actor *h_actor_start(void)
{
    h_actor *a = calloc(1, sizeof *a);
    int rc;
    pthread_condattr_t ca;
    if (!a)
        abort();
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &ca);
    pthread_condattr_destroy(&ca);
    a->done = 1;
    rc = pthread_create(&a->thread, NULL, actor_main, a);
    if (rc != 0)
        H_FAIL("pthread_create: %s", strerror(rc));
    return a;
}

void h_actor_post(h_actor *a, h_actor_fn fn, void *arg)
{
    pthread_mutex_lock(&a->mu);
    if (a->posted) {
        pthread_mutex_unlock(&a->mu);
        H_FAIL("h_actor_post: the actor is busy");
    }
    a->fn = fn;
    a->arg = arg;
    a->posted = 1;
    a->done = 0;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

int h_actor_done(h_actor *a)
{
    int d;
    pthread_mutex_lock(&a->mu);
    d = a->done;
    pthread_mutex_unlock(&a->mu);
    return d;
}

long long h_actor_wait_at(h_actor *a, long long timeout_ms, const char *file, int line)
{
    long long limit = h_scaled(timeout_ms);
    struct timespec ts;
    long long r;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(limit / 1000);
    ts.tv_nsec += (long)(limit % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&a->mu);
    while (!a->done) {
        if (pthread_cond_timedwait(&a->cv, &a->mu, &ts) == ETIMEDOUT && !a->done) {
            pthread_mutex_unlock(&a->mu);
            h_fail(file, line, "actor call still running after %lld ms", limit);
        }
    }
    r = a->result;
    pthread_mutex_unlock(&a->mu);
    return r;
}

long long h_actor_finished_ms(h_actor *a)
{
    long long t;
    pthread_mutex_lock(&a->mu);
    t = a->finished_ms;
    pthread_mutex_unlock(&a->mu);
    return t;
}

long long h_actor_call_at(h_actor *a, h_actor_fn fn, void *arg, const char *file, int line)
{
    h_actor_post(a, fn, arg);
    return h_actor_wait_at(a, 30000, file, line);
}

void h_actor_stop(h_actor *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->quit = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}

long long h_op_lock(void *lock)
{
    return rlock_lock(lock);
}

long long h_op_unlock(void *lock)
{
    return rlock_unlock(lock);
}

long long h_op_force_unlock(void *lock)
{
    return rlock_force_unlock(lock);
}

long long h_op_is_locked(void *lock)
{
    return rlock_is_locked(lock);
}

long long h_op_is_held(void *lock)
{
    return rlock_is_held_by_current_thread(lock);
}

long long h_op_hold_count(void *lock)
{
    return rlock_hold_count(lock);
}

long long h_op_try_lock(void *p)
{
    struct h_try *t = p;
    return rlock_try_lock(t->lock, t->wait_ms, t->lease_ms);
}

long long h_op_lock_lease(void *p)
{
    struct h_try *t = p;
    return rlock_lock_lease(t->lock, t->lease_ms);
}

/* ---- servers of our own --------------------------------------------- */

struct h_server {
    pid_t pid;
    int port;
    char dir[256];
    char url[64];
    struct h_server *next; /* in h_servers, until h_server_stop() */
};

/* Servers not stopped yet (a failed test skips its h_server_stop()): the
 * exit handler below kills them and removes their directories. */
static pthread_mutex_t h_servers_mu = PTHREAD_MUTEX_INITIALIZER;
static h_server *h_servers;

static void server_track(h_server *s, int add)
{
    h_server **pp;
    pthread_mutex_lock(&h_servers_mu);
    if (add) {
        s->next = h_servers;
        h_servers = s;
    } else {
        for (pp = &h_servers; *pp; pp = &(*pp)->next) {
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        }
    }
    pthread_mutex_unlock(&h_servers_mu);
}

__attribute__((destructor)) static void h_servers_cleanup(void)
{
    if (getpid() != h_main_pid)
        return;
    for (;;) {
        h_server *s;
        pthread_mutex_lock(&h_servers_mu);
        s = h_servers;
        pthread_mutex_unlock(&h_servers_mu);
        if (!s)
            break;
        h_server_stop(s);
    }
}

static char *find_in_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && n + strlen(prog) + 2 < sizeof buf) {
            memcpy(buf, path, n);
            buf[n] = '/';
            strcpy(buf + n + 1, prog);
            if (access(buf, X_OK) == 0) {
                char *s = strdup(buf);
                if (!s)
                    abort();
                return s;
            }
        }
        path += n;
        if (*path == ':')
            path++;
    }
    return NULL;
}

static unsigned next_random(void)
{
    static unsigned long long x;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    unsigned r;
    pthread_mutex_lock(&mu);
    if (x == 0)
        x = (unsigned long long)h_now_us() ^ ((unsigned long long)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r = (unsigned)(x >> 16);
    pthread_mutex_unlock(&mu);
    return r;
}

/* Forks and execs redis-server on s->port. Returns the child's pid. */
static pid_t spawn_server(const h_server *s)
{
    char port[16], logfile[300];
    char *exe = find_in_path("redis-server");
    pid_t parent = getpid(), pid;
    char *argv[32];
    int i = 0;

    if (!exe)
        H_FAIL("redis-server not found in PATH");
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(logfile, sizeof logfile, "%s/redis.log", s->dir);
    argv[i++] = exe;
    argv[i++] = (char *)"--bind";
    argv[i++] = (char *)"127.0.0.1";
    argv[i++] = (char *)"--port";
    argv[i++] = port;
    argv[i++] = (char *)"--dir";
    argv[i++] = (char *)s->dir;
    argv[i++] = (char *)"--logfile";
    argv[i++] = logfile;
    argv[i++] = (char *)"--save";
    argv[i++] = (char *)"";
    argv[i++] = (char *)"--appendonly";
    argv[i++] = (char *)"no";
    argv[i++] = (char *)"--enable-debug-command";
    argv[i++] = (char *)"local";
    argv[i++] = (char *)"--daemonize";
    argv[i++] = (char *)"no";
    argv[i++] = (char *)"--protected-mode";
    argv[i++] = (char *)"yes";
    argv[i] = NULL;

    pid = fork();
    if (pid < 0)
        H_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Child: async-signal-safe calls only until execv. */
        sigset_t none;
        int fd, maxfd;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        fd = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(fd, 2);
        }
        /* Do not let the server inherit the test's sockets. */
        maxfd = (int)sysconf(_SC_OPEN_MAX);
        if (maxfd < 0 || maxfd > 65536)
            maxfd = 65536;
        for (fd = 3; fd < maxfd; fd++)
            close(fd);
        execv(argv[0], argv);
        _exit(127);
    }
    free(exe);
    return pid;
}

/* Waits for the server at s->port with pid to answer PING. 1 if it does, 0
 * if the process exited (e.g. the port was taken). Fails on timeout. */
static int wait_ready(h_server *s, pid_t pid)
{
    long long deadline = h_now_ms() + h_scaled(10000);
    char want[64];
    snprintf(want, sizeof want, "process_id:%d\r", (int)pid);
    for (;;) {
        int status;
        struct timeval tv = {0, 200000};
        redisContext *c;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return 0;
        c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
        if (c && !c->err) {
            redisReply *r;
            redisSetTimeout(c, tv);
            r = redisCommand(c, "PING");
            if (r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) {
                freeReplyObject(r);
                r = redisCommand(c, "INFO server");
                if (r && r->type == REDIS_REPLY_STRING && strstr(r->str, want)) {
                    freeReplyObject(r);
                    redisFree(c);
                    return 1;
                }
                /* Someone else's server on this port. */
                if (r)
                    freeReplyObject(r);
                redisFree(c);
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                return 0;
            }
            if (r)
                freeReplyObject(r);
        }
        if (c)
            redisFree(c);
        if (h_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            H_FAIL("redis-server on port %d did not answer PING", s->port);
        }
        h_sleep_ms(10);
    }
}

h_server *h_server_start(void)
{
    h_server *s = calloc(1, sizeof *s);
    const char *tmp = getenv("TMPDIR");
    int attempt;

    if (!s)
        abort();
    snprintf(s->dir, sizeof s->dir, "%s/rlock-hsrv.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir)) {
        free(s);
        H_FAIL("mkdtemp: %s", strerror(errno));
    }
    for (attempt = 0; attempt < 30; attempt++) {
        pid_t pid;
        s->port = 20000 + (int)(next_random() % 40001);
        pid = spawn_server(s);
        if (wait_ready(s, pid)) {
            s->pid = pid;
            snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
            server_track(s, 1);
            return s;
        }
    }
    rmdir(s->dir);
    free(s);
    H_FAIL("could not start a redis-server on a free port");
}

const char *h_server_url(const h_server *s)
{
    return s->url;
}

int h_server_port(const h_server *s)
{
    return s->port;
}

pid_t h_server_pid(const h_server *s)
{
    return s->pid;
}

redisContext *h_server_redis(const h_server *s)
{
    return h_redis_url(s->url);
}

char h_proc_state(pid_t pid)
{
    char path[64], buf[512];
    ssize_t n;
    int fd;
    char *p;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return 0;
    return p[2];
}

void h_server_pause(h_server *s)
{
    if (!s->pid)
        H_FAIL("h_server_pause: server not running");
    if (kill(s->pid, SIGSTOP) != 0)
        H_FAIL("kill(SIGSTOP): %s", strerror(errno));
    H_WAIT_FOR(h_proc_state(s->pid) == 'T' || h_proc_state(s->pid) == 't', 2000);
}

void h_server_resume(h_server *s)
{
    if (!s->pid)
        H_FAIL("h_server_resume: server not running");
    if (kill(s->pid, SIGCONT) != 0)
        H_FAIL("kill(SIGCONT): %s", strerror(errno));
    H_WAIT_FOR(h_proc_state(s->pid) != 'T' && h_proc_state(s->pid) != 't', 2000);
}

void h_server_kill(h_server *s)
{
    int status;
    if (!s->pid)
        return;
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
        ;
    s->pid = 0;
}

void h_server_restart(h_server *s)
{
    int attempt;
    h_server_kill(s);
    /* The port may take a moment to be free again. */
    for (attempt = 0; attempt < 50; attempt++) {
        pid_t pid = spawn_server(s);
        if (wait_ready(s, pid)) {
            s->pid = pid;
            return;
        }
        h_sleep_ms(20);
    }
    H_FAIL("could not restart redis-server on port %d", s->port);
}

void h_server_stop(h_server *s)
{
    DIR *d;
    if (!s)
        return;
    server_track(s, 0);
    h_server_kill(s);
    d = opendir(s->dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            char p[600];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", s->dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(s->dir);
    free(s);
}

/* ==== fault-suite helpers ================================================
 * Added for test/fault_*.c (issue 3); see the same section of harness.h.
 * Nothing above this line was changed.
 */

#include <poll.h>

void h_child_start(h_child *c, h_child_fn fn, void *arg)
{
    int down[2], up[2];
    pid_t parent = getpid(), pid;

    if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0)
        H_FAIL("pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        H_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        int rc;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        close(down[1]);
        close(up[0]);
        rc = fn(arg, down[0], up[1]);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    close(down[0]);
    close(up[1]);
    c->pid = pid;
    c->to = down[1];
    c->from = up[0];
}

static int h_vline_send(int fd, const char *fmt, va_list ap)
{
    char buf[1024];
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    size_t off = 0, len;
    if (n < 0)
        return -1;
    len = (size_t)n < sizeof buf - 1 ? (size_t)n : sizeof buf - 2;
    buf[len++] = '\n';
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

int h_line_send(int fd, const char *fmt, ...)
{
    va_list ap;
    int rc;
    sigset_t pipe_set, old;
    /* A reader that is gone must give EPIPE here, not kill the process. */
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    va_start(ap, fmt);
    rc = h_vline_send(fd, fmt, ap);
    va_end(ap);
    if (rc != 0) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero); /* discard a pending SIGPIPE */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int h_line_recv(int fd, char *buf, size_t size, long long timeout_ms)
{
    long long deadline = h_now_ms() + h_scaled(timeout_ms);
    size_t n = 0;
    if (size == 0)
        return -1;
    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        long long left = deadline - h_now_ms();
        char ch;
        ssize_t r;
        int pr;
        if (left < 0)
            return -1;
        pr = poll(&pfd, 1, (int)(left > 1000000 ? 1000000 : left));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue; /* re-checks the deadline */
        r = read(fd, &ch, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        if (ch == '\n') {
            buf[n] = 0;
            return (int)n;
        }
        if (n + 1 < size)
            buf[n++] = ch;
    }
}

void h_child_send(h_child *c, const char *fmt, ...)
{
    va_list ap;
    int rc;
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    va_start(ap, fmt);
    rc = h_vline_send(c->to, fmt, ap);
    va_end(ap);
    if (rc != 0) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        H_FAIL("cannot write to child %d (it exited?)", (int)c->pid);
}

void h_child_recv(h_child *c, char *buf, size_t size, long long timeout_ms)
{
    if (h_line_recv(c->from, buf, size, timeout_ms) < 0)
        H_FAIL("no line from child %d within %lld ms (it exited or hangs)", (int)c->pid,
               h_scaled(timeout_ms));
}

int h_child_finish(h_child *c, long long timeout_ms)
{
    int status;
    if (c->to >= 0)
        close(c->to);
    if (c->from >= 0)
        close(c->from);
    c->to = c->from = -1;
    if (c->pid <= 0)
        return 0;
    status = h_wait_child(c->pid, timeout_ms);
    c->pid = 0;
    return h_child_code(status);
}

int h_child_kill(h_child *c)
{
    int status = 0;
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
            ;
        c->pid = 0;
    }
    if (c->to >= 0)
        close(c->to);
    if (c->from >= 0)
        close(c->from);
    c->to = c->from = -1;
    return h_child_code(status);
}

void h_lost_cb(const char *name, void *arg)
{
    struct h_lost *l = arg;
    snprintf(l->last_name, sizeof l->last_name, "%s", name ? name : "(null)");
    __atomic_store_n(&l->last_ms, h_now_ms(), __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&l->count, 1, __ATOMIC_SEQ_CST);
}

int h_lost_count(struct h_lost *l)
{
    return __atomic_load_n(&l->count, __ATOMIC_SEQ_CST);
}

static long long op_close(void *client)
{
    rlock_client_close(client);
    return 0;
}

long long h_timed_close(rlock_client *c, long long timeout_ms)
{
    h_actor *a = h_actor_start();
    long long t0 = h_now_ms(), dt;
    h_actor_post(a, op_close, c);
    h_actor_wait(a, timeout_ms);
    dt = h_actor_finished_ms(a) - t0;
    h_actor_stop(a);
    return dt;
}

int h_server_fixture_start(void **state)
{
    *state = h_server_start();
    return 0;
}

int h_server_fixture_stop(void **state)
{
    h_server_stop(*state);
    *state = NULL;
    return 0;
}
