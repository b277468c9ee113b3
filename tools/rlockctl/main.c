/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c - rlockctl's entry: the options, the command table, the client the
 * commands share, and the exit statuses (rlockctl.h, CTL_*).
 *
 * Options may come before or after the command (GNU getopt permutes); "--"
 * ends them, for a name that starts with '-'. Each option is accepted only
 * by the commands it means something to: a script that passes --yes to
 * `list` gets a usage error, not a silent no-op.
 *
 * Threads: the main thread only (the client has threads of its own).
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "rlockctl.h"

#define DEFAULT_URL "redis://127.0.0.1:6379"

/* The options a command accepts besides --url and --timeout. */
enum { OPT_JSON = 1, OPT_YES = 2, OPT_WATCH = 4 };

typedef struct command {
    const char *name;
    int min_args, max_args;
    int options;             /* OPT_* */
    int (*run)(ctl *c);
} command;

static const command commands[] = {
    {"list", 0, 1, OPT_JSON, ctl_cmd_list},
    {"show", 1, 1, OPT_JSON, ctl_cmd_show},
    {"watch", 1, 1, OPT_WATCH, ctl_cmd_watch},
    {"unlock", 1, 1, OPT_YES, ctl_cmd_unlock},
    {"dequeue", 2, 2, OPT_YES, ctl_cmd_dequeue},
    {"clients", 0, 0, OPT_JSON, ctl_cmd_clients},
};

static const command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* An allocation's result: exits with a message when memory ran out. */
static void *checked(void *p) {
    if (p == NULL) {
        fprintf(stderr, "rlockctl: out of memory\n");
        exit(CTL_REDIS);
    }
    return p;
}

void *xmalloc(size_t size) {
    return checked(malloc(size > 0 ? size : 1));
}

void *xcalloc(size_t n, size_t size) {
    return checked(calloc(n > 0 ? n : 1, size > 0 ? size : 1));
}

void *xrealloc(void *p, size_t size) {
    return checked(realloc(p, size > 0 ? size : 1));
}

char *xstrndup(const char *s, size_t len) {
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

/* A Redis error the tool found in a reply and said already (ctl_reply_failed). */
static int reply_error_said;

int ctl_reply_failed(const rlock__inspect_cmd *cmd, const redisReply *r) {
    fputs("rlockctl: ", stderr);
    for (int i = 0; i < cmd->argc && i < 3; i++) { /* the verb and the key, or subcommand */
        ctl_put_text(stderr, cmd->argv[i], cmd->argvlen != NULL ? cmd->argvlen[i]
                                                                : strlen(cmd->argv[i]));
        fputs(i + 1 < cmd->argc && i < 2 ? " " : "", stderr);
    }
    if (cmd->node != NULL) {
        char where[300];
        fprintf(stderr, " at %s", rlock__inspect_node_addr(cmd->node, where, sizeof(where)));
    }
    fputs(": ", stderr);
    ctl_put_str(stderr, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    fputc('\n', stderr);
    reply_error_said = 1;
    return RLOCK_EREDIS;
}

int ctl_redis_error(const char *what, int status) {
    if (reply_error_said) { /* rlock_last_error() would be an older, unrelated one */
        reply_error_said = 0;
        return CTL_REDIS;
    }
    fputs("rlockctl: ", stderr); /* what may be a lock name, the error may quote one */
    ctl_put_str(stderr, what);
    fputs(": ", stderr);
    ctl_put_str(stderr, rlock_last_error());
    fprintf(stderr, " (%s)\n", rlock_status_name(status));
    return CTL_REDIS;
}

/* A number option: 1..max, else a usage error. */
static int parse_number(const char *text, long long max, long long *out) {
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < 1 || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Which OPT_* the options given need, to check them against the command. */
typedef struct parsed {
    int used;                /* OPT_* seen */
    int help, version;
} parsed;

static int parse_options(int argc, char **argv, ctl_options *o, parsed *p) {
    static const struct option longs[] = {
        {"url", required_argument, NULL, 'u'},      {"json", no_argument, NULL, 'j'},
        {"yes", no_argument, NULL, 'y'},            {"timeout", required_argument, NULL, 't'},
        {"interval", required_argument, NULL, 'i'}, {"count", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},           {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    long long v;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "u:jyt:i:n:hV", longs, NULL)) != -1) {
        switch (ch) {
        case 'u': o->url = optarg; break;
        case 'j': o->json = 1; p->used |= OPT_JSON; break;
        case 'y': o->yes = 1; p->used |= OPT_YES; break;
        case 't':
            if (parse_number(optarg, 3600000, &v) != 0)
                return ctl_usage(NULL, "--timeout takes milliseconds, 1..3600000");
            o->timeout_ms = (int)v;
            break;
        case 'i':
            if (parse_number(optarg, 3600000, &v) != 0)
                return ctl_usage("watch", "--interval takes milliseconds, 1..3600000");
            o->interval_ms = v;
            p->used |= OPT_WATCH;
            break;
        case 'n':
            if (parse_number(optarg, 1000000000, &v) != 0)
                return ctl_usage("watch", "-n takes a count of screens, 1..1000000000");
            o->count = v;
            p->used |= OPT_WATCH;
            break;
        case 'h': p->help = 1; break;
        case 'V': p->version = 1; break;
        default: {
            char problem[128];
            snprintf(problem, sizeof(problem), "unknown option or missing value: %s",
                     argv[optind - 1]);
            return ctl_usage(NULL, problem);
        }
        }
    }
    o->argc = argc - optind;
    o->argv = argv + optind;
    return CTL_OK;
}

static int check_command(const command *cmd, const ctl_options *o, int used) {
    int args = o->argc - 1;
    if (args < cmd->min_args || args > cmd->max_args)
        return ctl_usage(cmd->name, args < cmd->min_args ? "missing argument"
                                                         : "too many arguments");
    if (used & ~cmd->options)
        return ctl_usage(cmd->name, (used & OPT_JSON)  ? "--json is not an option of this command"
                                    : (used & OPT_YES) ? "--yes is not an option of this command"
                                                       : "--interval and -n are for watch");
    if (cmd->min_args > 0 && o->argv[1][0] == '\0')
        return ctl_usage(cmd->name, "the name is empty");
    return CTL_OK;
}

static int help_command(const ctl_options *o) {
    if (o->argc < 2) {
        ctl_help(stdout);
        return CTL_OK;
    }
    if (o->argc > 2)
        return ctl_usage(NULL, "help takes one command");
    if (ctl_help_command(stdout, o->argv[1]) != 0)
        return ctl_usage(NULL, "help: no such command");
    return CTL_OK;
}

/* Opens the client every command uses: small pool, --timeout for every bound. */
static int open_client(ctl *c) {
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = c->opt.url;
    cfg.pool_size = 2;
    cfg.retry_attempts = 1;
    cfg.register_client = 0; /* an operator's look is no client to list: it writes nothing */
    if (c->opt.timeout_ms > 0) {
        cfg.connect_timeout_ms = c->opt.timeout_ms;
        cfg.command_timeout_ms = c->opt.timeout_ms;
    }
    int status = rlock_client_open(&cfg, &c->client);
    if (status == RLOCK_OK)
        return CTL_OK;
    if (status == RLOCK_EINVAL)
        return ctl_usage(NULL, rlock_last_error());
    return ctl_redis_error("cannot connect", status);
}

/* CTL_OK, or CTL_REDIS after saying so if stdout could not take the output (a full disk). */
static int output_written(void) {
    int failed = fflush(stdout) != 0;
    if (!failed && !ferror(stdout))
        return CTL_OK;
    fprintf(stderr, "rlockctl: cannot write the output: %s\n",
            failed ? strerror(errno) : "write error");
    return CTL_REDIS;
}

/* Runs what the command line asks for; its exit status (without the output check). */
static int run(int argc, char **argv) {
    ctl c = {.out = stdout};
    parsed p = {0};
    c.opt.url = getenv("RLOCK_URL") != NULL && getenv("RLOCK_URL")[0] != '\0' ? getenv("RLOCK_URL")
                                                                              : DEFAULT_URL;
    c.opt.interval_ms = 1000;
    int status = parse_options(argc, argv, &c.opt, &p);
    if (status != CTL_OK)
        return status;
    if (p.version) {
        printf("rlockctl %s (librlock %s)\n", RLOCK_VERSION_STRING, rlock_version());
        return CTL_OK;
    }
    if (p.help && c.opt.argc == 0) {
        ctl_help(stdout);
        return CTL_OK;
    }
    if (c.opt.argc == 0)
        return ctl_usage(NULL, "no command");
    if (strcmp(c.opt.argv[0], "help") == 0)
        return help_command(&c.opt);
    const command *cmd = find_command(c.opt.argv[0]);
    if (cmd == NULL) {
        char problem[100];
        int n = snprintf(problem, sizeof(problem), "unknown command '%.64s'", c.opt.argv[0]);
        for (int i = 0; i < n && i < (int)sizeof(problem) - 1; i++)
            if ((unsigned char)problem[i] < 0x20 || problem[i] == 0x7f)
                problem[i] = '?'; /* what was typed, not what a terminal would do with it */
        return ctl_usage(NULL, problem);
    }
    if (p.help) {
        ctl_help_command(stdout, cmd->name);
        return CTL_OK;
    }
    status = check_command(cmd, &c.opt, p.used);
    if (status == CTL_OK)
        status = open_client(&c);
    if (status != CTL_OK)
        return status;
    status = cmd->run(&c);
    rlock_client_close(c.client);
    return status;
}

int main(int argc, char **argv) {
    int status = run(argc, argv);
    int written = output_written(); /* also for --help: a script may read it */
    return status != CTL_OK ? status : written;
}
