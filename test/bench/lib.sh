# SPDX-License-Identifier: BSD-3-Clause
# lib.sh - sourced (bash) by the bench drivers, test/bench/run.sh and tls.sh
# and test/redisson/bench.sh: running a benchmark program and keeping its JSON
# line, and reading and judging its figures. The caller sets `results` (the
# file every kept line is appended to) and `failed` (set to 1 here when a
# program fails).

# record NAME LINE CMD: LINE (one JSON object) with "row":NAME and "cmd":CMD
# added, appended to $results and stored in the variable NAME.
record() {
    local name=$1 line=$2 cmd
    cmd=$(printf '%s' "$3" | sed 's/\\/\\\\/g; s/"/\\"/g')
    line="${line%\}},\"row\":\"$name\",\"cmd\":\"$cmd\"}"
    printf '%s\n' "$line" >>"$results"
    printf -v "$name" '%s' "$line"
}

# run NAME CMD...: runs CMD (its progress on stderr) and records its last JSON
# line; a CMD that fails or prints none sets failed=1, and with no line
# {"bench":NAME,"failed":1} is recorded in its place.
run() {
    local name=$1
    shift
    echo "\$ $*" >&2
    local line
    line=$("$@" | grep '^{' | tail -n 1)
    local status=${PIPESTATUS[0]}
    if [ "$status" -ne 0 ] || [ -z "$line" ]; then
        echo "$(basename "$0"): FAILED (exit $status): $*" >&2
        failed=1
    fi
    [ -z "$line" ] && line='{"bench":"'"$name"'","failed":1}'
    record "$name" "$line" "$*"
}

# get JSON KEY: the value of KEY in a flat JSON object (strings unquoted).
get() {
    printf '%s\n' "$1" | sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" | tr -d '"'
}

cmd_of() { get "$1" cmd; }

# fmt VALUE: a number with sensible precision and its thousands set apart
# ("32 636"), or "-".
fmt() {
    awk -v v="$1" 'BEGIN {
        if (v == "" || v == "null" || v == "NaN") { print "-"; exit }
        if (v == "nan" || v == "-nan") { print "n/a"; exit }
        a = v < 0 ? -v : v
        if (v == int(v) && v !~ /\./ || a >= 1000) s = sprintf("%.0f", v)
        else if (a >= 10) s = sprintf("%.1f", v)
        else if (a >= 0.1) s = sprintf("%.3f", v)
        else s = sprintf("%.4f", v)
        i = index(s, "."); w = i ? substr(s, 1, i - 1) : s; f = i ? substr(s, i) : ""
        while (match(w, /[0-9][0-9][0-9][0-9]$/) || match(w, /[0-9][0-9][0-9][0-9] /))
            w = substr(w, 1, RSTART) " " substr(w, RSTART + 1)
        print w f }'
}

# ratio A B: A / B to three places, or "" when either is missing or B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print ""; else printf "%.3f\n", a / b }'; }

# verdict VALUE OP LIMIT: "ok", or "MISS" and by how much, so the row says
# why (OP is <= or >=); "" when VALUE is empty.
verdict() {
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
        if (v == "" || v == "null") { print ""; exit }
        v += 0; l += 0
        if (op == "<=" ? v <= l : v >= l) { print "ok"; exit }
        side = op == "<=" ? "above" : "below"
        if (l == 0) { printf "MISS: %s, not %s\n", v, op " 0"; exit }
        d = (v - l) / l * 100; if (d < 0) d = -d
        printf "MISS: %.0f %% %s the target\n", d < 1 ? 1 : d, side }'
}
