/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * child.c - forked processes: waiting, exit codes, h_child_exit (valgrind
 * friendly), /proc states, and h_child helpers with their line protocol.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"

/* ---- processes --------------------------------------------------------- */

int h_wait_child(pid_t pid, long long timeout_ms) {
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

void h_child_exit(int code) {
    const char *pre = getenv("LD_PRELOAD");
    fflush(NULL);
    if (pre && strstr(pre, "vgpreload")) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "exit %d", code & 255);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    }
    _exit(code);
}

int h_child_code(int status) {
    if (status == -1)
        return 2000;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 1000 + WTERMSIG(status);
    return 3000;
}

char h_proc_state(pid_t pid) {
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

int h_proc_stopped(pid_t pid) {
    char st = h_proc_state(pid);
    return st == 'T' || st == 't';
}

/* ---- helper processes and their line protocol -------------------------- */

void h_child_start(h_child *c, h_child_fn fn, void *arg) {
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
        h_child_exit(rc); /* flushes; under valgrind, no leak check of the parent's memory */
    }
    close(down[0]);
    close(up[1]);
    c->pid = pid;
    c->to = down[1];
    c->from = up[0];
}

static int vline_write(int fd, const char *fmt, va_list ap) {
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

/* vline_write with SIGPIPE blocked: a reader that is gone gives -1 (EPIPE),
 * and does not kill the process. */
static int vline_send(int fd, const char *fmt, va_list ap) {
    int rc;
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    rc = vline_write(fd, fmt, ap);
    if (rc != 0) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero); /* discard a pending SIGPIPE */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int h_line_send(int fd, const char *fmt, ...) {
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = vline_send(fd, fmt, ap);
    va_end(ap);
    return rc;
}

int h_line_recv(int fd, char *buf, size_t size, long long timeout_ms) {
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

void h_child_send(h_child *c, const char *fmt, ...) {
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = vline_send(c->to, fmt, ap);
    va_end(ap);
    if (rc != 0)
        H_FAIL("cannot write to child %d (it exited?)", (int)c->pid);
}

void h_child_recv(h_child *c, char *buf, size_t size, long long timeout_ms) {
    if (h_line_recv(c->from, buf, size, timeout_ms) < 0)
        H_FAIL("no line from child %d within %lld ms (it exited or hangs)", (int)c->pid,
               h_scaled(timeout_ms));
}

static void close_pipes(h_child *c) {
    if (c->to >= 0)
        close(c->to);
    if (c->from >= 0)
        close(c->from);
    c->to = c->from = -1;
}

int h_child_finish(h_child *c, long long timeout_ms) {
    int status;
    close_pipes(c);
    if (c->pid <= 0)
        return 0;
    status = h_wait_child(c->pid, timeout_ms);
    c->pid = 0;
    return h_child_code(status);
}

int h_child_kill(h_child *c) {
    int status = 0;
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
            ;
        c->pid = 0;
    }
    close_pipes(c);
    return h_child_code(status);
}
