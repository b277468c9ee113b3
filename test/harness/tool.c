/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tool.c - running rlockctl (and jq) as processes: fork + exec with stdout
 * and stderr on pipes, stdin from /dev/null, a pipe fed with given input,
 * or a pty (a terminal, for unlock's question); one poll() loop feeds the
 * input and drains both outputs, so neither side can block the other.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "redis.h"
#include "fail.h"
#include "timing.h"
#include "tool.h"

const char *h_tool_path(void) {
    static char path[PATH_MAX];
    if (getenv("RLOCKCTL") != NULL)
        return getenv("RLOCKCTL");
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 16);
    if (n <= 0)
        H_FAIL("readlink /proc/self/exe: %s", strerror(errno));
    path[n] = '\0';
    for (int up = 0; up < 2; up++) { /* build/test/test_x -> build */
        char *slash = strrchr(path, '/');
        if (slash == NULL)
            H_FAIL("cannot find rlockctl beside %s", path);
        *slash = '\0';
    }
    strcat(path, "/rlockctl");
    return path;
}

typedef struct buffer {
    char *data;
    size_t len;
} buffer;

static void append(buffer *b, const char *s, size_t n) {
    char *grown = realloc(b->data, b->len + n + 1);
    if (grown == NULL)
        H_FAIL("out of memory");
    b->data = grown;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

/* The child's stdin: a pty slave (tty), the read end of in[] (input), or /dev/null. */
static void child_stdin(int tty_master, const int in[2]) {
    int fd;
    if (tty_master >= 0) {
        setsid(); /* the pty becomes its controlling terminal */
        fd = open(ptsname(tty_master), O_RDWR);
    } else if (in[0] >= 0) {
        fd = in[0];
    } else {
        fd = open("/dev/null", O_RDONLY);
    }
    if (fd < 0 || dup2(fd, STDIN_FILENO) < 0)
        _exit(126);
}

static int open_pty(void) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0)
        H_FAIL("pty: %s", strerror(errno));
    return m;
}

/* Reads what is ready on fd into b; 1 while it stays open. */
static int drain(int fd, buffer *b) {
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n > 0)
        append(b, chunk, (size_t)n);
    return n > 0 || (n < 0 && errno == EINTR);
}

/* Holds the input back until prompt is on stderr, then runs before_input(arg). */
typedef struct gate {
    const char *prompt;
    void (*before_input)(void *arg);
    void *arg;
} gate;

/* Whether the input may be fed now (g NULL: at once); runs g's hook the first time. */
static int gate_open(const gate *g, const buffer *err, int *opened) {
    if (g == NULL || *opened)
        return 1;
    if (strstr(err->data, g->prompt) == NULL)
        return 0;
    g->before_input(g->arg);
    return *opened = 1;
}

/*
 * Runs argv; input (may be NULL) is written to its stdin -- through a pty
 * when tty is set, and only once g (may be NULL) lets it. Fills t.
 */
static void capture(const char *const *argv, const char *input, int tty, const gate *g,
                    h_tool *t) {
    int out[2], err[2], in[2] = {-1, -1}, master = tty ? open_pty() : -1;
    if (pipe(out) != 0 || pipe(err) != 0 || (!tty && input != NULL && pipe(in) != 0))
        H_FAIL("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        H_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        child_stdin(master, in);
        /* our ends of its pipes: a write end left open here would keep its stdin from EOF */
        close(out[0]);
        close(err[0]);
        if (in[1] >= 0)
            close(in[1]);
        if (master >= 0)
            close(master);
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (in[0] >= 0)
        close(in[0]);
    int feed = tty ? master : in[1];
    size_t fed = 0, want = input != NULL ? strlen(input) : 0;
    if (feed >= 0 && want == 0 && !tty) {
        close(feed);
        feed = -1;
    }
    buffer bo = {0}, be = {0};
    append(&bo, "", 0);
    append(&be, "", 0);
    int open_out = 1, open_err = 1, opened = 0;
    long long deadline = h_now_ms() + h_scaled(60000);
    while ((open_out || open_err) && h_now_ms() < deadline) {
        struct pollfd p[3] = {{.fd = open_out ? out[0] : -1, .events = POLLIN},
                              {.fd = open_err ? err[0] : -1, .events = POLLIN},
                              {.fd = feed >= 0 && fed < want && gate_open(g, &be, &opened)
                                         ? feed : -1,
                               .events = POLLOUT}};
        if (poll(p, 3, 100) < 0 && errno != EINTR)
            H_FAIL("poll: %s", strerror(errno));
        if (p[0].revents)
            open_out = drain(out[0], &bo);
        if (p[1].revents)
            open_err = drain(err[0], &be);
        if (p[2].revents & POLLOUT) {
            ssize_t n = write(feed, input + fed, want - fed);
            fed += n > 0 ? (size_t)n : 0;
            if (fed == want && !tty) {
                close(feed);
                feed = -1;
            }
        }
    }
    t->status = h_child_code(h_wait_child(pid, 1000));
    t->out = bo.data;
    t->err = be.data;
    close(out[0]);
    close(err[0]);
    if (feed >= 0)
        close(feed);
}

/* argv: the tool, --url url (if any), then the NULL-ended arguments of ap. */
static void run_tool(h_tool *t, const char *answer, int tty, const gate *g, const char *url,
                     va_list ap) {
    const char *argv[40];
    int n = 0;
    argv[n++] = h_tool_path();
    if (url != NULL) {
        argv[n++] = "--url";
        argv[n++] = url;
    }
    for (const char *a; n < 39 && (a = va_arg(ap, const char *)) != NULL;)
        argv[n++] = a;
    argv[n] = NULL;
    fprintf(stderr, "  $ rlockctl");
    for (int i = url != NULL ? 3 : 1; i < n; i++)
        fprintf(stderr, " %s", argv[i]);
    capture(argv, answer, tty, g, t);
    fprintf(stderr, "   -> exit %d%s%s", t->status, t->err[0] ? ", stderr: " : "\n", t->err);
}

void h_tool_run(h_tool *t, const char *url, ...) {
    va_list ap;
    va_start(ap, url);
    run_tool(t, NULL, 0, NULL, url, ap);
    va_end(ap);
}

void h_tool_run_tty(h_tool *t, const char *answer, const char *url, ...) {
    va_list ap;
    va_start(ap, url);
    run_tool(t, answer, 1, NULL, url, ap);
    va_end(ap);
}

void h_tool_run_tty_after(h_tool *t, const char *prompt, void (*before_answer)(void *arg),
                          void *arg, const char *answer, const char *url, ...) {
    gate g = {.prompt = prompt, .before_input = before_answer, .arg = arg};
    va_list ap;
    va_start(ap, url);
    run_tool(t, answer, 1, &g, url, ap);
    va_end(ap);
}

void h_tool_free(h_tool *t) {
    free(t->out);
    free(t->err);
    t->out = t->err = NULL;
}

void h_tool_expect(const h_tool *t, int status, const char *needle) {
    if (t->status != status)
        H_FAIL("rlockctl exited %d, expected %d; stdout:\n%s\nstderr:\n%s", t->status, status,
               t->out, t->err);
    if (needle != NULL && strstr(t->out, needle) == NULL)
        H_FAIL("rlockctl's stdout lacks \"%s\":\n%s", needle, t->out);
}

char *h_jq(const char *json, const char *filter) {
    const char *argv[] = {"jq", "-r", filter, NULL};
    h_tool t;
    capture(argv, json, 0, NULL, &t);
    if (t.status != 0)
        H_FAIL("jq -r '%s' exited %d: %s\non: %s", filter, t.status, t.err, json);
    size_t len = strlen(t.out);
    if (len > 0 && t.out[len - 1] == '\n')
        t.out[len - 1] = '\0';
    free(t.err);
    return t.out;
}

void h_jq_expect(const char *json, const char *filter, const char *want) {
    char *got = h_jq(json, filter);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "json: %s\n", json);
        H_FAIL("jq '%s' gave \"%s\", expected \"%s\"", filter, got, want);
    }
    free(got);
}

void h_register_client(redisContext *r, const char *id, const char *host, long pid,
                       const char *program) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long started = (long long)now.tv_sec * 1000 - 5000;
    h_cmd_ok(r, "HSET rlock:client:%s id %s host %s pid %ld program %s version %s started_ms %lld "
                "url redis://127.0.0.1:6379 watchdog_timeout_ms 30000",
             id, id, host, pid, program, RLOCK_VERSION_STRING, started);
    h_cmd_ok(r, "PEXPIRE rlock:client:%s 60000", id);
}

/* The checks of h_watch_expect_heard on its output. */
static void expect_heard(const h_tool *t, int screens, const char *name) {
    int seen = 0;
    const char *last = t->out;
    for (const char *p = t->out; (p = strstr(p, "-- rlockctl watch ")) != NULL; p++, seen++)
        last = p;
    if (seen != screens)
        H_FAIL("%d screens, expected %d:\n%s", seen, screens, t->out);
    char start[300], kind[16], state[16], ttl[32], waiters[16];
    snprintf(start, sizeof(start), "\n%s ", name);
    const char *row = strstr(last, start);
    double rate = 0;
    long long total = 0;
    if (row == NULL || sscanf(row + strlen(start), " %15s %15s %31s %15s %lf %lld", kind, state,
                              ttl, waiters, &rate, &total) != 6)
        H_FAIL("no row with a rate for %s on the last screen:\n%s", name, t->out);
    if (rate <= 0 || total < 3)
        H_FAIL("no unlock messages counted for %s (rate %.1f, total %lld):\n%s", name, rate,
               total, t->out);
}

/* Two threads locking and unlocking one lock over and over, one per handle. */
typedef struct h_churn {
    struct rlock *lock[2];
    pthread_t th[2];
    atomic_int stop;
    atomic_long rounds;
} h_churn;

typedef struct churn_arg {
    h_churn *churn;
    int i;
} churn_arg;

static void *churn_main(void *arg) {
    h_churn *ch = ((churn_arg *)arg)->churn;
    struct rlock *lock = ch->lock[((churn_arg *)arg)->i];
    free(arg);
    while (!atomic_load(&ch->stop) && rlock_lock(lock) == RLOCK_OK) {
        h_sleep_ms(5);
        rlock_unlock(lock);
        atomic_fetch_add(&ch->rounds, 1);
    }
    return NULL;
}

static h_churn *churn_start(struct rlock *a, struct rlock *b) {
    h_churn *ch = calloc(1, sizeof(*ch));
    if (ch == NULL)
        H_FAIL("out of memory");
    ch->lock[0] = a;
    ch->lock[1] = b;
    for (int i = 0; i < 2; i++) {
        churn_arg *arg = malloc(sizeof(*arg));
        if (arg == NULL)
            H_FAIL("out of memory");
        *arg = (churn_arg){.churn = ch, .i = i};
        pthread_create(&ch->th[i], NULL, churn_main, arg);
    }
    H_WAIT_FOR(atomic_load(&ch->rounds) > 10, 10000);
    return ch;
}

static void churn_stop(h_churn *ch) {
    atomic_store(&ch->stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(ch->th[i], NULL);
    free(ch);
}

void h_watch_expect_heard(const char *url, const char *target, const char *name, struct rlock *a,
                          struct rlock *b, const char *expect) {
    h_tool t;
    h_churn *churn = churn_start(a, b);
    h_tool_run(&t, url, "watch", target, "--interval", "500", "-n", "3", NULL);
    churn_stop(churn);
    h_tool_expect(&t, 0, expect);
    expect_heard(&t, 3, name);
    h_tool_free(&t);
}
