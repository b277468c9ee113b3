/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * migrate.c - a lock of several keys (fair, read-write, fenced) whose slot a
 * Cluster is migrating: its keys may be split between the two nodes, or a
 * script may need a key the exporting node would have to create. rlock__exec
 * (exec.c) asks rlock__split_by_migration of each reply and, when it says
 * so, rlock__gather_family moves the lock's keys left on the source to the
 * importing node (MIGRATE, the keys found by CLUSTER GETKEYSINSLOT) so that
 * the script runs there whole, after ASKING.
 *
 * Threads: application threads and the watchdog thread, inside their
 * rlock__exec call. No state of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/*
 * Whether reply says that cmd's lock has keys on two nodes or would have
 * (its slot migrating): TRYAGAIN (declared keys split, or some missing), ASK
 * (KEYS[1] has left), or a script's "non local key" (a key it touched has
 * left, or is new: a node exporting a slot creates no key). No script of a
 * lock of several keys can then run on one node as it is.
 */
int rlock__split_by_migration(const rlock__cmd *cmd, const redisReply *reply) {
    if (cmd->family == NULL || cmd->script < 0 || reply == NULL ||
        reply->type != REDIS_REPLY_ERROR)
        return 0;
    return rlock__is_tryagain(reply) || strncmp(reply->str, "ASK ", 4) == 0 ||
           strstr(reply->str, "non local key") != NULL;
}

/*
 * The node importing the slot of cmd's key from source: the ASK reply's, or
 * the one source names for a key of the slot that no lock has (EXISTS
 * "rlock_migration_probe:<family>": a missing key of a slot being exported
 * is answered ASK). NULL if the slot is not migrating (any more).
 */
static rlock__node *importing_node(rlock__net *net, const rlock__cmd *cmd, rlock__node *source,
                                   const redisReply *reply, int64_t hard_ms) {
    static const char prefix[] = "rlock_migration_probe:";
    rlock__node *to = NULL;
    redisReply *probe = NULL;
    int asking = 0;
    if (strncmp(reply->str, "ASK ", 4) != 0) {
        char *key = rlock__malloc(sizeof(prefix) + cmd->family_len);
        if (key == NULL)
            return NULL;
        memcpy(key, prefix, sizeof(prefix) - 1);
        memcpy(key + sizeof(prefix) - 1, cmd->family, cmd->family_len);
        const char *argv[] = {"EXISTS", key};
        size_t argvlen[] = {6, sizeof(prefix) - 1 + cmd->family_len};
        int status = rlock__run_on(net, source, 2, argv, argvlen, hard_ms, &probe);
        rlock__free(key);
        if (status != RLOCK_OK)
            return NULL;
        reply = probe;
    }
    if (reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "ASK ", 4) == 0)
        net->route->ops->on_error(net->route, source, reply, &to, &asking);
    rlock__drop_reply(&probe);
    return to;
}

/* Whether key is one of cmd's lock: KEYS[1], or a key naming its family. */
static int of_family(const rlock__cmd *cmd, const redisReply *key) {
    if (key->type != REDIS_REPLY_STRING)
        return 0;
    if (key->len == cmd->argvlen[0] && memcmp(key->str, cmd->argv[0], key->len) == 0)
        return 1;
    return memmem(key->str, key->len, cmd->family, cmd->family_len) != NULL;
}

/* The most keys of a slot looked through for a lock's: a bound on the reply. */
#define GATHER_SLOT_KEYS_MAX 100000

/*
 * The slot's keys on source (CLUSTER COUNTKEYSINSLOT, GETKEYSINSLOT) into
 * *keys, a reply the caller frees. RLOCK_EREDIS for a slot of more than
 * GATHER_SLOT_KEYS_MAX keys there, or a failure (recorded).
 */
static int slot_keys(rlock__net *net, rlock__node *source, int slot, int64_t hard_ms,
                     redisReply **keys) {
    char slot_str[24], count_str[24];
    const char *argv[] = {"CLUSTER", "COUNTKEYSINSLOT", slot_str};
    size_t argvlen[] = {7, 15, rlock__fmt_u64(slot_str, (uint64_t)slot)};
    redisReply *reply = NULL;
    int status = rlock__run_on(net, source, 3, argv, argvlen, hard_ms, &reply);
    if (status == RLOCK_OK && reply->type != REDIS_REPLY_INTEGER)
        status = rlock__fail_reply(reply, "CLUSTER COUNTKEYSINSLOT");
    if (status != RLOCK_OK) {
        rlock__drop_reply(&reply);
        return status;
    }
    long long n = reply->integer;
    rlock__drop_reply(&reply);
    if (n > GATHER_SLOT_KEYS_MAX) /* a lock's keys beyond those read would be taken for gone */
        return rlock__fail(RLOCK_EREDIS, 0, "slot %d has %lld keys on the node exporting it: "
                                            "more than %d to look through for a lock's keys "
                                            "that its migration split",
                           slot, n, GATHER_SLOT_KEYS_MAX);
    const char *get[] = {"CLUSTER", "GETKEYSINSLOT", slot_str, count_str};
    size_t getlen[] = {7, 13, argvlen[2], rlock__fmt_u64(count_str, (uint64_t)(n > 0 ? n : 1))};
    status = rlock__run_on(net, source, 4, get, getlen, hard_ms, keys);
    if (status == RLOCK_OK && (*keys)->type != REDIS_REPLY_ARRAY)
        status = rlock__fail_reply(*keys, "CLUSTER GETKEYSINSLOT");
    if (status != RLOCK_OK)
        rlock__drop_reply(keys);
    return status;
}

/*
 * MIGRATE of the keys of cmd's lock that are still on source to target, in
 * one command: atomic on source, so every script on the lock sees all of
 * them on one node or the other (a key that left meanwhile is skipped).
 */
static int migrate_family(rlock__net *net, const rlock__cmd *cmd, rlock__node *source,
                          rlock__node *target, int64_t hard_ms) {
    const rlock__endpoint *ep = &target->endpoint;
    redisReply *keys = NULL, *reply = NULL;
    int status = slot_keys(net, source, rlock__key_slot(cmd->argv[0], cmd->argvlen[0]),
                           hard_ms, &keys);
    if (status != RLOCK_OK)
        return status;
    const char **argv = rlock__calloc(keys->elements + 12, sizeof(*argv));
    size_t *argvlen = rlock__calloc(keys->elements + 12, sizeof(*argvlen));
    char port[24], timeout[24];
    int argc = 0;
    if (argv == NULL || argvlen == NULL) {
        status = rlock__fail(RLOCK_ENOMEM, 0, "MIGRATE of a lock's keys: out of memory");
        goto done;
    }
    if (ep->host == NULL) { /* a Cluster node is a TCP address: only a bug gets here */
        status = rlock__fail(RLOCK_EREDIS, 0, "MIGRATE of a lock's keys: no TCP address");
        goto done;
    }
#define ARG(s, n) (argv[argc] = (s), argvlen[argc++] = (n))
    ARG("MIGRATE", 7);
    ARG(ep->host, strlen(ep->host));
    ARG(port, rlock__fmt_u64(port, (uint64_t)ep->port));
    ARG("", 0);
    ARG("0", 1);
    ARG(timeout, rlock__fmt_u64(timeout, (uint64_t)net->settings->command_timeout_ms));
    if (ep->password != NULL && ep->user != NULL) {
        ARG("AUTH2", 5);
        ARG(ep->user, strlen(ep->user));
        ARG(ep->password, strlen(ep->password));
    } else if (ep->password != NULL) {
        ARG("AUTH", 4);
        ARG(ep->password, strlen(ep->password));
    }
    ARG("KEYS", 4);
    int head = argc;
    for (size_t i = 0; i < keys->elements; i++)
        if (of_family(cmd, keys->element[i]))
            ARG(keys->element[i]->str, keys->element[i]->len);
#undef ARG
    if (argc == head) /* none left there */
        goto done;
    status = rlock__run_on(net, source, argc, argv, argvlen, hard_ms, &reply);
    if (status == RLOCK_OK && reply->type == REDIS_REPLY_ERROR)
        status = rlock__fail_reply(reply, "MIGRATE (the keys of a lock a slot migration split)");
done:
    rlock__drop_reply(&reply);
    rlock__drop_reply(&keys);
    rlock__free(argv);
    rlock__free(argvlen);
    return status;
}

/*
 * cmd's lock has keys on two nodes, or its script needs a key created on a
 * node exporting the slot (reply says which, rlock__split_by_migration): its keys
 * left on *node go to the importing node, where cmd runs next (ASKING, its
 * keys as arguments): *gathered set, *node the importing node. *gathered stays 0 if the
 * slot is not migrating (reply then stands). RLOCK_OK, or the failure of
 * the commands that move the keys (an ACL without MIGRATE: RLOCK_ENOPERM).
 */
int rlock__gather_family(rlock__net *net, const rlock__cmd *cmd, const redisReply *reply,
                         rlock__node **node, int64_t hard_ms, int *gathered) {
    *gathered = 0;
    rlock__node *target = importing_node(net, cmd, *node, reply, hard_ms);
    if (target == NULL)
        return RLOCK_OK;
    int status = migrate_family(net, cmd, *node, target, hard_ms);
    if (status != RLOCK_OK)
        return status;
    *node = target;
    *gathered = 1;
    return RLOCK_OK;
}
