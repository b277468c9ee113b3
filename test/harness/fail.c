/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fail.c - failure plumbing: h_fail() and what it does where (cmocka's
 * _fail() through a weak reference, exit 99 in a forked child, abort on a
 * helper thread or without cmocka), and the process identity it relies on,
 * recorded before main().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "fail.h"
#include "priv.h"

/* cmocka's failure entry point; NULL when the program is not linked with
 * cmocka (benchmarks, demo). */
extern void _fail(const char *const file, const int line) __attribute__((weak));

static pid_t h_main_pid;
static long long h_stamp;

__attribute__((constructor)) static void h_init(void) {
    struct timespec ts;
    /* Line-buffered even into a pipe (run-tests.sh tees the output): a test
     * that hangs and is killed still shows how far it got. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    h_main_pid = getpid();
    clock_gettime(CLOCK_REALTIME, &ts);
    h_stamp = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int h_in_main_process(void) {
    return getpid() == h_main_pid;
}

int h_on_main_thread(void) {
    return (pid_t)syscall(SYS_gettid) == h_main_pid;
}

long long h_run_stamp(void) {
    return h_stamp;
}

void h_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    char msg[1024];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    fflush(stdout);
    if (!h_in_main_process()) {
        fprintf(stderr, "%s:%d: (child %d) %s\n", file, line, (int)getpid(), msg);
        fflush(stderr);
        h_child_exit(99);
    }
    fprintf(stderr, "%s:%d: %s\n", file, line, msg);
    fflush(stderr);
    if (!h_on_main_thread()) {
        fprintf(stderr, "harness failure on a helper thread: aborting\n");
        abort();
    }
    if (_fail != NULL)
        _fail(file, line);
    abort();
}
