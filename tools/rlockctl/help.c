/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * help.c - rlockctl's manual: `rlockctl --help` (man-style sections) and
 * `rlockctl help COMMAND` / `rlockctl COMMAND --help` (one command's part).
 * The same text is in docs/rlockctl.md; keep them in step.
 *
 * Threads: the main thread. Static text only.
 */
#include <string.h>

#include "rlockctl.h"

typedef struct command_help {
    const char *name;
    const char *synopsis;
    const char *text;
} command_help;

static const command_help command_helps[] = {
    {"list", "rlockctl list [PATTERN] [--json]",
     "    Lists the locks whose names match PATTERN (Redis glob: * ? [abc] \\x;\n"
     "    default *), found with SCAN on every master (never KEYS), sorted by\n"
     "    name: the kind (plain, fair, rw, fenced), the owners with their hold\n"
     "    counts and host:pid (and \"gone?\" or \"stopped?\", as show says), the\n"
     "    TTL, and the waiters. A fair lock that is free but has a queue is listed\n"
     "    too (state \"free\"), with \"queue head stuck\" when its head cannot\n"
     "    move. Exit status 1 if nothing matched.\n"},
    {"show", "rlockctl show NAME [--json]",
     "    Everything about one lock: kind, TTL, each owner and the process it\n"
     "    belongs to (host, pid, program, version, the client's age, from its\n"
     "    registration rlock:client:<uuid>) and its client's connections (CLIENT\n"
     "    LIST names rlock:<host>:<pid>:<id8>: how many, how long idle), which say\n"
     "    whether it is still there: \"no connection: process gone?\",\n"
     "    \"no registration (expired, ...); 2 connections, least idle 41s ...:\n"
     "    process stopped?\"; the channels its waiters sleep on with their subscriber\n"
     "    counts, a fair lock's queue with each waiter's deadline and process (a\n"
     "    head that cannot move is flagged \"stuck\", with the dequeue that\n"
     "    removes it), a fenced lock's last token, and whether renewal is on time,\n"
     "    late (the TTL against the owner's watchdog timeout) or stopped (an\n"
     "    owner's process gone or stopped).\n"
     "    Exit status 1 if NAME is not locked (and no queue), 5 if it is not a lock.\n"},
    {"watch", "rlockctl watch NAME|PATTERN [--interval MS] [-n COUNT]",
     "    A live view, redrawn every --interval ms (default 1000), like top:\n"
     "    holders (host:pid, gone? or stopped?), TTLs, waiters, renewal (on time,\n"
     "    late), a stuck queue head, and hand-offs per second of the matching locks.\n"
     "    Hand-offs are the unlock messages heard on the locks' channels (it\n"
     "    subscribes to them) plus, for a lock whose holder changed between two\n"
     "    screens with no message heard, one (an in-process hand-off publishes\n"
     "    nothing; several between two screens count as one). -n COUNT stops\n"
     "    after COUNT screens; otherwise it runs until interrupted (Ctrl-C).\n"
     "    On a terminal each screen replaces the last; piped, screens follow\n"
     "    each other, each starting with a line \"-- rlockctl watch ...\".\n"},
    {"unlock", "rlockctl unlock NAME [--yes]",
     "    Force-unlocks NAME whoever holds it (rlock_force_unlock on a handle of\n"
     "    the lock's kind: a read-write lock with the handle of its mode) and\n"
     "    wakes its waiters. Shows the holders and asks\n"
     "    \"force-unlock NAME held by ...? [y/N]\" on the terminal; --yes skips\n"
     "    the question. Without a terminal on stdin it refuses unless --yes is\n"
     "    given (exit status 4). If the holders changed while you answered, it\n"
     "    refuses too (4): the yes was to the holders shown. Exit status 1 if\n"
     "    NAME was not locked, 5 if it is not a lock (left untouched).\n"
     "    The previous holder learns of the loss at its next renewal or call.\n"},
    {"dequeue", "rlockctl dequeue NAME ENTRY [--yes]",
     "    Removes ENTRY (an owner field <uuid>:<thread>, as show lists it) from\n"
     "    the fair lock NAME's queue: the remedy for a queue stuck behind a head\n"
     "    that does not take the lock (show and watch flag it: \"stuck\"), which\n"
     "    unlock cannot help (the lock is free) and killing the head does not\n"
     "    either (its entry stays until its deadline). The waiters behind it\n"
     "    move up, its share of their deadlines is given back, and if it was the\n"
     "    head of a free lock the next waiter is woken. Shows the entry and its\n"
     "    process and asks \"remove ENTRY (...)? [y/N]\"; --yes skips the\n"
     "    question, without a terminal it refuses unless --yes (4). Exit status\n"
     "    1 if ENTRY is not queued. A live waiter removed queues again.\n"},
    {"clients", "rlockctl clients [--json]",
     "    The rlock clients registered on the masters (SCAN rlock:client:*):\n"
     "    id, host, pid, program, rlock version, age, connections and how long\n"
     "    the least idle one has been idle, watchdog timeout, url\n"
     "    (without credentials), and the connections each has open per master\n"
     "    (CLIENT LIST entries named rlock:<host>:<pid>:<id8>). Connections named\n"
     "    for a client that has no registration are listed apart, and so are\n"
     "    connections with other names (a Java Redisson client's clientName).\n"
     "    Exit status 1 if there is no rlock client, registered or connected.\n"},
};

static const char *const manual =
    "NAME\n"
    "    rlockctl - inspect and manage rlock / Redisson locks in Redis\n"
    "\n"
    "SYNOPSIS\n"
    "    rlockctl [--url URL] [--timeout MS] COMMAND [ARGS] [OPTIONS]\n"
    "    rlockctl help [COMMAND]\n"
    "\n"
    "DESCRIPTION\n"
    "    Answers the operator's questions about the locks in a Redis deployment:\n"
    "    who holds a lock, since when and for how much longer, which process\n"
    "    that is, who waits, and whether renewal is healthy. It reads\n"
    "    Redisson's data layout, so it sees the locks of rlock and of Java\n"
    "    Redisson alike, of every kind: plain (getLock), fair (getFairLock),\n"
    "    read-write (getReadWriteLock) and fenced (getFencedLock).\n"
    "\n"
    "    Reading is read-only (SCAN, TYPE, HGETALL, PTTL, LRANGE, ZRANGE, GET,\n"
    "    PUBSUB NUMSUB/SHARDNUMSUB, CLIENT LIST), sent through librlock's own\n"
    "    connections, so every url rlock accepts works: one server, Sentinel\n"
    "    (the current master), Cluster (SCAN on every master, each key at its\n"
    "    slot's master). The only writes are `unlock`, through the public\n"
    "    rlock_force_unlock(), and `dequeue`, through the fair lock's own\n"
    "    script for a waiter that gives up.\n"
    "\n"
    "    Waiters are counted as PUBSUB NUMSUB (and SHARDNUMSUB) of the lock's\n"
    "    channel at the node where rlock and Redisson subscribe: one\n"
    "    subscribed connection per waiting process, however many of its\n"
    "    threads wait. A fair lock's waiters are its queue's entries.\n"
    "\n"
    "COMMANDS\n";

static const char *const options_etc =
    "OPTIONS\n"
    "    --url URL        the Redis deployment, in any form rlock accepts:\n"
    "                     redis://[[user]:password@]host[:port][/db]\n"
    "                     unix:///path/to/socket[?db=N]\n"
    "                     redis-sentinel://host[:port][,host[:port]...]/master\n"
    "                     redis-cluster://host[:port][,host[:port]...]\n"
    "                     rediss://, rediss-sentinel://, rediss-cluster:// over TLS,\n"
    "                     with ?tls_ca=FILE&tls_cert=FILE&tls_key=FILE\n"
    "                     &tls_verify=full|ca|none&tls_server_name=NAME\n"
    "                     Default: $RLOCK_URL, else redis://127.0.0.1:6379.\n"
    "    --timeout MS     bound of connecting and of each command (default 3000)\n"
    "    --json           list, show, clients: one JSON document on stdout\n"
    "    --yes, -y        unlock, dequeue: do not ask\n"
    "    --interval MS    watch: time between screens (default 1000)\n"
    "    -n, --count N    watch: stop after N screens\n"
    "    --help, -h       this text (with a command: that command's)\n"
    "    --version, -V    rlockctl's and librlock's versions\n"
    "\n"
    "EXIT STATUS\n"
    "    0  done\n"
    "    1  nothing to show: no such lock, not locked, nothing matched, no client\n"
    "    2  usage error (bad command line, malformed url)\n"
    "    3  cannot connect, Redis answered an error (message on stderr), or the\n"
    "       output could not be written\n"
    "    4  unlock or dequeue refused: not confirmed, or no terminal and no --yes\n"
    "    5  the name holds something that is not a lock\n"
    "\n"
    "EXAMPLES\n"
    "    rlockctl list 'orders:*'\n"
    "    rlockctl --url redis-cluster://10.0.0.5:7000 show orders:42\n"
    "    rlockctl show orders:42 --json | jq '.owners[0].process.host'\n"
    "    rlockctl watch 'orders:*' --interval 500\n"
    "    rlockctl unlock orders:42 --yes\n"
    "    RLOCK_URL=redis-sentinel://s1,s2,s3/mymaster rlockctl clients\n"
    "\n"
    "SEE ALSO\n"
    "    docs/rlockctl.md, docs/design.md (data layout), redis-cli(1)\n";

void ctl_help(FILE *f) {
    fputs(manual, f);
    for (size_t i = 0; i < sizeof(command_helps) / sizeof(command_helps[0]); i++)
        fprintf(f, "  %s\n%s\n", command_helps[i].synopsis, command_helps[i].text);
    fputs(options_etc, f);
}

static const command_help *find_help(const char *command) {
    for (size_t i = 0; command != NULL && i < sizeof(command_helps) / sizeof(command_helps[0]); i++)
        if (strcmp(command_helps[i].name, command) == 0)
            return &command_helps[i];
    return NULL;
}

int ctl_help_command(FILE *f, const char *command) {
    const command_help *h = find_help(command);
    if (h == NULL)
        return -1;
    fprintf(f, "SYNOPSIS\n    %s\n\nDESCRIPTION\n%s\nSee `rlockctl --help` for the common "
               "options and the exit statuses.\n",
            h->synopsis, h->text);
    return 0;
}

int ctl_usage(const char *command, const char *problem) {
    const command_help *h = find_help(command);
    fprintf(stderr, "rlockctl: %s\n", problem);
    if (h != NULL)
        fprintf(stderr, "usage: %s\n", h->synopsis);
    else
        fprintf(stderr, "usage: rlockctl [--url URL] [--timeout MS] "
                        "list|show|watch|unlock|dequeue|clients|help [ARGS]\n"
                        "       rlockctl --help\n");
    return CTL_USAGE;
}
