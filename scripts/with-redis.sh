#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# with-redis.sh CMD ARGS... - run CMD against a throwaway redis-server.
#
# Starts redis-server on 127.0.0.1 (only) on a free random port in 20000-60000,
# in a mktemp -d directory, with no persistence and DEBUG allowed from local
# connections; exports
#   RLOCK_TEST_URL=redis://127.0.0.1:PORT  RLOCK_TEST_PORT  RLOCK_TEST_REDIS_PID
# runs CMD, then stops the server and removes the directory (also on failure,
# INT and TERM). Exits with CMD's status.
#
# If RLOCK_TEST_URL is already set, CMD runs against that server instead and
# no server is started.
set -uo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi

if [ -n "${RLOCK_TEST_URL:-}" ]; then
    "$@"
    exit $?
fi

for tool in redis-server redis-cli; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "with-redis.sh: $tool not found (run scripts/deps.sh)" >&2
        exit 1
    fi
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/rlock-redis.XXXXXX") || exit 1
# shellcheck source=throwaway.sh
. "$(dirname "$0")/throwaway.sh" # stops the server by pid, removes $dir

# DEBUG from local connections: an option since 7.0 (6.2 allows DEBUG to everyone).
debug_opt=(--enable-debug-command local)
if redis-server --version | grep -q ' v=[1-6]\.'; then
    debug_opt=()
fi

started=0
for _ in $(seq 1 20); do
    port=$(( 20000 + RANDOM % 40001 ))
    redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
        --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
        --save "" --appendonly no "${debug_opt[@]}" \
        --daemonize no >/dev/null 2>&1 &
    pid=$!
    servers=("$pid")
    # Up to ~5 s for this port: PING must answer, and the server must be ours.
    for _ in $(seq 1 100); do
        if ! kill -0 "$pid" 2>/dev/null; then
            break # exited (port taken?): try another port
        fi
        if [ "$(redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null)" = "PONG" ]; then
            # Make sure the PONG came from our server, not one already there.
            if redis-cli -h 127.0.0.1 -p "$port" INFO server 2>/dev/null |
                tr -d '\r' | grep -qx "process_id:$pid"; then
                started=1
            fi
            break
        fi
        sleep 0.05
    done
    [ "$started" -eq 1 ] && break
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
    servers=()
done

if [ "$started" -ne 1 ]; then
    echo "with-redis.sh: could not start redis-server on a free port" >&2
    [ -f "$dir/redis.log" ] && tail -n 20 "$dir/redis.log" >&2
    exit 1
fi

export RLOCK_TEST_URL="redis://127.0.0.1:$port"
export RLOCK_TEST_PORT="$port"
export RLOCK_TEST_REDIS_PID="$pid"

throwaway_run "$@"
