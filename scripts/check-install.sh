#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-install.sh - proves the install a user relies on: `make install` to a
# temporary PREFIX, then the README's examples (every C block with a main)
# built with pkg-config against that prefix and run against a throwaway
# redis-server, and the installed rlockctl's --help and `list` against that
# server; then
# `make uninstall` leaves the prefix empty of rlock files. Cleans up after
# itself, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

make --no-print-directory all >/dev/null
make --no-print-directory install PREFIX="$prefix" >/dev/null
grep -qx "prefix=$prefix" "$prefix/lib/pkgconfig/rlock.pc" || {
    echo "check-install: rlock.pc does not name prefix=$prefix" >&2
    exit 1
}

# The README's C blocks, one file each (block1.c, block2.c, ...); the programs among them.
awk -v dir="$tmp" '/^```c$/ {on = 1; n++; next} /^```$/ {on = 0} on {print > (dir "/block" n ".c")}' README.md
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
for example in $(grep -l '^int main' "$tmp"/block*.c); do
    # shellcheck disable=SC2046
    cc -o "${example%.c}" "$example" $(pkg-config --cflags --libs rlock) -Wl,-rpath,"$prefix/lib"
    scripts/with-redis.sh sh -c '"$0" "$RLOCK_TEST_URL"' "${example%.c}"
    echo "check-install: README example $(basename "$example") built with pkg-config against $prefix and ran: OK"
done

"$prefix/bin/rlockctl" --help | grep -q '^EXIT STATUS' || {
    echo "check-install: $prefix/bin/rlockctl --help has no EXIT STATUS section" >&2
    exit 1
}
# An empty server: nothing matches, exit status 1 (0 would mean it listed something).
status=0
scripts/with-redis.sh sh -c '"$0" --url "$RLOCK_TEST_URL" list' "$prefix/bin/rlockctl" 2>/dev/null || status=$?
if [ "$status" -ne 1 ]; then
    echo "check-install: installed rlockctl list on an empty server exited $status, expected 1" >&2
    exit 1
fi
echo "check-install: $prefix/bin/rlockctl --help and list ran: OK"

make --no-print-directory uninstall PREFIX="$prefix" >/dev/null
left=$(find "$prefix" -type f -o -type l | grep -c . || true)
if [ "$left" -ne 0 ]; then
    echo "check-install: make uninstall left $left files in $prefix" >&2
    exit 1
fi
echo "check-install: make uninstall removed everything it installed: OK"
