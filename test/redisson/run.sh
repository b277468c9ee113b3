#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh ACTOR [TURNS] - run the Redisson interop suite (Maven + JUnit, this
# directory) against the redis-server at $RLOCK_TEST_URL (make test-redisson
# starts one with scripts/with-redis.sh), once per Redisson version in
# $REDISSON_VERSIONS; then, given TURNS (build/examples/turns), the example of
# docs/redisson.md once, with the first of those versions: examples/java/
# (Main.java) and TURNS taking turns on one plain and one fair lock.
#
# Maven works offline once ~/.m2 holds the artifacts (release versions are
# never re-checked); MVN_OFFLINE=1 adds -o. If an artifact is missing and
# Maven Central cannot be reached, it says so instead of a resolver trace.
set -uo pipefail

if [ "$#" -lt 1 ] || [ "$#" -gt 2 ] || [ -z "${RLOCK_TEST_URL:-}" ]; then
    echo "usage: RLOCK_TEST_URL=redis://host:port $0 ACTOR [TURNS] (see make test-redisson)" >&2
    exit 2
fi
RLOCK_ACTOR=$(realpath "$1") || exit 2
export RLOCK_ACTOR
turns=
if [ "$#" -eq 2 ]; then
    turns=$(realpath "$2") || exit 2
fi
cd "$(dirname "$0")" || exit 2

# The newest 3.x and 4.x that Maven Central served when the suite was written.
versions=${REDISSON_VERSIONS:-"3.52.0 4.7.0"}
offline=()
[ "${MVN_OFFLINE:-0}" = 1 ] && offline=(-o)

log=$(mktemp "${TMPDIR:-/tmp}/rlock-redisson.XXXXXX") || exit 1
cpid=
# The example's C half, if Maven gave up under it, stops here rather than after
# its own 30 s wait for a Java half.
trap 'rm -f "$log"; [ -n "$cpid" ] && kill "$cpid" 2>/dev/null' EXIT

# mvn ARGS...: Maven, quiet, its colour resets removed (Debian's Maven 3.8 prints
# them even with -B into a pipe), its output also in $log. Exits 1 with one line
# if Maven could not download what it needs.
mvn_logged() {
    mvn -B -q ${offline[@]+"${offline[@]}"} "$@" 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' | tee "$log"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ] && grep -qE 'Could not (resolve|transfer)|[Nn]on-resolvable|could not be resolved' "$log"; then
        echo "run.sh: Maven could not download Redisson or a plugin: Maven Central" \
             "(https://repo.maven.apache.org) is not reachable and ~/.m2 lacks the artifacts." \
             "Run once with network access (or set up a mirror in ~/.m2/settings.xml)." >&2
        exit 1
    fi
    return "$rc"
}

status=0
for v in $versions; do
    echo "=== Redisson $v"
    start=$(date +%s)
    mvn_logged -Dredisson.version="$v" test
    rc=$?
    echo "=== Redisson $v: $([ "$rc" -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
    [ "$rc" -ne 0 ] && status=1
done

# The example: both halves at once, each exits 0 only if it held each lock 3
# times and saw the other take the lock after each of its unlocks but the last.
if [ -n "$turns" ]; then
    v=${versions%% *}
    echo "=== example (examples/java, examples/turns.c), Redisson $v"
    start=$(date +%s)
    "$turns" "$RLOCK_TEST_URL" 3 &
    cpid=$!
    mvn_logged -f ../../examples/java/pom.xml -Dredisson.version="$v" compile exec:java \
        -Dexec.args="$RLOCK_TEST_URL 3"
    jrc=$?
    wait "$cpid"
    crc=$?
    cpid=
    rc=$(( jrc != 0 || crc != 0 ))
    echo "=== example: $([ "$rc" -eq 0 ] && echo passed || echo "FAILED (java $jrc, c $crc)") in $(( $(date +%s) - start )) s"
    [ "$rc" -ne 0 ] && status=1
fi
exit "$status"
