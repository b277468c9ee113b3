#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run-tests.sh BIN... - run cmocka test binaries.
#
# Each binary runs under `timeout` (300 s x TEST_TIMEOUT_SCALE, default 1),
# prefixed by $TEST_PREFIX when set (e.g. valgrind). The cmocka summary lines
# "[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s)" are added up. A
# binary that crashes, times out or exits non-zero without reporting a
# failure counts as one failed test. The last line printed is always
# "N passed, N failed"; the exit status is non-zero if anything failed.
#
# TEST_JOBS=N (default 1) runs N binaries at a time, each against a
# throwaway redis-server of its own (scripts/with-redis.sh) when the
# binaries were given one through RLOCK_TEST_URL, since tests look at a
# server's global state (commandstats, clients, ACL users). A binary's output
# is then printed whole when it ends. For the slow instrumented runs
# (valgrind, TSan) on a machine with cores to spare; plain runs stay serial.
set -uo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 BIN..." >&2
    exit 2
fi

scale=${TEST_TIMEOUT_SCALE:-1}
case "$scale" in
    ''|*[!0-9.]*) echo "run-tests.sh: bad TEST_TIMEOUT_SCALE '$scale'" >&2; exit 2 ;;
esac
jobs=${TEST_JOBS:-1}
case "$jobs" in
    ''|*[!0-9]*|0) echo "run-tests.sh: bad TEST_JOBS '$jobs'" >&2; exit 2 ;;
esac
limit=$(awk -v s="$scale" 'BEGIN { t = 300 * s; if (t < 1) t = 1; printf "%d", t }')
here=$(cd "$(dirname "$0")" && pwd)

# TEST_PREFIX is split on whitespace on purpose (it holds a command and options).
read -r -a prefix <<<"${TEST_PREFIX:-}"

logs=$(mktemp -d "${TMPDIR:-/tmp}/rlock-tests.XXXXXX") || exit 1
trap 'rm -rf "$logs"' EXIT

total_passed=0
total_failed=0
bad_bins=()

# run_bin BIN LOG: runs one binary (output to LOG, and to the terminal when
# serial); writes its exit status and seconds to LOG.rc and LOG.secs.
run_bin() {
    local bin=$1 log=$2 start rc
    local -a server=()
    if [ "$jobs" -gt 1 ] && [ -n "${RLOCK_TEST_URL:-}" ]; then
        server=(env -u RLOCK_TEST_URL -u RLOCK_TEST_PORT -u RLOCK_TEST_REDIS_PID
                "$here/with-redis.sh")
    fi
    start=$(date +%s)
    # -k: SIGKILL if SIGTERM is not enough (timeout runs the test in its own
    # process group, so forked helpers are signalled too).
    if [ "$jobs" -gt 1 ]; then
        ${server[@]+"${server[@]}"} timeout -k 10 "$limit" ${prefix[@]+"${prefix[@]}"} "$bin" \
            >"$log" 2>&1 </dev/null
        rc=$?
    else
        timeout -k 10 "$limit" ${prefix[@]+"${prefix[@]}"} "$bin" 2>&1 | tee "$log"
        rc=${PIPESTATUS[0]}
    fi
    echo "$rc" >"$log.rc"
    echo $(( $(date +%s) - start )) >"$log.secs"
}

# tally BIN LOG: adds up one finished binary's results and prints its line.
tally() {
    local name rc secs passed failed
    name=$(basename "$1")
    rc=$(cat "$2.rc")
    secs=$(cat "$2.secs")
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$2" | tail -n 1)
    failed=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s).*/\1/p' "$2" | tail -n 1)
    passed=${passed:-0}
    failed=${failed:-0}

    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "run-tests.sh: $name TIMED OUT after ${limit}s (or was SIGKILLed)"
        bad_bins+=("$name (timeout)")
        [ "$failed" -eq 0 ] && failed=1
    elif [ "$rc" -gt 128 ]; then
        echo "run-tests.sh: $name killed by signal $((rc - 128))"
        bad_bins+=("$name (signal $((rc - 128)))")
        [ "$failed" -eq 0 ] && failed=1
    elif [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        # Non-zero exit with no failed test: a crash before the summary,
        # valgrind's --error-exitcode, a leak report...
        echo "run-tests.sh: $name exited with status $rc"
        bad_bins+=("$name (exit $rc)")
        failed=1
    elif [ "$rc" -eq 0 ] && [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
        echo "run-tests.sh: $name printed no cmocka summary"
        bad_bins+=("$name (no summary)")
        failed=1
    elif [ "$failed" -gt 0 ]; then
        bad_bins+=("$name")
    fi
    echo "=== $name: $passed passed, $failed failed (${secs}s)"
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
}

# missing BIN: counts a binary that is not there as one failure.
missing() {
    echo "run-tests.sh: $1: not an executable"
    total_failed=$((total_failed + 1))
    bad_bins+=("$(basename "$1") (missing)")
}

if [ "$jobs" -eq 1 ]; then
    i=0
    for bin in "$@"; do
        echo "=== $(basename "$bin")"
        if [ ! -x "$bin" ]; then
            missing "$bin"
            continue
        fi
        i=$((i + 1))
        run_bin "$bin" "$logs/$i"
        tally "$bin" "$logs/$i"
    done
else
    declare -A running=() # pid -> index
    declare -a bins=("$@")
    finish_one() {
        local pid idx
        wait -n -p pid "${!running[@]}"
        idx=${running[$pid]}
        unset "running[$pid]"
        echo "=== $(basename "${bins[$idx]}")"
        cat "$logs/$idx"
        tally "${bins[$idx]}" "$logs/$idx"
    }
    for idx in "${!bins[@]}"; do
        if [ ! -x "${bins[$idx]}" ]; then
            missing "${bins[$idx]}"
            continue
        fi
        while [ "${#running[@]}" -ge "$jobs" ]; do
            finish_one
        done
        run_bin "${bins[$idx]}" "$logs/$idx" &
        running[$!]=$idx
    done
    while [ "${#running[@]}" -gt 0 ]; do
        finish_one
    done
fi

if [ "${#bad_bins[@]}" -gt 0 ]; then
    echo "failing: ${bad_bins[*]}"
fi
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
