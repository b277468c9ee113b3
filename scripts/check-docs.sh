#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-docs.sh [FILE...] - the docs name only what exists.
#
# Scans docs/**/*.md and README.md (in code spans, `...`, outside fenced code
# blocks: examples there are the reader's code) and the man pages docs/man/*
# (every line: troff has no code spans) for names of the library's own things:
#
#   - paths and file names ending in .c .h .sh .lua .md .java, bare
#     (`watchdog.c`), partial (`api/lock.c`, `kind/lua/prelude/x.lua`) or full
#     (`src/net/exec.c`): some file of the repository must end in that path
#     (a path with ../ or ./ is taken relative to the page that names it);
#   - `file.c:function`: the file as above, and the function named in it;
#   - identifiers rlock__foo, rlock_foo, RLOCK_FOO: the word must occur in
#     src/, include/, tools/, test/, examples/, scripts/ or the Makefile (an
#     identifier ending in * names a family: some word must begin with it).
#
# And, anywhere in those files: a markdown link to a relative path must lead to
# a file or directory (the #anchor is not checked); "design.md §N" or "design.md
# section N" -- there and in the code's comments too -- must name a page
# docs/design/NN-*.md.
#
# Not checked: absolute paths, paths under build/ (made by make), globs, and
# the names in ALLOW below. Lists every name not found and exits 1 if any.
#
# PENDING lists "file name" pairs known stale in files this change may not
# edit; they are printed as pending, not failures, so that the check stays
# green until they are fixed. Empty it as they are.
#
# check-docs.sh --self-test runs the check on a scratch page naming
# src/net/nonexistent.c and rlock__no_such_function and fails unless both are
# reported.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Names legitimately not in the tree: "name   reason". Keep it short.
ALLOW=(
    "app.c                          the reader's own program in the build commands"
    # Redisson's Java sources (org.redisson), which the docs compare with:
    "RedissonLock.java              Redisson's, not this repository's"
    "RedissonBaseLock.java          Redisson's"
    "RedissonFairLock.java          Redisson's"
    "RedissonFencedLock.java        Redisson's"
    "RedissonReadLock.java          Redisson's"
    "RedissonWriteLock.java         Redisson's"
    "RedissonReadWriteLock.java     Redisson's"
    "LockPubSub.java                Redisson's"
    "pubsub/LockPubSub.java         Redisson's"
    "PublishSubscribeService.java   Redisson's"
    "renewal/ReadLockTask.java      Redisson's"
)

# "file name" pairs: stale names in files owned by other work in progress
# (README.md, docs/operations.md, docs/redisson.md, docs/man/*). Fix the file,
# then remove its lines here.
PENDING=(
)

if [ "${1:-}" = "--self-test" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    printf '# scratch\n\nSee `src/net/nonexistent.c` and `rlock__no_such_function()`.\n' >"$tmp/page.md"
    if out=$("$0" "$tmp/page.md" 2>&1); then
        echo "check-docs self-test: a page naming two missing things passed" >&2
        exit 1
    fi
    for name in src/net/nonexistent.c rlock__no_such_function; do
        grep -q -- "$name" <<<"$out" || {
            echo "check-docs self-test: $name was not reported:" >&2
            echo "$out" >&2
            exit 1
        }
    done
    echo "check-docs self-test: a missing file and a missing identifier are caught"
    exit 0
fi

if [ $# -gt 0 ]; then
    files=("$@")
else
    mapfile -t files < <({ find docs -name '*.md'; echo README.md; find docs/man -type f; } | sort)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every file of the repository (tracked, or new and not ignored), one path a line.
git ls-files -co --exclude-standard | sort -u >"$tmp/paths"
# Every rlock_/RLOCK_ word of the code.
grep -rhoE --exclude=check-docs.sh '(rlock_|RLOCK_)[A-Za-z0-9_]*' src include tools test examples scripts Makefile 2>/dev/null \
    | sort -u >"$tmp/words"

# 1. The candidate names: "file:line<TAB>kind<TAB>name".
for f in "${files[@]}"; do
    case $f in
        *.md) man=0 ;;
        *) man=1 ;;
    esac
    awk -v file="$f" -v man="$man" '
    function emit(kind, name) { printf "%s:%d\t%s\t%s\n", file, FNR, kind, name }
    function scan(text,   n, i, w, rest, id) {
        n = split(text, ws, /[][ \t(),;"'"'"'=|!&+]+/)
        for (i = 1; i <= n; i++) {
            w = ws[i]
            sub(/[.:]+$/, "", w)
            if (w ~ /^[A-Za-z0-9_.\/-]+\.(c|h|sh|lua|md|java)(:[A-Za-z_][A-Za-z0-9_]*)?$/ &&
                w !~ /^\// && w !~ /^build\//) {
                emit("path", w)
                continue
            }
            rest = " " w
            while (match(rest, /[^A-Za-z0-9_](rlock_|RLOCK_)[A-Za-z0-9_]*\*?/)) {
                id = substr(rest, RSTART + 1, RLENGTH - 1)
                rest = substr(rest, RSTART + RLENGTH)
                emit("id", id)
            }
        }
    }
    man == 1 {
        line = $0
        if (line ~ /^\.\\"/) next                 # troff comment
        gsub(/\\f[BIRP]/, "", line); gsub(/\\-/, "-", line); gsub(/\\\(../, " ", line)
        gsub(/\\/, "", line)
        scan(line)
        next
    }
    /^[ \t]*```/ { fence = !fence; next }
    fence { next }
    {
        line = $0
        while (match(line, /`[^`]+`/)) {
            span = substr(line, RSTART + 1, RLENGTH - 2)
            line = substr(line, RSTART + RLENGTH)
            if (span ~ /:\/\//) continue           # a URL
            scan(span)
        }
    }' "$f"
done | sort -u >"$tmp/names"

# 2. Each name checked.
missing=0
pending=0
allowed() {
    local i
    for ((i = 0; i < ${#ALLOW[@]}; i++)); do
        [ "${ALLOW[$i]%% *}" = "$1" ] && return 0
    done
    return 1
}
is_pending() {
    local i
    for ((i = 0; i < ${#PENDING[@]}; i++)); do
        [ "${PENDING[$i]}" = "$1 $2" ] && return 0
    done
    return 1
}
find_path() { # path relative to the page's directory -> matching repository files
    local page_dir=$1 p=$2
    case $p in
        ./* | ../*) p=$(realpath -m --relative-to="$root" "$page_dir/$p") ;;
    esac
    awk -v p="$p" '$0 == p || substr($0, length($0) - length(p)) == "/" p' "$tmp/paths"
}
while IFS=$'\t' read -r where kind name; do
    file=${where%:*}
    problem=""
    if allowed "$name"; then continue; fi
    if [ "$kind" = path ]; then
        path=${name%%:*}
        func=""
        [ "$path" != "$name" ] && func=${name#*:}
        found=$(find_path "$(dirname "$file")" "$path")
        if [ -z "$found" ]; then
            problem="no such file"
        elif [ -n "$func" ]; then
            # shellcheck disable=SC2086
            grep -qw -- "$func" $found || problem="$func not in $path"
        fi
    else
        case $name in
            *\*) grep -q -- "^${name%\*}" "$tmp/words" || problem="no identifier begins so" ;;
            *) grep -qxF -- "$name" "$tmp/words" || problem="no such identifier in the code" ;;
        esac
    fi
    [ -z "$problem" ] && continue
    if is_pending "$file" "$name"; then
        echo "pending: $where: $name ($problem)"
        pending=$((pending + 1))
    else
        echo "$where: $name: $problem" >&2
        missing=$((missing + 1))
    fi
done <"$tmp/names"

# 3. Links, and "design.md §N" (the design is one page per section).
while IFS=: read -r file line target; do
    target=${target%%#*}
    [ -z "$target" ] && continue
    [ -e "$(dirname "$file")/$target" ] && continue
    echo "$file:$line: link to $target: no such file" >&2
    missing=$((missing + 1))
done < <(for f in "${files[@]}"; do
    case $f in *.md) ;; *) continue ;; esac
    grep -noE '\]\([^) ]+\)' "$f" | sed -E 's/^([0-9]+):\]\((.*)\)$/\1:\2/' |
        grep -vE '^[0-9]+:([a-z]+:|#)' | sed "s|^|$f:|"
done)
sections=$( { [ $# -gt 0 ] && printf '%s\n' "${files[@]}"; [ $# -eq 0 ] && printf '%s\n' "${files[@]}" src include scripts tools test examples Makefile; } |
    xargs grep -rHnoE 'design\.md,? *(§|section )[0-9]+' 2>/dev/null || true)
while IFS=: read -r file line ref; do
    [ -z "$file" ] && continue
    n=${ref##*[ §]}
    page=$(printf 'docs/design/%02d-' "$n")
    compgen -G "$page*.md" >/dev/null && continue
    echo "$file:$line: $ref: no page $page*.md" >&2
    missing=$((missing + 1))
done <<<"$sections"

if [ "$missing" -gt 0 ]; then
    echo "check-docs: $missing name(s) in the docs that the tree does not have" >&2
    exit 1
fi
echo "check-docs: ${#files[@]} files name only what exists ($pending pending)"
