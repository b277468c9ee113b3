/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tool.h - rlockctl run as a process by its tests: its path (beside the
 * test binaries' build directory), its exit status and what it printed,
 * stdin either /dev/null or a terminal of its own (a pty) on which the test
 * types an answer, and jq to read its --json output.
 */
#ifndef RLOCK_TEST_HARNESS_TOOL_H
#define RLOCK_TEST_HARNESS_TOOL_H

typedef struct h_tool {
    int status;   /* exit status; 1000 + signal if killed, 2000 if it timed out */
    char *out;    /* stdout, NUL-terminated (malloc'd) */
    char *err;    /* stderr, the same */
} h_tool;

/* $RLOCKCTL, else <the test binary's directory>/../rlockctl (build/rlockctl). */
const char *h_tool_path(void);
/*
 * Runs rlockctl with the arguments (a NULL-ended list; url, if not NULL,
 * is passed as --url first), stdin /dev/null; waits up to 60 s (scaled) for
 * it (SIGKILL after that). Prints the command line, status and stderr.
 */
void h_tool_run(h_tool *t, const char *url, ...);
/* The same with stdin a terminal (pty) on which answer (e.g. "y\n") is typed. */
void h_tool_run_tty(h_tool *t, const char *answer, const char *url, ...);
/*
 * h_tool_run_tty, but the answer is typed only once prompt is on stderr, and
 * before_answer(arg) runs first: what changes while the operator reads the question.
 */
void h_tool_run_tty_after(h_tool *t, const char *prompt, void (*before_answer)(void *arg),
                          void *arg, const char *answer, const char *url, ...);
void h_tool_free(h_tool *t);
/* Fails the test unless t exited with status and `needle` is in its stdout (NULL: any). */
void h_tool_expect(const h_tool *t, int status, const char *needle);
/*
 * `jq -r FILTER` on json: its output without the last newline (malloc'd);
 * fails the test if jq fails (json not valid, filter error).
 */
char *h_jq(const char *json, const char *filter);
/* Fails the test unless `jq -r FILTER` on json prints want. */
void h_jq_expect(const char *json, const char *filter, const char *want);

/*
 * Runs `rlockctl --url url watch target --interval 500 -n 3` while two
 * threads hand the lock name back and forth through handles a and b (of two
 * clients: every unlock publishes), and checks its output: three screens,
 * header containing `expect`, and on the last one name's row a rate > 0 and
 * a TOTAL of at least 3 -- more than holder changes alone can give in two
 * intervals (one each), so unlock messages were heard. Fails the test
 * otherwise.
 */
void h_watch_expect_heard(const char *url, const char *target, const char *name, struct rlock *a,
                          struct rlock *b, const char *expect);

/*
 * A client registration as rlock >= 0.5 writes it (the hash
 * rlock:client:<id>, fields id host pid program version started_ms url
 * watchdog_timeout_ms, PEXPIRE 60 s), made by hand on connection r.
 */
struct redisContext;
void h_register_client(struct redisContext *r, const char *id, const char *host, long pid,
                       const char *program);

#endif /* RLOCK_TEST_HARNESS_TOOL_H */
