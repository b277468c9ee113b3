#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# callgrind.sh BUILD_DIR [--register 0|1] - the client's instructions per
# uncontended lock + unlock cycle: BUILD_DIR/bench/bench_cycles under
# valgrind --tool=callgrind --toggle-collect=cycles with 2000 and 4000
# cycles against $RLOCK_TEST_URL (scripts/with-redis.sh sets it): the
# difference / 2000, on stderr for a person and as one JSON line on stdout
# (test/bench/run.sh section 2). Repeatable to the instruction on a loaded
# machine.
set -euo pipefail
build=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {
    local n=$1
    shift
    valgrind --tool=callgrind --toggle-collect=cycles --callgrind-out-file="$tmp/out" \
        "$build/bench/bench_cycles" --url "${RLOCK_TEST_URL:-redis://127.0.0.1:6379}" -n "$n" "$@" \
        >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    sed -n 's/^summary: \([0-9]*\).*/\1/p' "$tmp/out"
}
a=$(count 2000 "$@")
b=$(count 4000 "$@")
per=$(( (b - a) / 2000 ))
echo "instructions per cycle: $per ($* ir(2200 cycles)=$a ir(4200)=$b)" >&2
printf '{"bench":"callgrind","instructions_per_cycle":%s,"ir_2200":%s,"ir_4200":%s}\n' "$per" "$a" "$b"
