#!/usr/bin/env bash
# run-tests.sh BIN... - run cmocka test binaries one after another.
#
# Each binary runs under `timeout` (300 s x TEST_TIMEOUT_SCALE, default 1),
# prefixed by $TEST_PREFIX when set (e.g. valgrind). Its output is shown as it
# runs; the cmocka summary lines "[  PASSED  ] N test(s)." and
# "[  FAILED  ] N test(s)" are added up. A binary that crashes, times out or
# exits non-zero without reporting a failure counts as one failed test.
# The last line printed is always "N passed, N failed"; the exit status is
# non-zero if anything failed.
set -uo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 BIN..." >&2
    exit 2
fi

scale=${TEST_TIMEOUT_SCALE:-1}
case "$scale" in
    ''|*[!0-9.]*) echo "run-tests.sh: bad TEST_TIMEOUT_SCALE '$scale'" >&2; exit 2 ;;
esac
limit=$(awk -v s="$scale" 'BEGIN { t = 300 * s; if (t < 1) t = 1; printf "%d", t }')

# TEST_PREFIX is split on whitespace on purpose (it holds a command and options).
read -r -a prefix <<<"${TEST_PREFIX:-}"

log=$(mktemp "${TMPDIR:-/tmp}/rlock-tests.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT

total_passed=0
total_failed=0
bad_bins=()

for bin in "$@"; do
    name=$(basename "$bin")
    echo "=== $name"
    if [ ! -x "$bin" ]; then
        echo "run-tests.sh: $bin: not an executable"
        total_failed=$((total_failed + 1))
        bad_bins+=("$name (missing)")
        continue
    fi
    start=$(date +%s)
    # -k: SIGKILL if SIGTERM is not enough (timeout runs the test in its own
    # process group, so forked helpers are signalled too). Output goes to the
    # terminal and to the log.
    timeout -k 10 "$limit" ${prefix[@]+"${prefix[@]}"} "$bin" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    secs=$(( $(date +%s) - start ))

    passed=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$log" | tail -n 1)
    failed=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
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
done

if [ "${#bad_bins[@]}" -gt 0 ]; then
    echo "failing: ${bad_bins[*]}"
fi
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
