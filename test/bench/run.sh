#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh BUILD_DIR - the `make bench` driver.
#
# Runs the benchmark programs in BUILD_DIR/bench against $RLOCK_TEST_URL (set
# by scripts/with-redis.sh), one after the other, prints a table of figures
# with their targets and the exact command behind each row, and writes
#   BUILD_DIR/bench/results.json   every program's JSON result plus its command
#   BUILD_DIR/bench/*.png          charts (when gnuplot is installed)
#
# Targets are printed, never asserted: a missed target is reported as MISS
# and the exit status stays 0. The exit status is 1 only when a program failed
# (an rlock call returned an error, a counter was not exact, a watchdog lock
# was lost). About five minutes on a 2-core machine, 80 s with BENCH_QUICK=1
# (README, Performance); section 13 (TLS, about 45 s of it) runs against a
# TLS redis-server of its own (scripts/with-tls-redis.sh, test/bench/tls.sh),
# not the url's. The charts are drawn by plots.sh.
#
# Knobs (environment): BENCH_QUICK=1 shortens every run (for a smoke test);
# BENCH_CPU_IDLE=1 leaves the CPUs' idle states alone (below).
set -uo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$build/bench
out=$build/bench
url=${RLOCK_TEST_URL:-redis://127.0.0.1:6379}
quick=${BENCH_QUICK:-0}
mkdir -p "$out"
results=$out/results.jsonl
: >"$results"
failed=0

# ---- CPU idle states ---------------------------------------------------------
# A hand-off is a chain of wake-ups, and on a virtual machine waking a halted
# vCPU costs tens to hundreds of microseconds: on an idle 2-vCPU VM (haltpoll
# with guest_halt_poll_ns 0) plaintext hand-off p50s ranged 0.36-1.0 ms where
# the same build gave 0.23 ms with the CPUs kept awake. Every latency row would
# be a figure of the machine's idle policy. So, as tuned's latency-performance
# profile does for latency-bound servers, the run holds a PM QoS request of
# 0 us (/dev/cpu_dma_latency, writable by root) while it lasts: idle CPUs poll
# instead of halting. The title says which; BENCH_CPU_IDLE=1 does not ask.
cpu_idle="idle states as the kernel chooses (no PM QoS request)"
if [ "${BENCH_CPU_IDLE:-0}" != 1 ] && [ -w /dev/cpu_dma_latency ] &&
    { exec 9>/dev/cpu_dma_latency; } 2>/dev/null && printf 0 >&9; then
    cpu_idle="idle CPUs poll (/dev/cpu_dma_latency 0 held for the run, as tuned's latency-performance; BENCH_CPU_IDLE=1: not)"
fi

# ---- running, recording, judging (run, get, cmd_of, fmt, ratio, verdict) ------
# shellcheck source=lib.sh
. "$root/test/bench/lib.sh"

# ---- the table -----------------------------------------------------------------

# fmt_text TEXT: TEXT with every number in it formatted as fmt does (the
# per-master lists, "p50 / p99" pairs).
fmt_text() {
    printf '%s\n' "$1" | awk '{
        out = ""; s = $0
        while (match(s, /-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/)) {
            n = substr(s, RSTART, RLENGTH) + 0
            if (n == int(n) && substr(s, RSTART, RLENGTH) !~ /[.eE]/) f = sprintf("%d", n)
            else {
                a = n < 0 ? -n : n
                if (a >= 1000) f = sprintf("%.0f", n)
                else if (a >= 10) f = sprintf("%.1f", n)
                else if (a >= 0.1) f = sprintf("%.3f", n)
                else f = sprintf("%.4f", n)
            }
            out = out substr(s, 1, RSTART - 1) f
            s = substr(s, RSTART + RLENGTH)
        }
        print out s }'
}

table=$out/table.txt
# The table is collected line by line (TYPE, then tab-separated fields) and
# printed at the end with each column as wide as its widest entry, so no
# label, however long, pushes its row out of line.
lines=$out/table.lines
: >"$lines"
row() {
    local v=$2
    case $v in below*) ;; *) v=$(fmt "$v") ;; esac
    printf 'row\t%s\t%s\t%s\t%s\n' "$1" "$v" "$3" "$4" >>"$lines"
}
section() { printf 'section\t%s\n' "$1" >>"$lines"; }
cmd() { printf 'cmd\t%s\n' "$1" >>"$lines"; }
# note TEXT: a line of explanation under the rows it explains.
note() { printf 'note\t%s\n' "$1" >>"$lines"; }
# textrow LABEL TEXT: a row whose value is not one number (per-master lists).
textrow() { printf 'row\t%s\t%s\t\t\n' "$1" "$(fmt_text "${2:--}")" >>"$lines"; }

# render_table: the collected lines, aligned, on stdout and in $table.
render_table() {
    awk -F '\t' '
        { type[NR] = $1; a[NR] = $2; b[NR] = $3; c[NR] = $4; d[NR] = $5 }
        $1 == "row" || $1 == "head" {
            if (length($2) > wl) wl = length($2)
            if (length($3) > wv) wv = length($3)
            if (length($4) > wt) wt = length($4)
        }
        END {
            for (i = 1; i <= NR; i++) {
                if (type[i] == "section") printf "\n%s\n", a[i]
                else if (type[i] == "cmd") printf "    $ %s\n", a[i]
                else if (type[i] == "note") printf "    (%s)\n", a[i]
                else if (type[i] == "title") printf "%s\n", a[i]
                else {
                    line = sprintf("  %-" wl "s  %" wv "s  %-" wt "s  %s", a[i], b[i], c[i], d[i])
                    sub(/ +$/, "", line)
                    print line
                }
            }
        }' "$lines" | tee "$table"
    rm -f "$lines"
}


# heaprow LABEL BYTES: a per-thread heap figure, or "below noise" when the
# heap grew by less than one malloc chunk per thread (glibc's smallest is 32
# bytes): then most threads allocated nothing, and what is left is other
# allocations and frees during the wait (it can even be negative).
heaprow() {
    if awk -v v="$2" 'BEGIN { exit !(v != "" && v + 0 < 32) }'; then
        row "$1" "below noise" "" ""
        note "measured $(fmt "$2") B per thread: less than one 32 B malloc chunk each"
    else
        row "$1" "$2" "" ""
    fi
}

# ---- the runs ------------------------------------------------------------------

if [ "$quick" = 1 ]; then
    D=0.5 R=2 N=500 CD=3 MON=1 WDN="1000 10000" WDR=3
else
    D=1 R=5 N=3000 CD=10 MON=2 WDN="1000 10000 100000" WDR=9
fi

echo "rlock benchmarks against $url" >&2
# Not recorded: the first seconds of a fresh server and a cold CPU run slower,
# and would count against whichever row came first.
echo "warm-up:" >&2
"$bin/bench_baseline" --url "$url" -t 8 -d 1 -r 1 >/dev/null
"$bin/bench_rlock" uncontended --url "$url" -t 8 -d 1 -r 1 >/dev/null
run base1 "$bin/bench_baseline" --url "$url" -t 1 -d $D -r $R
run unc1 "$bin/bench_rlock" uncontended --url "$url" -t 1 -d $D -r $R
# Issue 14: the same row with the registration off, and with the statistics
# read every 100 ms meanwhile (an exporter scrapes every 15 s or so).
run unc1off "$bin/bench_rlock" uncontended --url "$url" -t 1 -d $D -r $R --register 0
run unc1scrape "$bin/bench_rlock" uncontended --url "$url" -t 1 -d $D -r $R --stats-ms 100
# The client's instructions per cycle (callgrind): the same on any load.
run cg1 "$root/test/bench/callgrind.sh" "$build"
run cg1off "$root/test/bench/callgrind.sh" "$build" --register 0
run base8 "$bin/bench_baseline" --url "$url" -t 8 -d $D -r $R
run unc8 "$bin/bench_rlock" uncontended --url "$url" -t 8 -d $D -r $R
run fen "$bin/bench_rlock" fenced --url "$url" -d $D -r $R
run hofloor "$bin/bench_baseline" --url "$url" --handoff $N --samples "$out/handoff-floor.dat"
run hop "$bin/bench_rlock" handoff --url "$url" -n $N --samples "$out/handoff-process.dat"
run hot "$bin/bench_rlock" handoff --url "$url" -n $N --same-process --samples "$out/handoff-thread.dat"
run cont "$bin/bench_rlock" contention --url "$url" -p 4 -t 4 -d $CD --monitor $MON \
    --samples "$out/contention-threads.dat"
run herd1 "$bin/bench_rlock" herd --url "$url" -w 1 -r 10
run herd10 "$bin/bench_rlock" herd --url "$url" -w 10 -r 5
run herd100 "$bin/bench_rlock" herd --url "$url" -w 100 -r 3
# Memory before the watchdog rows: Redis is still shrinking its tables for a
# while after 100,000 keys go.
run mem "$bin/bench_rlock" memory --url "$url" -n 10000 -w 100
wd_rows=""
for n in $WDN; do
    run "wd$n" "$bin/bench_rlock" watchdog --url "$url" -n "$n" -t 4 --timeout 3000 -r $WDR
    wd_rows="$wd_rows wd$n"
done

# The fair lock (issue 12): hand-off, FIFO order under contention, a dead waiter's stall.
if [ "$quick" = 1 ]; then FD=2 FR=2; else FD=5 FR=5; fi
run hofair "$bin/bench_rlock" handoff --url "$url" -n $N --fair
run fifo "$bin/bench_rlock" fifo --url "$url" -p 4 -t 4 -d $FD
run fstall "$bin/bench_rlock" fair-stall --url "$url" -r $FR

# Its own master, two replicas and three sentinels (not the url's server).
if [ "$quick" = 1 ]; then SF=1; else SF=3; fi
run sent "$bin/bench_sentinel" -d $D -r $R -f $SF

# Its own Redis Cluster: 3 masters + 3 replicas (not the url's server).
if [ "$quick" = 1 ]; then
    CLA="-d 0.5 -r 2 -n 300 -w 10000 -k 2 -m 2"
else
    CLA="-d $D -r $R -n $N -w 100000 -k 5 -m 4"
fi
# shellcheck disable=SC2086
run clus "$bin/bench_cluster" $CLA

# Three masters of its own (not the url's server): Redlock beside one master and
# beside Redisson's one-after-another attempt.
run redl "$bin/bench_rlock" redlock -n $N

# The read-write lock: 8 readers of one lock beside 8 plain locks, then a
# writer's waits among 8 churning readers (read hold 1 ms).
if [ "$quick" = 1 ]; then RWN=50; else RWN=300; fi
run rw "$bin/bench_rlock" rw --url "$url" -t 8 -d $D -r $R -n $RWN --settle-us 1000

# TLS (issue 24): its own TLS redis-server (the main one of with-tls-redis.sh
# only: a TLS port and a plaintext port), stopped by pid on exit.
echo "TLS rows (test/bench/tls.sh under scripts/with-tls-redis.sh):" >&2
RLOCK_TLS_MAIN_ONLY=1 "$root/scripts/with-tls-redis.sh" "$root/test/bench/tls.sh" "$build" "$out/tls.jsonl" ||
    { echo "run.sh: FAILED: test/bench/tls.sh" >&2; failed=1; }
# tls_line NAME: tls.sh's line for row NAME (a failed one if missing).
tls_line() {
    local l
    l=$(grep "\"row\":\"$1\"" "$out/tls.jsonl" 2>/dev/null | tail -n 1)
    [ -n "$l" ] || l='{"bench":"'"$1"'","failed":1,"row":"'"$1"'"}'
    printf '%s' "$l"
}
tlsc=$(tls_line tlsc) tlshop=$(tls_line tlshop) tlsfloor=$(tls_line tlsfloor) tlsmem=$(tls_line tlsmem)
printf '%s\n' "$tlsc" "$tlshop" "$tlsfloor" "$tlsmem" >>"$results"
rm -f "$out/tls.jsonl"

# ---- report ----------------------------------------------------------------------

redis_version=$(redis-cli -u "$url" INFO server 2>/dev/null | tr -d '\r' | sed -n 's/^redis_version://p')
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
printf 'title\t\ntitle\trlock %s benchmarks, %s\n' \
    "$(sed -n 's/^#define RLOCK_VERSION_STRING "\(.*\)"/\1/p' "$root/include/rlock.h" 2>/dev/null)" \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" >>"$lines"
printf 'title\tmachine: %s cores, %s; redis %s on localhost; load average %s at the end (this run included)\n' "$(nproc)" \
    "${cpu_model:-unknown cpu}" "${redis_version:-?}" "$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null)" >>"$lines"
printf 'title\tCPU idle: %s\n' "$cpu_idle" >>"$lines"
[ "$quick" = 1 ] && printf 'title\tBENCH_QUICK=1: short rounds, a smoke test; its timing figures and their MISSes are not measurements\n' >>"$lines"
printf 'title\tstatus: ok, or MISS and how far from the target; timing rows move by +-30 %% between runs on a loaded machine,\n' >>"$lines"
printf 'title\tand more once the load average passes the core count (other jobs take the cores rlock and Redis wait for)\n' >>"$lines"
printf 'head\t%s\t%s\t%s\t%s\n' "figure" "value" "target" "status" >>"$lines"

b1=$(get "$base1" ops_per_s) u1=$(get "$unc1" ops_per_s)
b8=$(get "$base8" ops_per_s) u8=$(get "$unc8" ops_per_s)
section "1. Baseline: raw hiredis EVALSHA acquire + release, rlock's scripts and keys"
row "1 thread: cycles/s" "$b1" "" ""
row "1 thread: p50 ms" "$(get "$base1" p50_ms)" "" ""
row "1 thread: p99 ms" "$(get "$base1" p99_ms)" "" ""
row "1 thread: p99.9 ms" "$(get "$base1" p999_ms)" "" ""
cmd "$(cmd_of "$base1")"
row "8 threads, 8 connections: cycles/s" "$b8" "" ""
row "8 threads: p50 ms" "$(get "$base8" p50_ms)" "" ""
row "8 threads: p99 ms" "$(get "$base8" p99_ms)" "" ""
cmd "$(cmd_of "$base8")"

section "2. Uncontended rlock_lock + rlock_unlock (watchdog locks, distinct names; register_client 1, the default)"
r1=$(ratio "$u1" "$b1") p1=$(ratio "$(get "$unc1" p99_ms)" "$(get "$base1" p99_ms)") r8=$(ratio "$u8" "$b8")
row "1 thread: cycles/s" "$u1" "" ""
row "1 thread: ratio to baseline cycles/s" "$r1" ">= 0.95" "$(verdict "$r1" '>=' 0.95)"
row "1 thread: p50 ms" "$(get "$unc1" p50_ms)" "" ""
row "1 thread: p99 ms" "$(get "$unc1" p99_ms)" "" ""
row "1 thread: p99.9 ms" "$(get "$unc1" p999_ms)" "" ""
row "1 thread: ratio to baseline p99" "$p1" "<= 1.2" "$(verdict "$p1" '<=' 1.2)"
row "1 thread: script calls per cycle (baseline 2)" "$(get "$unc1" scripts_per_cycle)" "" ""
row "1 thread: client CPU us per cycle" "$(get "$unc1" client_cpu_us_per_cycle)" "" ""
row "1 thread: baseline client CPU us per cycle" "$(get "$base1" client_cpu_us_per_cycle)" "" ""
cmd "$(cmd_of "$unc1")"
u1off=$(get "$unc1off" ops_per_s) u1scr=$(get "$unc1scrape" ops_per_s)
r1off=$(ratio "$u1off" "$b1") r1scr=$(ratio "$u1scr" "$b1")
row "1 thread, register_client 0: cycles/s" "$u1off" "" ""
row "1 thread, register_client 0: ratio to baseline" "$r1off" ">= 0.95" "$(verdict "$r1off" '>=' 0.95)"
row "registration on / off, cycles/s (same run)" "$(ratio "$u1" "$u1off")" "" ""
note "statistics are always counted; the registration hash is rewritten every 10 s, off the hot path"
cmd "$(cmd_of "$unc1off")"
row "1 thread, stats read every 100 ms: cycles/s" "$u1scr" "" ""
row "1 thread, stats read every 100 ms: ratio" "$r1scr" ">= 0.95" "$(verdict "$r1scr" '>=' 0.95)"
row "  client CPU us per cycle" "$(get "$unc1scrape" client_cpu_us_per_cycle)" "" ""
cmd "$(cmd_of "$unc1scrape")"
row "client instructions per cycle (callgrind)" "$(get "$cg1" instructions_per_cycle)" "" ""
cmd "$(cmd_of "$cg1")"
row "  the same, register_client 0" "$(get "$cg1off" instructions_per_cycle)" "" ""
cmd "$(cmd_of "$cg1off")"
row "8 threads: cycles/s" "$u8" "" ""
row "8 threads: ratio to baseline cycles/s" "$r8" ">= 0.90" "$(verdict "$r8" '>=' 0.90)"
row "8 threads: p50 ms" "$(get "$unc8" p50_ms)" "" ""
row "8 threads: p99 ms" "$(get "$unc8" p99_ms)" "" ""
row "8 threads: p99.9 ms" "$(get "$unc8" p999_ms)" "" ""
cmd "$(cmd_of "$unc8")"
fr=$(get "$fen" ratio)
row "fenced lock, 1 thread: cycles/s" "$(get "$fen" fenced_ops_per_s)" "" ""
row "fenced: plain lock cycles/s (same run)" "$(get "$fen" plain_ops_per_s)" "" ""
row "fenced: ratio to plain cycles/s" "$fr" ">= 0.95" "$(verdict "$fr" '>=' 0.95)"
textrow "fenced: p50 / p99 ms" "$(get "$fen" fenced_p50_ms) / $(get "$fen" fenced_p99_ms)"
cmd "$(cmd_of "$fen")"

section "3. Hand-off: unlock call -> blocked waiter's return ($(get "$hop" handoffs) hand-offs each)"
hp50=$(get "$hop" p50_ms) hp99=$(get "$hop" p99_ms)
row "waiter in another process: p50 ms" "$hp50" "<= 0.25" "$(verdict "$hp50" '<=' 0.25)"
row "waiter in another process: p99 ms" "$hp99" "<= 2" "$(verdict "$hp99" '<=' 2)"
row "waiter in another process: max ms" "$(get "$hop" max_ms)" "" ""
row "p50 ratio to the raw floor below" "$(ratio "$hp50" "$(get "$hofloor" p50_ms)")" "" ""
cmd "$(cmd_of "$hop")"
row "waiter in the same process: p50 ms" "$(get "$hot" p50_ms)" "" ""
row "waiter in the same process: p99 ms" "$(get "$hot" p99_ms)" "" ""
row "waiter in the same process: max ms" "$(get "$hot" max_ms)" "" ""
cmd "$(cmd_of "$hot")"
row "raw floor (hiredis, SUBSCRIBE + PUBLISH): p50 ms" "$(get "$hofloor" p50_ms)" "" ""
row "raw floor: p99 ms" "$(get "$hofloor" p99_ms)" "" ""
cmd "$(cmd_of "$hofloor")"

section "4. Contention: 4 processes x 4 threads, one lock, GET+SET counter"
crt=$(get "$cont" client_cmds_per_acq)
row "acquisitions/s" "$(get "$cont" acq_per_s)" "" ""
row "owner changes/s" "$(get "$cont" owner_changes_per_s)" "" ""
row "min acquisitions per thread" "$(get "$cont" min_per_thread)" "" ""
row "max acquisitions per thread" "$(get "$cont" max_per_thread)" "" ""
# The target counts the workload's own GET + SET (2 round trips) too.
crt_all=$(awk -v x="$crt" 'BEGIN { printf "%.3f", x + 2 }')
row "round trips per acquisition, incl. GET+SET" "$crt_all" "<= 5" "$(verdict "$crt_all" '<=' 5)"
row "  of which lock commands (lock, unlock, retries)" "$crt" "" ""
note "MONITOR sample, by command: $(get "$cont" client_cmds_breakdown)"
row "script calls per acquisition" "$(get "$cont" script_calls_per_acq)" "" ""
row "Redis cmds per acquisition (lock, incl. Lua)" "$(get "$cont" redis_cmds_per_acq)" "" ""
row "Redis CPU ms per 1000 acquisitions" "$(get "$cont" redis_cpu_ms_per_1000_acq)" "" ""
row "counter exact (1 = yes)" "$(get "$cont" counter_exact)" "1" "$(verdict "$(get "$cont" counter_exact)" '>=' 1)"
cmd "$(cmd_of "$cont")"

section "5. Herd: W threads of one process waiting on one lock"
for v in herd1 herd10 herd100; do
    line=${!v}
    sp=$(get "$line" scripts_per_handoff)
    row "W=$(get "$line" waiters): script calls per hand-off (median)" "$sp" "<= 3" "$(verdict "$sp" '<=' 3)"
    row "W=$(get "$line" waiters): mean hand-off ms" "$(get "$line" handoff_ms)" "" ""
    cmd "$(cmd_of "$line")"
done

section "6. Watchdog: held watchdog locks, watchdog_timeout 3000 ms"
for v in $wd_rows; do
    line=${!v}
    n=$(get "$line" locks)
    lps=$(get "$line" locks_per_script)
    pct=$(get "$line" client_cpu_pct_core)
    row "$n locks: still held after $(fmt "$(get "$line" held_after_s)") s (1=yes)" "$(get "$line" all_held)" "1" "$(verdict "$(get "$line" all_held)" '>=' 1)"
    row "$n locks: script calls per renewal round" "$(get "$line" scripts_per_round)" "<= $((n / 100))" "$(verdict "$(get "$line" scripts_per_round)" '<=' $((n / 100)))"
    row "$n locks: locks per script call" "$lps" ">= 100" "$(verdict "$lps" '>=' 100)"
    row "$n locks: client CPU ms per round" "$(get "$line" client_cpu_ms_per_round)" "" ""
    row "$n locks: client CPU, % of one core" "$pct" "<= 5" "$(verdict "$pct" '<=' 5)"
    row "$n locks: Redis CPU ms per round" "$(get "$line" redis_cpu_ms_per_round)" "" ""
    cmd "$(cmd_of "$line")"
done

section "7. Memory (glibc mallinfo2, one arena, no tcache; INFO used_memory)"
hpl=$(get "$mem" heap_per_held_lock)
row "client heap bytes per lock handle" "$(get "$mem" heap_per_handle)" "" ""
row "client heap bytes per held lock" "$hpl" "<= 256" "$(verdict "$hpl" '<=' 256)"
heaprow "client heap bytes per waiting thread, one lock" "$(get "$mem" heap_per_waiter_same_lock)"
heaprow "client heap bytes per waiting thread, own lock" "$(get "$mem" heap_per_waiter_own_lock)"
row "client heap bytes kept per lock after unlock" "$(get "$mem" heap_left_after_unlock)" "" ""
row "Redis bytes per held lock" "$(get "$mem" redis_bytes_per_held_lock)" "" ""
cmd "$(cmd_of "$mem")"

section "8. Replicated: a master, 2 replicas, 3 sentinels of its own (1 thread, uncontended)"
so=$(get "$sent" single_ops) se=$(get "$sent" sentinel_ops)
wb=$(get "$sent" wait_base_ops) wo=$(get "$sent" wait_ops)
rs=$(ratio "$se" "$so") rwait=$(ratio "$wo" "$wb")
row "redis:// to the master: cycles/s" "$so" "" ""
row "redis-sentinel://: cycles/s" "$se" "" ""
row "Sentinel ratio to redis:// (same run)" "$rs" ">= 0.95" "$(verdict "$rs" '>=' 0.95)"
row "raw EVALSHA + WAIT 1 pipelined: cycles/s" "$wb" "" ""
row "replica_acks 1: cycles/s" "$wo" "" ""
row "replica_acks 1: ratio to raw EVALSHA + WAIT" "$rwait" ">= 0.90" "$(verdict "$rwait" '>=' 0.90)"
row "replica_acks 1: p50 ms" "$(get "$sent" wait_p50_ms)" "" ""
row "replica_acks 1: p99 ms" "$(get "$sent" wait_p99_ms)" "" ""
row "replica_acks 0: p50 ms" "$(get "$sent" nowait_p50_ms)" "" ""
row "replica_acks 0: p99 ms" "$(get "$sent" nowait_p99_ms)" "" ""
ta=$(get "$sent" to_acquire_ms) tr=$(get "$sent" to_renew_ms)
row "failover: new master writable -> waiter's lock, ms" "$ta" "<= 300" "$(verdict "$ta" '<=' 300)"
row "failover: new master writable -> renewal, ms" "$tr" "<= 300" "$(verdict "$tr" '<=' 300)"
note "median of $(get "$sent" failovers) SENTINEL FAILOVERs"
cmd "$(cmd_of "$sent")"

section "9. Redis Cluster: 3 masters + 3 replicas of its own (redis-cluster://)"
cu=$(get "$clus" unc_ops) cb=$(get "$clus" unc_raw_ops)
cr=$(get "$clus" unc_ratio) crd=$(get "$clus" unc_redirects_per_cycle)
row "raw EVALSHA to the slot's master: cycles/s" "$cb" "" ""
row "raw: p50 ms" "$(get "$clus" unc_raw_p50_ms)" "" ""
row "raw: p99 ms" "$(get "$clus" unc_raw_p99_ms)" "" ""
row "rlock, 1 thread, 48 names: cycles/s" "$cu" "" ""
row "rlock ratio to raw cycles/s (median pair)" "$cr" ">= 0.95" "$(verdict "$cr" '>=' 0.95)"
row "  lowest pair's ratio" "$(get "$clus" unc_ratio_min)" "" ""
row "  highest pair's ratio" "$(get "$clus" unc_ratio_max)" "" ""
note "$(get "$clus" unc_pairs) pairs, each of raw and rlock in turns of 250 cycles"
row "rlock: p50 ms" "$(get "$clus" unc_p50_ms)" "" ""
row "rlock: p99 ms" "$(get "$clus" unc_p99_ms)" "" ""
row "rlock: redirects (MOVED+ASK) per cycle" "$crd" "<= 0" "$(verdict "$crd" '<=' 0)"
row "rlock: script calls per cycle (raw 2)" "$(get "$clus" unc_scripts_per_cycle)" "" ""
row "client CPU us per cycle: raw" "$(get "$clus" unc_raw_cpu_us_per_cycle)" "" ""
row "client CPU us per cycle: rlock" "$(get "$clus" unc_cpu_us_per_cycle)" "" ""
textrow "rlock's unlock publishes with" "$(get "$clus" unc_publish_verb)"
for m in sharded classic; do
    p50=$(get "$clus" "ho_${m}_p50_ms") p99=$(get "$clus" "ho_${m}_p99_ms")
    f50=$(get "$clus" "ho_floor_${m}_p50_ms")
    row "hand-off to another process, $m: p50 ms" "$p50" "<= 0.25" "$(verdict "$p50" '<=' 0.25)"
    row "hand-off, $m: p99 ms" "$p99" "<= 2" "$(verdict "$p99" '<=' 2)"
    row "hand-off, $m: max ms" "$(get "$clus" "ho_${m}_max_ms")" "" ""
    row "  raw floor, $m: p50 ms" "$f50" "" ""
    row "  raw floor, $m: p99 ms" "$(get "$clus" "ho_floor_${m}_p99_ms")" "" ""
    row "  rlock / floor, $m: p50" "$(ratio "$p50" "$f50")" "" ""
done
for m in sharded classic; do
    p50=$(get "$clus" "ho_bare_${m}_p50_ms") f50=$(get "$clus" "ho_bare_floor_${m}_p50_ms")
    row "3 masters, no replicas, $m: hand-off p50 ms" "$p50" "" ""
    row "  raw floor there, $m: p50 ms" "$f50" "" ""
    row "  rlock / floor there, $m: p50" "$(ratio "$p50" "$f50")" "" ""
done
note "$(get "$clus" ho_n) hand-offs each; floor: raw hiredis, rlock's scripts, the waiter blocked on its (S)SUBSCRIBE connection; the single-server figures are in section 3"
wl=$(get "$clus" wd_locks)
row "watchdog: locks held by one client" "$wl" "" ""
row "watchdog: seconds to acquire them (4 threads)" "$(get "$clus" wd_acquire_s)" "" ""
row "watchdog: renewal rounds measured" "$(get "$clus" wd_rounds)" "" ""
textrow "watchdog: locks per master" "$(get "$clus" wd_locks_per_master)"
textrow "watchdog: EVALSHA per round, per master" "$(get "$clus" wd_evalsha_per_round)"
textrow "watchdog: locks per EVALSHA, per master" "$(get "$clus" wd_locks_per_evalsha)"
textrow "watchdog: round trips per round, per master" "$(get "$clus" wd_rtt_per_round)"
textrow "watchdog: connections used, per master" "$(get "$clus" wd_conns)"
textrow "watchdog: Redis CPU ms per round, per master" "$(get "$clus" wd_redis_cpu_ms_per_round)"
rpl=$(get "$clus" wd_rtt_per_100_locks)
row "watchdog: round trips per 100 locks (worst)" "$rpl" "<= 1" "$(verdict "$rpl" '<=' 1)"
wcpu=$(get "$clus" wd_thread_cpu_pct)
row "watchdog: its thread's CPU, % of a core" "$wcpu" "<= 5" "$(verdict "$wcpu" '<=' 5)"
row "watchdog: client process CPU, % of a core" "$(get "$clus" wd_process_cpu_pct)" "" ""
row "watchdog: locks lost (LOCK_LOST)" "$(get "$clus" wd_lost)" "<= 0" "$(verdict "$(get "$clus" wd_lost)" '<=' 0)"
row "watchdog: all still held at the end (1=yes)" "$(get "$clus" wd_all_held)" "1" "$(verdict "$(get "$clus" wd_all_held)" '>=' 1)"
mf=$(get "$clus" mig_failed)
row "migration: slot migrations under load" "$(get "$clus" mig_migrations)" "" ""
row "migration: mean window ms" "$(get "$clus" mig_window_ms)" "" ""
row "migration: cycles inside the windows" "$(get "$clus" mig_cycles)" "" ""
row "migration: unlock p50 ms inside" "$(get "$clus" mig_unlock_p50_ms)" "" ""
row "migration: unlock p99 ms inside" "$(get "$clus" mig_unlock_p99_ms)" "" ""
row "migration: unlock max ms inside" "$(get "$clus" mig_unlock_max_ms)" "" ""
row "migration: unlock p50 ms outside" "$(get "$clus" mig_outside_p50_ms)" "" ""
row "migration: unlock p99 ms outside" "$(get "$clus" mig_outside_p99_ms)" "" ""
row "migration: failed lock/unlock calls" "$mf" "<= 0" "$(verdict "$mf" '<=' 0)"
row "migration: held lock in the slot lost" "$(get "$clus" mig_lost)" "<= 0" "$(verdict "$(get "$clus" mig_lost)" '<=' 0)"
textrow "migration: MOVED / ASK / TRYAGAIN seen" "$(get "$clus" mig_moved) / $(get "$clus" mig_ask) / $(get "$clus" mig_tryagain)"
cmd "$(cmd_of "$clus")"

section "10. Redlock over 3 masters of its own: uncontended acquire, 1 thread (lease locks)"
rl50=$(get "$redl" redlock_to_single_p50) rl99=$(get "$redl" redlock_to_single_p99)
row "one master (rlock_try_lock): p50 ms" "$(get "$redl" single_p50_ms)" "" ""
row "one master: p99 ms" "$(get "$redl" single_p99_ms)" "" ""
row "Redlock, 3 masters at once: p50 ms" "$(get "$redl" redlock_p50_ms)" "" ""
row "Redlock: p99 ms" "$(get "$redl" redlock_p99_ms)" "" ""
row "Redlock p50 ratio to one master" "$rl50" "<= 1.3" "$(verdict "$rl50" '<=' 1.3)"
row "Redlock p99 ratio to one master" "$rl99" "<= 1.3" "$(verdict "$rl99" '<=' 1.3)"
row "one after another (Redisson's RedLock): p50 ms" "$(get "$redl" sequential_p50_ms)" "" ""
row "one after another: p99 ms" "$(get "$redl" sequential_p99_ms)" "" ""
row "one after another: p50 ratio to one master" "$(get "$redl" sequential_to_single_p50)" "" ""
row "Redlock unlock, 3 masters at once: p50 ms" "$(get "$redl" redlock_unlock_p50_ms)" "" ""
row "Redlock unlock: p99 ms" "$(get "$redl" redlock_unlock_p99_ms)" "" ""
cmd "$(cmd_of "$redl")"

section "11. Fair lock (rlock_get_fair): hand-off, FIFO order, a dead waiter"
fp50=$(get "$hofair" p50_ms)
row "hand-off to another process: p50 ms" "$fp50" "<= 0.3" "$(verdict "$fp50" '<=' 0.3)"
row "hand-off to another process: p99 ms" "$(get "$hofair" p99_ms)" "" ""
cmd "$(cmd_of "$hofair")"
inv=$(get "$fifo" inversions)
row "4 x 4 threads: acquisitions checked for order" "$(get "$fifo" checked)" "" ""
row "4 x 4 threads: order inversions" "$inv" "<= 0" "$(verdict "$inv" '<=' 0)"
row "4 x 4 threads: acquisitions/s" "$(get "$fifo" acq_per_s)" "" ""
row "4 x 4 threads: min acquisitions per thread" "$(get "$fifo" min_per_thread)" "" ""
row "4 x 4 threads: max acquisitions per thread" "$(get "$fifo" max_per_thread)" "" ""
row "4 x 4 threads: hand-off p50 ms" "$(get "$fifo" p50_ms)" "" ""
row "4 x 4 threads: hand-off p99 ms" "$(get "$fifo" p99_ms)" "" ""
note "inversion: the acquisition after a holder read a non-empty queue is not its head's"
cmd "$(cmd_of "$fifo")"
ex=$(get "$fstall" excess_max_ms)
row "dead head: live waiter's stall after the unlock, ms" "$(get "$fstall" stall_ms)" "" ""
row "dead head: bound (its deadline after the unlock), ms" "$(get "$fstall" bound_ms)" "" ""
row "dead head: stall beyond the bound, median ms" "$(get "$fstall" excess_ms)" "" ""
row "dead head: stall beyond the bound, worst ms" "$ex" "<= 10" "$(verdict "$ex" '<=' 10)"
cmd "$(cmd_of "$fstall")"

section "12. Read-write lock (rlock_get_rw): 8 reader threads, one client"
rr=$(get "$rw" read_ratio) hold=$(get "$rw" read_hold_ms)
row "8 threads on 8 plain locks: cycles/s" "$(get "$rw" plain_ops_per_s)" "" ""
row "8 threads on 8 read locks of their own: cycles/s" "$(get "$rw" own_read_ops_per_s)" "" ""
row "8 readers of ONE lock: cycles/s" "$(get "$rw" read_ops_per_s)" "" ""
row "  ratio to 8 plain locks" "$rr" ">= 0.9" "$(verdict "$rr" '>=' 0.9)"
[ "$(verdict "$rr" '>=' 0.9)" = ok ] ||
    note "a known miss: Redisson's read layout, a key per hold, costs a read cycle about twice a plain cycle's commands in Redis (docs/design.md section 13)"
row "  ratio to 8 read locks (cost of sharing)" "$(get "$rw" read_ratio_to_own)" "" ""
textrow "  p50 / p99 ms (one lock)" "$(get "$rw" read_p50_ms) / $(get "$rw" read_p99_ms)"
# One generation: the read holds under way when the writer asked (each $hold ms).
gen=$(awk -v h="$hold" 'BEGIN { printf "%g", h + 2 }')
wp99=$(get "$rw" writer_wait_p99_ms)
row "writer wait among churning readers: p50 ms" "$(get "$rw" writer_wait_p50_ms)" "" ""
row "writer wait: p99 ms (1 generation = $hold ms hold)" "$wp99" "<= $gen" "$(verdict "$wp99" '<=' "$gen")"
row "writer wait: max ms" "$(get "$rw" writer_wait_max_ms)" "" ""
row "reads/s meanwhile (readers not starved)" "$(get "$rw" writer_reads_per_s_meanwhile)" "" ""
cmd "$(cmd_of "$rw")"

section "13. TLS (rediss://, OpenSSL 3): a TLS redis-server of its own, 127.0.0.1, verify full against its own CA"
tr1=$(get "$tlsc" ratio)
row "raw TLS client (OpenSSL + hiredis reader, 1 conn): cycles/s" "$(get "$tlsc" raw_ops_per_s)" "" ""
textrow "  raw TLS client: p50 / p99 ms" "$(get "$tlsc" raw_p50_ms) / $(get "$tlsc" raw_p99_ms)"
row "rlock over rediss://, 1 thread: cycles/s" "$(get "$tlsc" rlock_ops_per_s)" "" ""
textrow "  rlock over rediss://: p50 / p99 ms" "$(get "$tlsc" rlock_p50_ms) / $(get "$tlsc" rlock_p99_ms)"
row "  ratio to the raw TLS client (median of round pairs)" "$tr1" ">= 0.95" "$(verdict "$tr1" '>=' 0.95)"
textrow "  round pairs' ratios: min / max" "$(get "$tlsc" ratio_min) / $(get "$tlsc" ratio_max)"
row "rlock over redis://, same server: cycles/s" "$(get "$tlsc" plain_ops_per_s)" "" ""
textrow "  rlock over redis://: p50 / p99 ms" "$(get "$tlsc" plain_p50_ms) / $(get "$tlsc" plain_p99_ms)"
row "  rlock TLS / plaintext cycles/s (same run)" "$(get "$tlsc" tls_to_plain)" "" ""
row "connections per rediss:// client (server's connected_clients)" "$(get "$tlsc" connections_per_client)" "" ""
hs=$(get "$tlsc" client_handshakes_per_min)
row "steady state: handshakes/min (rlock_client_stats)" "$hs" "0" "$(verdict "$hs" '<=' 0)"
row "steady state: connections/min (server's INFO stats)" "$(get "$tlsc" server_connections_per_min)" "" ""
note "the three clients take turns, a round each; counted over all rounds, after a 200-cycle warm-up, every connection open before"
cmd "$(cmd_of "$tlsc")"
thp50=$(get "$tlshop" p50_ms) thp99=$(get "$tlshop" p99_ms)
row "hand-off, waiter in another process: p50 ms" "$thp50" "<= 0.3" "$(verdict "$thp50" '<=' 0.3)"
row "hand-off, waiter in another process: p99 ms" "$thp99" "" ""
row "  p50 ratio to plaintext (section 3)" "$(ratio "$thp50" "$hp50")" "" ""
row "  p50 ratio to the raw TLS floor below" "$(ratio "$thp50" "$(get "$tlsfloor" tls_p50_ms)")" "" ""
cmd "$(cmd_of "$tlshop")"
textrow "raw floor over TLS (floor.h, OpenSSL): p50 / p99 ms" "$(get "$tlsfloor" tls_p50_ms) / $(get "$tlsfloor" tls_p99_ms)"
textrow "raw floor over plaintext, same server: p50 / p99 ms" "$(get "$tlsfloor" plain_p50_ms) / $(get "$tlsfloor" plain_p99_ms)"
note "the floor: two raw clients, two round trips and a message, no library (section 3's floor); medians of $(get "$tlsfloor" rounds) rounds taken in turn"
cmd "$(cmd_of "$tlsfloor")"
row "memory per connection, plaintext: heap B" "$(get "$tlsmem" plain_heap_per_conn)" "" ""
row "memory per connection, TLS: heap B" "$(get "$tlsmem" tls_heap_per_conn)" "" ""
row "memory per connection, plaintext: RSS B" "$(get "$tlsmem" plain_rss_per_conn)" "" ""
row "memory per connection, TLS: RSS B" "$(get "$tlsmem" tls_rss_per_conn)" "" ""
note "$(get "$tlsmem" clients) clients, each after one lock + unlock (one pool connection each); the whole client's growth divided by its connections"
cmd "$(cmd_of "$tlsmem")"

render_table

# ---- results.json ------------------------------------------------------------------

{
    printf '{"generated":"%s","url":"%s","redis_version":"%s","cores":%s,"results":[\n' \
        "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "$url" "${redis_version:-}" "$(nproc)"
    sed '$!s/$/,/' "$results"
    printf ']}\n'
} >"$out/results.json"
rm -f "$results"
echo
echo "results: $out/results.json, table: $table"

# ---- charts --------------------------------------------------------------------------

# uncontended.dat: per thread count, baseline then rlock, each as median, min
# and max over the rounds (the error bars).
spread_of() { printf '%s %s %s' "$(get "$1" "$2")" "$(get "$1" "$3")" "$(get "$1" "$4")"; }
{
    for t in 1 8; do
        b=base$t u=unc$t
        printf '"%s thread%s" %s %s %s %s\n' "$t" "$([ "$t" = 1 ] || echo s)" \
            "$(spread_of "${!b}" ops_per_s ops_min ops_max)" "$(spread_of "${!u}" ops_per_s ops_min ops_max)" \
            "$(spread_of "${!b}" p99_ms p99_min_ms p99_max_ms)" "$(spread_of "${!u}" p99_ms p99_min_ms p99_max_ms)"
    done
} >"$out/uncontended.dat"
for v in herd1 herd10 herd100; do
    printf '%s %s\n' "$(get "${!v}" waiters)" \
        "$(spread_of "${!v}" scripts_per_handoff scripts_per_handoff_min scripts_per_handoff_max)"
done >"$out/herd.dat"
for v in $wd_rows; do
    printf '%s %s %s %s\n' "$(get "${!v}" locks)" "$(get "${!v}" scripts_per_round)" \
        "$(get "${!v}" client_cpu_pct_core)" "$(get "${!v}" client_cpu_ms_per_round)"
done >"$out/watchdog.dat"

"$root/test/bench/plots.sh" "$out" || failed=1
exit "$failed"
