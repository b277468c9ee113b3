/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scripts.c - the script set every client loads (rlock__scripts, indexed by
 * RLOCK__SCRIPT_*): each script's name and its Lua text. net/script.c sends
 * them (SCRIPT LOAD at open, EVALSHA, EVAL on NOSCRIPT).
 *
 * The Lua is in src/kind/lua/, one file per script, with the Lua several
 * scripts share in src/kind/lua/prelude/ (src/kind/lua/README.md).
 * scripts/lua-gen.sh, run by the Makefile, writes each script's text as a C
 * string, rlock__<file>_lua, into the build directory (gen/lua_scripts.c,
 * declared in gen/lua_scripts.h): preludes included, comment lines left out.
 * The texts are the bytes whose SHA1 EVALSHA names them by, the same in every
 * rlock and shared with Java Redisson peers' server caches: test_scripts.c
 * pins them (docs/design.md section 3 says what changes one).
 *
 * Line numbers: Redis reports a script's error at "user_script:N", line N of
 * the text sent, not of the .lua file (its preludes come first, its comment
 * lines are not sent). gen/lua_scripts.h gives each script's map from text
 * lines to file:line; `scripts/lua-gen.sh text src/kind/lua/<file>.lua`
 * prints the text itself (line N is `sed -n Np` of it).
 *
 * Threads: any; constant data.
 */
#include "internal.h"
#include "lua_scripts.h"

_Static_assert(RLOCK__SCRIPT_COUNT <= RLOCK__MAX_SCRIPTS, "the net keeps RLOCK__MAX_SCRIPTS SHA1s");

const rlock__script rlock__scripts[RLOCK__SCRIPT_COUNT] = {
    [RLOCK__SCRIPT_ACQUIRE] = {"ACQUIRE", rlock__acquire_lua},
    [RLOCK__SCRIPT_RELEASE] = {"RELEASE", rlock__release_lua},
    [RLOCK__SCRIPT_TRANSFER] = {"TRANSFER", rlock__transfer_lua},
    [RLOCK__SCRIPT_RENEW] = {"RENEW", rlock__renew_lua},
    [RLOCK__SCRIPT_RENEW_NODE] = {"RENEW_NODE", rlock__renew_node_lua},
    [RLOCK__SCRIPT_FORCE_UNLOCK] = {"FORCE_UNLOCK", rlock__force_unlock_lua},
    [RLOCK__SCRIPT_FAIR_ACQUIRE] = {"FAIR_ACQUIRE", rlock__fair_acquire_lua},
    [RLOCK__SCRIPT_FAIR_RELEASE] = {"FAIR_RELEASE", rlock__fair_release_lua},
    [RLOCK__SCRIPT_FAIR_LEAVE] = {"FAIR_LEAVE", rlock__fair_leave_lua},
    [RLOCK__SCRIPT_FAIR_FORCE_UNLOCK] = {"FAIR_FORCE_UNLOCK", rlock__fair_force_unlock_lua},
    [RLOCK__SCRIPT_FENCED_SET] = {"FENCED_SET", rlock__fenced_set_lua},
    [RLOCK__SCRIPT_RW_READ_ACQUIRE] = {"RW_READ_ACQUIRE", rlock__rw_read_acquire_lua},
    [RLOCK__SCRIPT_RW_WRITE_ACQUIRE] = {"RW_WRITE_ACQUIRE", rlock__rw_write_acquire_lua},
    [RLOCK__SCRIPT_RW_READ_RELEASE] = {"RW_READ_RELEASE", rlock__rw_read_release_lua},
    [RLOCK__SCRIPT_RW_WRITE_RELEASE] = {"RW_WRITE_RELEASE", rlock__rw_write_release_lua},
    [RLOCK__SCRIPT_RW_FORCE_UNLOCK] = {"RW_FORCE_UNLOCK", rlock__rw_force_unlock_lua},
    [RLOCK__SCRIPT_RW_LOCKED] = {"RW_LOCKED", rlock__rw_locked_lua},
    [RLOCK__SCRIPT_RW_RENEW] = {"RW_RENEW", rlock__rw_renew_lua},
    [RLOCK__SCRIPT_RW_RENEW_NODE] = {"RW_RENEW_NODE", rlock__rw_renew_node_lua},
    [RLOCK__SCRIPT_RW_WRITE_LEAVE] = {"RW_WRITE_LEAVE", rlock__rw_write_leave_lua},
    [RLOCK__SCRIPT_RW_READ_HOLDS] = {"RW_READ_HOLDS", rlock__rw_read_holds_lua},
};

const char *rlock__script_body(int script) {
    return script >= 0 && script < RLOCK__SCRIPT_COUNT ? rlock__scripts[script].body : NULL;
}
