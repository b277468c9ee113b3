#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# plots.sh OUT_DIR - the charts of `make bench`, from the .dat files run.sh
# leaves in OUT_DIR (run on its own to redraw them without re-measuring).
#
#   uncontended.dat  per thread count: label, then median min max of baseline
#                    cycles/s, rlock cycles/s, baseline p99 ms, rlock p99 ms
#   handoff-*.dat    percentile, ms (one line per sample percentile)
#   contention-threads.dat  thread, process, acquisitions
#   herd.dat         waiters, script calls per hand-off: median min max
#   watchdog.dat     locks, script calls per round, client CPU % of one core,
#                    client CPU ms per round, rounds measured
#
# Every chart: ticks with numbers on every axis, units in the labels, each
# target drawn and named in the key, min-max bars where there are rounds.
set -uo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
out=$1
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "gnuplot not found: no charts" >&2
    exit 0
fi

gnuplot 2>"$out/gnuplot.log" <<EOF || { echo "gnuplot failed: see $out/gnuplot.log" >&2; exit 1; }
set terminal pngcairo size 1100,520 font "sans,11" noenhanced
set grid xtics ytics
set key box opaque samplen 3
set style line 9 lc rgb "#d62728" dt 2 lw 2
set autoscale fix
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1

# ---- uncontended: two panels, both linear from zero ----------------------------
# The figures of one panel sit inside one decade: a linear axis from 0 shows
# them with numbered ticks and their true proportions. Targets (run.sh section
# 2) are short red dashed bars across each group: cycles/s at least 0.95x the
# baseline with 1 thread and 0.90x with 8; p99 at most 1.2x the baseline's
# with 1 thread (no p99 target with 8).
set output "$out/uncontended.png"
stats "$out/uncontended.dat" using 9 nooutput
p99_lo = STATS_min
stats "$out/uncontended.dat" using 12 nooutput
p99_lo = STATS_min < p99_lo ? STATS_min : p99_lo
stats "$out/uncontended.dat" using 10 nooutput
p99_hi = STATS_max
stats "$out/uncontended.dat" using 13 nooutput
p99_hi = STATS_max > p99_hi ? STATS_max : p99_hi
set terminal pngcairo size 1100,600 font "sans,11" noenhanced
set multiplot layout 1,2 title "Uncontended lock + unlock, rlock vs raw hiredis, one connection per client thread: median of the rounds, bars min to max"
set xrange [-0.5:1.5]
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0
unset xlabel
set key outside below center vertical Left reverse font ",10"
set ylabel "throughput, thousand cycles/s"
set format y "%g"
plot "$out/uncontended.dat" using (\$0-0.1):(\$2/1000):(\$3/1000):(\$4/1000):xtic(1) with yerrorbars pt 7 ps 1.3 lw 2 title "raw hiredis", \
     "" using (\$0+0.1):(\$5/1000):(\$6/1000):(\$7/1000) with yerrorbars pt 5 ps 1.3 lw 2 title "rlock", \
     "" using (\$0-0.25):((\$0 == 0 ? 0.95 : 0.90) * \$2/1000):(0.5):(0) with vectors nohead ls 9 \
        title "target for rlock: >= 0.95x raw (1 thread), >= 0.90x raw (8)"
# Linear when the p99s sit inside one decade (a log axis would have no
# numbered tick); a log axis with a tick at every 1-2-5 step when a loaded run
# spreads them wider, so the small ones are not squashed onto the floor.
set ylabel "p99 latency, ms"
if (p99_hi / p99_lo > 10) {
    set logscale y
    set yrange [p99_lo / 1.5:p99_hi * 1.5]
    set ytics ("0.01" 0.01, "0.02" 0.02, "0.05" 0.05, "0.1" 0.1, "0.2" 0.2, "0.5" 0.5, "1" 1, "2" 2, \
               "5" 5, "10" 10, "20" 20, "50" 50, "100" 100, "200" 200, "500" 500)
    set ylabel "p99 latency, ms (log scale)"
}
plot "$out/uncontended.dat" using (\$0-0.1):8:9:10:xtic(1) with yerrorbars pt 7 ps 1.3 lw 2 title "raw hiredis", \
     "" using (\$0+0.1):11:12:13 with yerrorbars pt 5 ps 1.3 lw 2 title "rlock", \
     "" using (\$0 == 0 ? \$0-0.25 : NaN):(1.2 * \$8):(0.5):(0) with vectors nohead ls 9 \
        title "target for rlock: <= 1.2x raw (1 thread; none with 8)"
unset multiplot
unset logscale y
set ytics autofreq
set key font ",11"
set terminal pngcairo size 1100,520 font "sans,11" noenhanced
set yrange [*:*]
set xrange [*:*]
set key inside top left vertical
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1

# ---- hand-off percentiles ------------------------------------------------------
# Percentiles on a "nines" axis: 90, 99, 99.9 equally spaced, so the tail gets
# as much room as the median. The latencies span decades: a log axis, with a
# numbered tick at every 1-2-5 step.
nines(p) = p >= 100 ? NaN : -log10(1 - p / 100.0)
set output "$out/handoff.png"
set title "Hand-off latency, unlock call to the waiter's return, by percentile (one run; every hand-off counted)"
set xlabel "percentile (each step to the right ten times rarer)"
set ylabel "latency, ms (log scale)"
set xtics ("10" nines(10), "50" nines(50), "90" nines(90), "99" nines(99), "99.9" nines(99.9), "99.99" nines(99.99))
set logscale y
set ytics ("0.01" 0.01, "0.02" 0.02, "0.05" 0.05, "0.1" 0.1, "0.2" 0.2, "0.5" 0.5, "1" 1, "2" 2, "5" 5, \
           "10" 10, "20" 20, "50" 50, "100" 100, "200" 200, "500" 500)
set key top left
plot "$out/handoff-process.dat" using (nines(\$1)):2 with lines lw 2 title "waiter in another process", \
     "$out/handoff-thread.dat" using (nines(\$1)):2 with lines lw 2 title "waiter in the same process", \
     "$out/handoff-floor.dat" using (nines(\$1)):2 with lines lw 2 dt 4 title "raw hiredis floor (another process)", \
     "< printf '50 0.25\n99 2\n'" using (nines(\$1)):2 with points pt 3 ps 2.5 lw 2 lc rgb "#d62728" \
         title "targets, another process: p50 <= 0.25 ms, p99 <= 2 ms"
unset logscale y
set xtics autofreq
set ytics autofreq

# ---- contention ------------------------------------------------------------------
set output "$out/contention.png"
set title "Contention: acquisitions per thread, 4 processes x 4 threads on one lock (no per-thread target)"
set style fill solid 0.7
set boxwidth 0.8
set xlabel "thread number (4 per process; colour = process)"
set ylabel "acquisitions in the run"
set offsets 0, 0, graph 0.1, 0
set yrange [0:*]
set xrange [-1:$(wc -l <"$out/contention-threads.dat")]
set xtics 0, 1, $(( $(wc -l <"$out/contention-threads.dat") - 1 ))
unset key
plot "$out/contention-threads.dat" using 2:3:(0.8):(\$1+1) with boxes lc variable
set yrange [*:*]
set xrange [*:*]
set xtics autofreq
set key inside top left vertical
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1

# ---- herd ------------------------------------------------------------------------
set output "$out/herd.png"
set title "Herd: script calls per hand-off vs threads waiting on one lock (median of the rounds, bars min to max)"
set logscale x
set xtics ("1" 1, "10" 10, "100" 100)
set xrange [0.7:150]
set yrange [0:*]
set offsets 0, 0, graph 0.15, 0
set xlabel "threads waiting in one process, W (log scale)"
set ylabel "EVALSHA + EVAL calls per hand-off"
plot "$out/herd.dat" using 1:2:3:4 with yerrorlines title "rlock" lw 2 pt 7, \
     3 title "target: at most 3" ls 9
unset logscale x
set xtics autofreq
set xrange [*:*]
set yrange [*:*]
set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1

# ---- watchdog: one panel per measure, each with its own target -------------------
set output "$out/watchdog.png"
stats "$out/watchdog.dat" using 3 nooutput
cpu_max = STATS_max
unset title
set multiplot layout 1,2 title "Watchdog renewal, watchdog_timeout 3000 ms (averages over the rounds of one window: no per-round spread)"
set logscale x
set xtics ("1 000" 1000, "10 000" 10000, "100 000" 100000)
set xrange [500:200000]
set offsets 0, 0, 0, 0
set xlabel "held locks (log scale)"
set key inside top left vertical
set logscale y
set ytics ("1" 1, "2" 2, "5" 5, "10" 10, "20" 20, "50" 50, "100" 100, "200" 200, "500" 500, "1 000" 1000, "2 000" 2000)
set yrange [0.5:3000]
set ylabel "script calls per renewal round (log scale)"
plot "$out/watchdog.dat" using 1:2 with linespoints lw 2 pt 7 title "rlock", \
     x / 100 ls 9 title "target: at most locks / 100"
unset logscale y
set ytics autofreq
set ylabel "client CPU, % of one core"
set yrange [0:(cpu_max > 5 ? cpu_max * 1.25 : 6.5)]
plot "$out/watchdog.dat" using 1:3 with linespoints lw 2 pt 5 lc rgb "#2ca02c" title "rlock, whole client process", \
     5 ls 9 title "target: at most 5 %"
unset multiplot
EOF
ls "$out"/*.png 2>/dev/null | sed 's/^/chart: /'
