#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench.sh BUILD_DIR - the `make bench-redisson` driver: rlock beside Java
# Redisson against one redis-server ($RLOCK_TEST_URL, set by
# scripts/with-redis.sh), in one run.
#
# The C rows are BUILD_DIR/bench/bench_rlock (uncontended -t 1 and -t 8,
# handoff, handoff --fair); the Java rows are test/redisson's RedissonBench
# (mvn test -Dtest=RedissonBench), which measures Redisson's RLock and fair
# lock with the same protocols (see its comment). Prints a table with the
# ratios issue 12 targets and the exact command behind each row, and writes
# BUILD_DIR/bench/redisson.jsonl and BUILD_DIR/bench/redisson-table.txt.
#
# Targets are printed, never asserted (a miss is MISS, exit 0); the exit
# status is 1 only when a run failed. About 1.5 minutes on a 2-core machine.
#
# Knobs (environment): REDISSON_VERSION (default 3.52.0), MVN_OFFLINE=1 (-o),
# BENCH_QUICK=1 (short runs, for a smoke test).
set -uo pipefail

if [ "$#" -ne 1 ] || [ -z "${RLOCK_TEST_URL:-}" ]; then
    echo "usage: RLOCK_TEST_URL=redis://host:port $0 BUILD_DIR (see make bench-redisson)" >&2
    exit 2
fi
build=$(realpath "$1") || exit 2
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bench
out=$build/bench
url=$RLOCK_TEST_URL
version=${REDISSON_VERSION:-3.52.0}
mkdir -p "$out"
results=$out/redisson.jsonl
table=$out/redisson-table.txt
: >"$results"
: >"$table"
failed=0

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    D=0.5 R=2 N=300 WARM=1 WARMN=100
else
    D=1.5 R=3 N=2000 WARM=3 WARMN=1000
fi

# run, record, get, fmt, ratio, verdict (they write $results, set failed)
# shellcheck source=../bench/lib.sh
. "$here/../bench/lib.sh"
out_row() { printf '  %-44s %12s %12s %9s  %-8s %s\n' "$@" | tee -a "$table"; }

# ---- the C side ----------------------------------------------------------------

echo "rlock beside Redisson $version against $url ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))" |
    tee -a "$table" >&2
echo "warm-up:" >&2
"$bin/bench_rlock" uncontended --url "$url" -t 8 -d 1 -r 1 >/dev/null
run c_unc1 "$bin/bench_rlock" uncontended --url "$url" -t 1 -d $D -r $R
run c_unc8 "$bin/bench_rlock" uncontended --url "$url" -t 8 -d $D -r $R
run c_ho "$bin/bench_rlock" handoff --url "$url" -n $N
run c_hofair "$bin/bench_rlock" handoff --url "$url" -n $N --fair
# The waiter in this process with a client of its own: the same set-up as the
# Java side's two RedissonClients in one JVM.
run c_ho2 "$bin/bench_rlock" handoff --url "$url" -n $N --two-clients
run c_hofair2 "$bin/bench_rlock" handoff --url "$url" -n $N --two-clients --fair

# ---- the Java side ----------------------------------------------------------------

offline=()
[ "${MVN_OFFLINE:-0}" = 1 ] && offline=(-o)
jout=$(mktemp "${TMPDIR:-/tmp}/rlock-redisson-bench.XXXXXX") || exit 1
log=$(mktemp "${TMPDIR:-/tmp}/rlock-redisson-bench-log.XXXXXX") || exit 1
trap 'rm -f "$jout" "$log"' EXIT
jcmd="cd test/redisson && RLOCK_BENCH_OUT=FILE RLOCK_BENCH_SECS=$D RLOCK_BENCH_ROUNDS=$R RLOCK_BENCH_WARMUP_S=$WARM"
jcmd+=" RLOCK_BENCH_HANDOFFS=$N RLOCK_BENCH_WARMUP_HANDOFFS=$WARMN mvn -B -q${offline[*]+ ${offline[*]}}"
jcmd+=" -Dredisson.version=$version -Dtest=RedissonBench -Dsurefire.failIfNoSpecifiedTests=false test"
echo "\$ $jcmd" >&2
(cd "$here" && RLOCK_BENCH_OUT=$jout RLOCK_BENCH_SECS=$D RLOCK_BENCH_ROUNDS=$R RLOCK_BENCH_WARMUP_S=$WARM \
    RLOCK_BENCH_HANDOFFS=$N RLOCK_BENCH_WARMUP_HANDOFFS=$WARMN \
    mvn -B -q ${offline[@]+"${offline[@]}"} -Dredisson.version="$version" -Dtest=RedissonBench \
        -Dsurefire.failIfNoSpecifiedTests=false test 2>&1) |
    sed -u 's/\x1b\[[0-9;]*m//g' | tee "$log" >&2
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ] && grep -qE 'Could not (resolve|transfer)|[Nn]on-resolvable|could not be resolved' "$log"; then
    echo "bench.sh: Maven could not download Redisson $version or a plugin: Maven Central" \
         "(https://repo.maven.apache.org) is not reachable and ~/.m2 lacks the artifacts." >&2
    exit 1
fi
[ "$rc" -ne 0 ] && { echo "bench.sh: FAILED: the Java side (mvn exit $rc)" >&2; failed=1; }
j_unc1='{}' j_unc8='{}' j_ho='{}' j_hofair='{}' j_ho2='{}' j_hofair2='{}'
while IFS= read -r line; do
    case "$line" in
    *'"redisson_uncontended"'*'"threads":1,'*) record j_unc1 "$line" "$jcmd" ;;
    *'"redisson_uncontended"'*'"threads":8,'*) record j_unc8 "$line" "$jcmd" ;;
    *'"redisson_handoff"'*'"kind":"rlock","waiter":"process"'*) record j_ho "$line" "$jcmd" ;;
    *'"redisson_handoff"'*'"kind":"fair","waiter":"process"'*) record j_hofair "$line" "$jcmd" ;;
    *'"redisson_handoff"'*'"kind":"rlock","waiter":"client"'*) record j_ho2 "$line" "$jcmd" ;;
    *'"redisson_handoff"'*'"kind":"fair","waiter":"client"'*) record j_hofair2 "$line" "$jcmd" ;;
    esac
done <"$jout"
for v in j_unc1 j_unc8 j_ho j_hofair j_ho2 j_hofair2; do
    e=$(get "${!v}" errors)
    [ -n "$e" ] && [ "$e" != 0 ] && { echo "bench.sh: $v: $e errors" >&2; failed=1; }
done

# ---- the table ------------------------------------------------------------------------

printf '\n' | tee -a "$table"
out_row "" "rlock" "Redisson" "ratio" "target" ""
u1=$(ratio "$(get "$c_unc1" ops_per_s)" "$(get "$j_unc1" ops_per_s)")
out_row "uncontended, 1 thread: cycles/s" "$(fmt "$(get "$c_unc1" ops_per_s)")" \
    "$(fmt "$(get "$j_unc1" ops_per_s)")" "$u1" ">= 1.5" "$(verdict "$u1" '>=' 1.5)"
out_row "  p50 / p99 ms" "$(fmt "$(get "$c_unc1" p50_ms)")/$(fmt "$(get "$c_unc1" p99_ms)")" \
    "$(fmt "$(get "$j_unc1" p50_ms)")/$(fmt "$(get "$j_unc1" p99_ms)")" "" "" ""
u8=$(ratio "$(get "$c_unc8" ops_per_s)" "$(get "$j_unc8" ops_per_s)")
out_row "uncontended, 8 threads: cycles/s" "$(fmt "$(get "$c_unc8" ops_per_s)")" \
    "$(fmt "$(get "$j_unc8" ops_per_s)")" "$u8" ">= 1.5" "$(verdict "$u8" '>=' 1.5)"
# handoff_rows LABEL C_PROCESS JAVA_PROCESS C_CLIENT JAVA_CLIENT OP TARGET: p50
# and p99 rows, the waiter in another process (another JVM for Redisson) and
# a thread with a client of its own in the holder's process.
handoff_rows() {
    local label=$1 r
    r=$(ratio "$(get "$2" p50_ms)" "$(get "$3" p50_ms)")
    out_row "$label p50 ms, waiter: other process" "$(fmt "$(get "$2" p50_ms)")" \
        "$(fmt "$(get "$3" p50_ms)")" "$r" "$6 $7" "${6:+$(verdict "$r" "$6" "$7")}"
    out_row "$label p99 ms, waiter: other process" "$(fmt "$(get "$2" p99_ms)")" \
        "$(fmt "$(get "$3" p99_ms)")" "$(ratio "$(get "$2" p99_ms)" "$(get "$3" p99_ms)")" "" ""
    r=$(ratio "$(get "$4" p50_ms)" "$(get "$5" p50_ms)")
    out_row "$label p50 ms, waiter: other client" "$(fmt "$(get "$4" p50_ms)")" \
        "$(fmt "$(get "$5" p50_ms)")" "$r" "$6 $7" "${6:+$(verdict "$r" "$6" "$7")}"
    out_row "$label p99 ms, waiter: other client" "$(fmt "$(get "$4" p99_ms)")" \
        "$(fmt "$(get "$5" p99_ms)")" "$(ratio "$(get "$4" p99_ms)" "$(get "$5" p99_ms)")" "" ""
}
handoff_rows "hand-off" "$c_ho" "$j_ho" "$c_ho2" "$j_ho2" '<=' 0.5
# Issue 12 sets no ratio for the fair lock (its target is the absolute p50 below).
handoff_rows "fair hand-off" "$c_hofair" "$j_hofair" "$c_hofair2" "$j_hofair2" "" ""
fp=$(get "$c_hofair" p50_ms)
out_row "fair hand-off p50 ms (issue: <= 0.3 ms)" "$(fmt "$fp")" "" "" "<= 0.3" "$(verdict "$fp" '<=' 0.3)"
{
    echo "  (other process: Redisson's waiter is a second JVM; other client: a thread of the"
    echo "   holder's process with a client of its own, no in-process hand-off on either side."
    echo "   Ratio = rlock / Redisson. Load after: $(cut -d' ' -f1-3 /proc/loadavg))"
    for v in c_unc1 c_unc8 c_ho c_hofair c_ho2 c_hofair2; do printf '  $ %s\n' "$(get "${!v}" cmd)"; done
    printf '  $ %s\n' "$jcmd"
} | tee -a "$table"
echo
echo "results: $results, table: $table"
exit "$failed"
