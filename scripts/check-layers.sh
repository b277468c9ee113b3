#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-layers.sh [OBJ_DIR] - the library's layers call in one direction only:
#   api -> group -> kind -> engine -> net -> core
#
# Checked where it matters, at link level: for every object OBJ_DIR/<layer>/*.o
# (default build/obj, as `make` leaves it), each symbol it leaves undefined
# (nm -u) must not be defined by an object of a layer above its own. Calls
# down, to any lower layer, and within a layer are fine; so are symbols of
# the C library and hiredis (defined by no object here). A lower layer that
# must reach an upper one does it through a pointer it was given (the thread
# exit hook, the watchdog's renewer, the waiters' send_ahead), which no
# symbol table shows.
#
# EXCEPTIONS lists the symbols allowed to go up anyway, each with its reason;
# it is empty today and should stay short.
#
# check-layers.sh --self-test builds a scratch copy of the objects with one
# deliberate upward call (a core object calling an api function) and fails
# unless the check catches it.
#
# Prints each offending reference and exits non-zero if there is one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

order=(core net engine kind group api)

# symbol   reason it may be called from a lower layer
EXCEPTIONS=(
)

declare -A rank_of=()
for i in "${!order[@]}"; do rank_of[${order[$i]}]=$i; done
rank() { echo "${rank_of[$1]:--1}"; }

excepted() {
    local i
    for ((i = 0; i < ${#EXCEPTIONS[@]}; i += 2)); do
        [ "${EXCEPTIONS[$i]}" = "$1" ] && return 0
    done
    return 1
}

check() {
    local objs=$1 bad=0 obj layer sym
    declare -A defined_in=()
    for obj in "$objs"/*/*.o; do
        layer=$(basename "$(dirname "$obj")")
        if [ "$(rank "$layer")" -lt 0 ]; then
            echo "check-layers: $obj: folder '$layer' is not a layer (${order[*]})"
            return 1
        fi
        while read -r sym; do
            defined_in[$sym]=$layer
        done < <(nm --defined-only --extern-only "$obj" | awk 'NF == 3 { print $3 }')
    done
    [ "${#defined_in[@]}" -gt 0 ] || { echo "check-layers: no objects under $objs (run make first)"; return 1; }
    for obj in "$objs"/*/*.o; do
        layer=$(basename "$(dirname "$obj")")
        local mine=${rank_of[$layer]}
        while read -r sym; do
            local owner=${defined_in[$sym]:-}
            [ -n "$owner" ] || continue
            if [ "${rank_of[$owner]}" -gt "$mine" ] && ! excepted "$sym"; then
                echo "check-layers: ${obj#"$objs"/} calls $sym, defined in $owner/ (a layer above $layer/)"
                bad=1
            fi
        done < <(nm --undefined-only "$obj" | awk '{ print $NF }')
    done
    [ "$bad" -eq 0 ] && echo "check-layers: ${order[*]}: no object calls a layer above its own"
    return "$bad"
}

self_test() {
    local objs=$1 scratch status
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/rlock-layers.XXXXXX")
    trap 'rm -rf "$scratch"' RETURN
    cp -r "$objs"/. "$scratch"/
    # rlock_strerror is defined in core (status.c); an api function is needed:
    # the first function the api objects define.
    local target
    target=$(nm --defined-only --extern-only "$objs"/api/*.o | awk '$2 == "T" { print $3; exit }')
    [ -n "$target" ] || { echo "check-layers --self-test: no api function found"; return 1; }
    printf 'void %s(void);\nvoid rlock__layers_probe(void) { %s(); }\n' "$target" "$target" \
        >"$scratch/probe.c"
    cc -c "$scratch/probe.c" -o "$scratch/core/zz_upward_probe.o"
    rm -f "$scratch/probe.c"
    set +e
    check "$scratch" >"$scratch/out.txt"
    status=$?
    set -e
    if [ "$status" -ne 0 ] && grep -q "zz_upward_probe.o calls $target" "$scratch/out.txt"; then
        echo "check-layers --self-test: a core object calling $target (api) is caught: OK"
        return 0
    fi
    echo "check-layers --self-test: the deliberate upward call to $target was not caught:"
    cat "$scratch/out.txt"
    return 1
}

if [ "${1:-}" = "--self-test" ]; then
    self_test "${2:-$here/../build/obj}"
else
    check "${1:-$here/../build/obj}"
fi
