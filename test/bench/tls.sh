#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tls.sh BUILD_DIR OUT_FILE - make bench's TLS rows (run.sh section 13), run by
# run.sh under scripts/with-tls-redis.sh (RLOCK_TLS_MAIN_ONLY=1: its main
# server only, a TLS port and a plaintext port, certificates of its own).
#
# Writes one JSON line per program to OUT_FILE, each with "row" (its name
# in run.sh) and "cmd" (the command as run) added, as run.sh's run() does.
# Exit status 1 if a program failed. About 45 s (15 s with BENCH_QUICK=1).
set -uo pipefail

if [ "$#" -ne 2 ]; then
    echo "usage: $0 BUILD_DIR OUT_FILE" >&2
    exit 2
fi
bin=$1/bench
outfile=$2
: >"$outfile"
failed=0
ca=$RLOCK_TLS_DIR/ca.pem
url="rediss://127.0.0.1:$RLOCK_TLS_PORT?tls_ca=$ca"

# run NAME CMD...: CMD's last JSON line, with "row" and "cmd", into OUT_FILE.
results=$outfile
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    D=0.5 R=2 R2=1 N=300 K=10
else
    D=1 R=5 R2=2 N=2000 K=50
fi
tls=(--port "$RLOCK_TLS_PORT" --plain-port "$RLOCK_TLS_PLAIN_PORT" --ca "$ca")
run tlsc "$bin/bench_tls" cycles "${tls[@]}" -d $D -r $R
run tlshop "$bin/bench_rlock" handoff --url "$url" -n $N
run tlsfloor "$bin/bench_tls" handoff "${tls[@]}" -n $N -r $R2
run tlsmem "$bin/bench_tls" memory "${tls[@]}" -k $K
exit "$failed"
