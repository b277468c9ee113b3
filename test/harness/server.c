/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c - redis-servers of the tests' own: spawned on a free random port
 * in a temporary directory, paused (SIGSTOP), killed, restarted, stopped;
 * the cmocka fixtures; and an exit handler that stops whatever a failed test
 * left running.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "fail.h"
#include "priv.h"
#include "redis.h"
#include "server.h"

#define H_EXTRA_ARGS 16

struct h_server {
    pid_t pid;
    int port;
    char dir[256];
    char url[160];
    int sentinel;                    /* redis-sentinel with dir/sentinel.conf */
    char password[64];               /* requirepass of a sentinel (h_sentinel_start), or "" */
    char *extra[H_EXTRA_ARGS + 1];   /* more redis-server arguments (owned), NULL-ended */
    struct h_server *next; /* in h_servers, until h_server_stop() */
};

h_server *h_srv;

static void remove_dir(const char *dir);

/* Servers not stopped yet (a failed test skips its h_server_stop()): the
 * exit handler below kills them and removes their directories. */
static pthread_mutex_t h_servers_mu = PTHREAD_MUTEX_INITIALIZER;
static h_server *h_servers;

static void server_track(h_server *s, int add) {
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

__attribute__((destructor)) static void h_servers_cleanup(void) {
    if (!h_in_main_process())
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

/* ---- spawning ---------------------------------------------------------- */

static char *find_in_path(const char *prog) {
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

static unsigned next_random(void) {
    static unsigned long long x;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    unsigned r;
    pthread_mutex_lock(&mu);
    if (x == 0)
        x = (unsigned long long)h_now_us() ^ ((unsigned long long)getpid() << 32) ^
            0x9e3779b97f4a7c15ULL;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r = (unsigned)(x >> 16);
    pthread_mutex_unlock(&mu);
    return r;
}

static const char *debug_option_exe;
static int debug_option_taken = 1;

static void ask_debug_option(void) {
    char cmd[PATH_MAX + 32], line[256] = "";
    snprintf(cmd, sizeof cmd, "'%s' --version 2>/dev/null", debug_option_exe);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return;
    if (fgets(line, sizeof line, p) == NULL)
        line[0] = '\0';
    pclose(p);
    const char *v = strstr(line, " v=");
    debug_option_taken = v == NULL || atoi(v + 3) >= 7;
}

/*
 * Whether exe takes --enable-debug-command (Redis >= 7.0, Valkey; 6.2 has no
 * such option and lets every connection run DEBUG): asked once, of the first
 * server started ("Redis server v=6.2.14 ...").
 */
static int takes_debug_option(const char *exe) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    if (debug_option_exe == NULL)
        debug_option_exe = strdup(exe);
    pthread_mutex_unlock(&mu);
    pthread_once(&once, ask_debug_option);
    return debug_option_taken;
}

/* The redis-server command line of s (argv has room for 32). */
static void server_argv(const h_server *s, char *exe, char *port, char *logfile, char **argv) {
    int i = 0;
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
    if (takes_debug_option(exe)) {
        argv[i++] = (char *)"--enable-debug-command";
        argv[i++] = (char *)"local";
    }
    argv[i++] = (char *)"--daemonize";
    argv[i++] = (char *)"no";
    argv[i++] = (char *)"--protected-mode";
    argv[i++] = (char *)"yes";
    for (int j = 0; s->extra[j] != NULL; j++)
        argv[i++] = s->extra[j];
    argv[i] = NULL;
}

/* redis-sentinel's command line: its config file (written by h_sentinel_start) and port. */
static void sentinel_argv(char *exe, char *port, char *conf, char **argv) {
    argv[0] = exe;
    argv[1] = conf;
    argv[2] = (char *)"--port";
    argv[3] = port;
    argv[4] = NULL;
}

/* In the forked child: async-signal-safe calls only until execv. */
H_NORETURN static void exec_server(char **argv, pid_t parent) {
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

/* Forks and execs redis-server on s->port. Returns the child's pid. */
static pid_t spawn_server(const h_server *s) {
    char port[16], logfile[300];
    const char *prog = s->sentinel ? "redis-sentinel" : "redis-server";
    char *exe = find_in_path(prog);
    pid_t parent = getpid(), pid;
    char *argv[32 + H_EXTRA_ARGS];

    if (!exe)
        H_FAIL("%s not found in PATH", prog);
    snprintf(port, sizeof port, "%d", s->port);
    if (s->sentinel) {
        snprintf(logfile, sizeof logfile, "%s/sentinel.conf", s->dir);
        sentinel_argv(exe, port, logfile, argv);
    } else {
        snprintf(logfile, sizeof logfile, "%s/redis.log", s->dir);
        server_argv(s, exe, port, logfile, argv);
    }
    pid = fork();
    if (pid < 0)
        H_FAIL("fork: %s", strerror(errno));
    if (pid == 0)
        exec_server(argv, parent);
    free(exe);
    return pid;
}

/* Whether c, a connection to s->port, is the server with pid: 1 yes, 0 it
 * is someone else's, -1 it does not answer PING yet. */
static int answers_as(redisContext *c, pid_t pid, const char *password) {
    char want[64];
    redisReply *r = password[0] ? redisCommand(c, "AUTH %s", password) : NULL;
    if (r)
        freeReplyObject(r);
    r = redisCommand(c, "PING");
    int ours;
    if (!r || r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0) {
        if (r)
            freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    snprintf(want, sizeof want, "process_id:%d\r", (int)pid);
    r = redisCommand(c, "INFO server");
    ours = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
    if (r)
        freeReplyObject(r);
    return ours;
}

/* Waits for the server at s->port with pid to answer PING. 1 if it does, 0
 * if the process exited (e.g. the port was taken). Fails on timeout. */
static int wait_ready(h_server *s, pid_t pid) {
    long long deadline = h_now_ms() + h_scaled(10000);
    int status;
    for (;;) {
        struct timeval tv = {0, 200000};
        redisContext *c;
        int ours = -1;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return 0;
        c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
        if (c && !c->err) {
            redisSetTimeout(c, tv);
            ours = answers_as(c, pid, s->password);
        }
        if (c)
            redisFree(c);
        if (ours == 1)
            return 1;
        if (ours == 0 || h_now_ms() >= deadline) {
            /* Someone else's server on this port, or ours never answered. */
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            if (ours == 0)
                return 0;
            H_FAIL("redis-server on port %d did not answer PING", s->port);
        }
        h_sleep_ms(10);
    }
}

/* ---- the server's life ------------------------------------------------- */

/* A server object with its own temporary directory (not started). */
static h_server *server_new(const char *const *args) {
    h_server *s = calloc(1, sizeof *s);
    const char *tmp = getenv("TMPDIR");
    int n = 0;
    if (!s)
        abort();
    for (; args != NULL && args[n] != NULL; n++) {
        if (n == H_EXTRA_ARGS || !(s->extra[n] = strdup(args[n])))
            abort();
    }
    snprintf(s->dir, sizeof s->dir, "%s/rlock-hsrv.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir)) {
        free(s);
        H_FAIL("mkdtemp: %s", strerror(errno));
    }
    return s;
}

static void server_free(h_server *s) {
    for (int i = 0; s->extra[i] != NULL; i++)
        free(s->extra[i]);
    free(s);
}

/* Starts s on a free random port, or on fixed_port (> 0); NULL if fixed_port was taken. */
static h_server *server_try_launch(h_server *s, int fixed_port) {
    int attempt;
    for (attempt = 0; attempt < (fixed_port > 0 ? 1 : 30); attempt++) {
        pid_t pid;
        s->port = fixed_port > 0 ? fixed_port : 20000 + (int)(next_random() % 40001);
        pid = spawn_server(s);
        if (wait_ready(s, pid)) {
            s->pid = pid;
            if (s->password[0])
                snprintf(s->url, sizeof s->url, "redis://:%s@127.0.0.1:%d", s->password, s->port);
            else
                snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
            server_track(s, 1);
            return s;
        }
    }
    remove_dir(s->dir);
    server_free(s);
    if (fixed_port > 0)
        return NULL;
    H_FAIL("could not start a redis-server on a free port");
}

static h_server *server_launch(h_server *s, int fixed_port) {
    h_server *started = server_try_launch(s, fixed_port);
    if (started == NULL)
        H_FAIL("could not start a server on port %d", fixed_port);
    return started;
}

h_server *h_server_start(void) {
    return server_launch(server_new(NULL), 0);
}

h_server *h_server_start_args(const char *const *args) {
    return server_launch(server_new(args), 0);
}

h_server *h_server_start_port(int port, const char *const *args) {
    return server_try_launch(server_new(args), port);
}

int h_free_port(void) {
    for (int tries = 0; tries < 1000; tries++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                .sin_port = htons((uint16_t)(21000 + next_random() % 11000))};
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return ntohs(a.sin_port);
    }
    H_FAIL("h_free_port: no free port");
}

h_server *h_sentinel_start(int port, const char *conf, const char *password) {
    h_server *s = server_new(NULL);
    char path[300];
    FILE *f;
    s->sentinel = 1;
    snprintf(s->password, sizeof s->password, "%s", password != NULL ? password : "");
    snprintf(path, sizeof path, "%s/sentinel.conf", s->dir);
    f = fopen(path, "w");
    if (!f)
        H_FAIL("%s: %s", path, strerror(errno));
    fprintf(f, "bind 127.0.0.1\ndir %s\nlogfile %s/sentinel.log\n%s", s->dir, s->dir, conf);
    fclose(f);
    return server_try_launch(s, port);
}

const char *h_server_url(const h_server *s) {
    return s->url;
}

int h_server_port(const h_server *s) {
    return s->port;
}

pid_t h_server_pid(const h_server *s) {
    return s->pid;
}

redisContext *h_server_redis(const h_server *s) {
    return h_redis_url(s->url);
}

void h_server_pause(h_server *s) {
    if (!s->pid)
        H_FAIL("h_server_pause: server not running");
    if (kill(s->pid, SIGSTOP) != 0)
        H_FAIL("kill(SIGSTOP): %s", strerror(errno));
    H_WAIT_FOR(h_proc_stopped(s->pid), 2000);
}

void h_server_resume(h_server *s) {
    if (!s->pid)
        H_FAIL("h_server_resume: server not running");
    if (kill(s->pid, SIGCONT) != 0)
        H_FAIL("kill(SIGCONT): %s", strerror(errno));
    H_WAIT_FOR(!h_proc_stopped(s->pid), 2000);
}

int h_server_stopped(const h_server *s) {
    return h_proc_stopped(s->pid);
}

/*
 * Whether /proc/PID/cmdline still shows a redis process on s's port (argv
 * "... --port PORT ..." before redis sets its title, "redis-server
 * 127.0.0.1:PORT [cluster]" after). A zombie shows an empty cmdline: still
 * ours to reap. Belt and braces: an unreaped child's pid cannot be reused.
 */
static int pid_is_ours(const h_server *s) {
    char path[64], buf[4096], want[2][24];
    size_t n;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)s->pid);
    if ((f = fopen(path, "r")) == NULL)
        return 1; /* gone: kill() fails harmlessly, waitpid() reaps */
    n = fread(buf, 1, sizeof buf - 2, f);
    fclose(f);
    if (n == 0)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = ' ';
    buf[n + 1] = '\0';
    snprintf(want[0], sizeof want[0], ":%d ", s->port);
    snprintf(want[1], sizeof want[1], " %d ", s->port);
    return strstr(buf, "redis") != NULL &&
           (strstr(buf, want[0]) != NULL || strstr(buf, want[1]) != NULL);
}

void h_server_kill(h_server *s) {
    int status;
    if (!s->pid)
        return;
    if (!pid_is_ours(s)) {
        fprintf(stderr, "h_server_kill: pid %d is not the redis on port %d any more; not killed\n",
                (int)s->pid, s->port);
        s->pid = 0;
        return;
    }
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
        ;
    s->pid = 0;
}

void h_server_restart(h_server *s) {
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

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            char p[600];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

void h_server_stop(h_server *s) {
    if (!s)
        return;
    server_track(s, 0);
    h_server_kill(s);
    remove_dir(s->dir);
    if (h_srv == s)
        h_srv = NULL;
    server_free(s);
}

/* ---- cmocka fixtures --------------------------------------------------- */

void h_servers_start(int n, h_server **out) {
    for (int i = 0; i < n; i++)
        out[i] = h_server_start();
}

void h_servers_stop(int n, h_server **s) {
    for (int i = 0; i < n; i++)
        h_server_stop(s[i]);
}

int h_server_fixture_start(void **state) {
    h_srv = h_server_start();
    *state = h_srv;
    return 0;
}

int h_server_fixture_stop(void **state) {
    h_server_stop(*state);
    *state = NULL;
    return 0;
}
