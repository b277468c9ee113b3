#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh ACTOR - run the Redisson interop suite (Maven + JUnit, this directory)
# against the redis-server at $RLOCK_TEST_URL (make test-redisson starts one
# with scripts/with-redis.sh), once per Redisson version in $REDISSON_VERSIONS.
#
# Maven works offline once ~/.m2 holds the artifacts (release versions are
# never re-checked); MVN_OFFLINE=1 adds -o. If an artifact is missing and
# Maven Central cannot be reached, it says so instead of a resolver trace.
set -uo pipefail

if [ "$#" -ne 1 ] || [ -z "${RLOCK_TEST_URL:-}" ]; then
    echo "usage: RLOCK_TEST_URL=redis://host:port $0 ACTOR (see make test-redisson)" >&2
    exit 2
fi
RLOCK_ACTOR=$(realpath "$1") || exit 2
export RLOCK_ACTOR
cd "$(dirname "$0")" || exit 2

# The newest 3.x and 4.x that Maven Central served when the suite was written.
versions=${REDISSON_VERSIONS:-"3.52.0 4.7.0"}
offline=()
[ "${MVN_OFFLINE:-0}" = 1 ] && offline=(-o)

log=$(mktemp "${TMPDIR:-/tmp}/rlock-redisson.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT

status=0
for v in $versions; do
    echo "=== Redisson $v"
    start=$(date +%s)
    # sed: Debian's Maven 3.8 prints colour resets even with -B into a pipe.
    mvn -B -q ${offline[@]+"${offline[@]}"} -Dredisson.version="$v" test 2>&1 |
        sed -u 's/\x1b\[[0-9;]*m//g' | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ] && grep -qE 'Could not (resolve|transfer)|[Nn]on-resolvable|could not be resolved' "$log"; then
        echo "run.sh: Maven could not download Redisson $v or a plugin: Maven Central" \
             "(https://repo.maven.apache.org) is not reachable and ~/.m2 lacks the artifacts." \
             "Run once with network access (or set up a mirror in ~/.m2/settings.xml)." >&2
        exit 1
    fi
    echo "=== Redisson $v: $([ "$rc" -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
    [ "$rc" -ne 0 ] && status=1
done
exit "$status"
