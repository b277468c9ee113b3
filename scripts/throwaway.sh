# SPDX-License-Identifier: BSD-3-Clause
# throwaway.sh - sourced by with-redis.sh and with-tls-redis.sh (bash): what
# they start is stopped by its pid, and their directory removed, on exit, INT
# and TERM, also on failure. The caller sets `dir` (its mktemp -d directory)
# and appends each server it starts to `servers`; `throwaway_run CMD...` runs
# CMD, stops everything and exits with CMD's status.

servers=() # pids of the servers started, each stopped by throwaway_cleanup
cmd_pid="" # CMD's, while it runs

# Stops CMD, then every server: TERM, up to ~5 s each to exit, then KILL.
throwaway_cleanup() {
    if [ -n "$cmd_pid" ] && kill -0 "$cmd_pid" 2>/dev/null; then
        kill -TERM "$cmd_pid" 2>/dev/null
        wait "$cmd_pid" 2>/dev/null
    fi
    cmd_pid=""
    local p
    for p in ${servers[@]+"${servers[@]}"}; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in ${servers[@]+"${servers[@]}"}; do
        for _ in $(seq 1 50); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    servers=()
    if [ -n "${dir:-}" ]; then
        rm -rf "$dir"
    fi
}
trap throwaway_cleanup EXIT
trap 'throwaway_cleanup; trap - INT; kill -INT $$' INT
trap 'throwaway_cleanup; trap - TERM; kill -TERM $$' TERM

# Runs CMD in the background and waits for it, so that INT and TERM traps run
# at once (bash defers traps while a foreground child runs); <&0 keeps stdin.
throwaway_run() {
    "$@" <&0 &
    cmd_pid=$!
    wait "$cmd_pid"
    local status=$?
    cmd_pid=""
    throwaway_cleanup
    trap - EXIT
    exit "$status"
}
