/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * child.h - forked processes: waiting for and ending children, their exit
 * codes, /proc states, and h_child, a helper process that talks to the test
 * over two pipes, one text line per message.
 */
#ifndef RLOCK_TEST_HARNESS_CHILD_H
#define RLOCK_TEST_HARNESS_CHILD_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "fail.h"

/*
 * Waits up to timeout_ms (scaled) for child pid. Returns its wait status, or
 * -1 if it did not exit in time (it is then SIGKILLed and reaped).
 */
int h_wait_child(pid_t pid, long long timeout_ms);
/*
 * Ends a forked child with exit status code. Under valgrind it execs
 * "/bin/sh -c 'exit CODE'" instead of _exit(): a child of a multi-threaded
 * parent inherits memory that only the parent's threads referenced (threads
 * a child does not have), and valgrind's exit-time leak check would report
 * it as the child's leak. Memory errors in the child are still printed.
 */
H_NORETURN void h_child_exit(int code);
/* Exit code of a child that exited normally, else 1000 + signal number (or
 * 2000 for a timeout, i.e. status -1). */
int h_child_code(int status);

/* In a forked child: unless cond holds, says which check failed on stderr
 * and ends the child with exit status code (h_child_exit). */
#define H_CHILD_CHECK(cond, code)                                                                  \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child %d: check failed: %s\n", (int)getpid(), #cond);                 \
            h_child_exit(code);                                                                    \
        }                                                                                          \
    } while (0)

/* The state letter of /proc/PID/stat ('T' or 't' when stopped), or 0. */
char h_proc_state(pid_t pid);
/* 1 if pid is stopped (state 'T' or 't'). */
int h_proc_stopped(pid_t pid);

/*
 * A forked helper process (another "process" holding or waiting for locks)
 * that talks to the test over two pipes, one text line per message. The child
 * inherits nothing usable from rlock (an inherited client returns
 * RLOCK_ECLOSED by contract): it opens its own client. It gets SIGKILL if the
 * thread that started it dies (start it from the test's main thread).
 */
typedef struct h_child {
    pid_t pid;
    int to;   /* test -> child */
    int from; /* child -> test */
} h_child;
typedef int (*h_child_fn)(void *arg, int in_fd, int out_fd);

/* Forks; the child runs fn(arg, in_fd, out_fd) and _exit()s with its result. */
void h_child_start(h_child *c, h_child_fn fn, void *arg);
/* Writes one line ("\n" appended). 0, or -1 if the reader is gone. Safe in children. */
int h_line_send(int fd, const char *fmt, ...) H_PRINTF(2, 3);
/* Reads one line (the "\n" removed) within timeout_ms (scaled); its length,
 * or -1 on EOF or timeout. Safe in children. */
int h_line_recv(int fd, char *buf, size_t size, long long timeout_ms);
/* In the test: send a line to the child; read one, failing the test on EOF
 * or timeout. */
void h_child_send(h_child *c, const char *fmt, ...) H_PRINTF(2, 3);
void h_child_recv(h_child *c, char *buf, size_t size, long long timeout_ms);
/* Closes the pipes, waits up to timeout_ms (scaled) for the child (SIGKILL
 * after that) and returns h_child_code() of its status. */
int h_child_finish(h_child *c, long long timeout_ms);
/* SIGKILL and reap (kill -9). Returns h_child_code() (1009). */
int h_child_kill(h_child *c);

#endif /* RLOCK_TEST_HARNESS_CHILD_H */
