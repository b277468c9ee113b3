#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check-install.sh - proves the install a user relies on: `make install` to a
# temporary PREFIX, then the README's examples (every C block with a main)
# built against that prefix four ways -- pkg-config shared, pkg-config static
# (--static), CMake's rlock::rlock and CMake's rlock::rlock_static (a tiny
# CMakeLists.txt of find_package(rlock CONFIG)) -- and run against a throwaway
# redis-server; rlock.pc gives a shared-library consumer no hiredis flags;
# the Makefile passes CPPFLAGS to every compile; the installed man pages
# render with `man -l` without warnings; the installed rlockctl's --help and
# `list` against that server; then `make uninstall` leaves the prefix empty of
# rlock files. Cleans up after itself, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
    echo "check-install: $*" >&2
    exit 1
}

# cmake for the CMake consumer, man-db for man -l (scripts/deps.sh is idempotent).
scripts/deps.sh cmake man-db

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

make --no-print-directory all >/dev/null
make --no-print-directory install PREFIX="$prefix" >/dev/null
grep -qx "prefix=$prefix" "$prefix/lib/pkgconfig/rlock.pc" || fail "rlock.pc does not name prefix=$prefix"

# rlock.h includes no hiredis header: a consumer of the shared library gets
# rlock's -I and nothing of hiredis (no -I, no -D); a static link still gets
# everything librlock.a's objects call.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cflags=$(pkg-config --cflags rlock | sed "s/ *$//")
[ "$cflags" = "-I$prefix/include" ] || fail "pkg-config --cflags rlock gives '$cflags', expected '-I$prefix/include'"
libs=$(pkg-config --libs rlock | sed "s/ *$//")
[ "$libs" = "-L$prefix/lib -lrlock" ] || fail "pkg-config --libs rlock gives '$libs', expected '-L$prefix/lib -lrlock'"
static_libs=$(pkg-config --static --libs rlock)
for lib in -lrlock -lhiredis -luuid -lssl -lcrypto -pthread; do
    case " $static_libs " in
    *" $lib "*) ;;
    *) fail "pkg-config --static --libs rlock gives '$static_libs', without $lib" ;;
    esac
done
echo "check-install: rlock.pc: --cflags '$cflags', --libs '$libs', --static --libs '$static_libs': OK"

# CPPFLAGS (Debian's -D_FORTIFY_SOURCE=2) reaches every compile of the library,
# rlockctl, the examples, the tests, the benches, the demo and the Redisson
# actor: make -n prints each command it would run; the compiles among them are
# those of $(CC) that name a .c file.
probe=-DRLOCK_CPPFLAGS_PROBE
cdir="$tmp/cppflags"
# shellcheck disable=SC2046
make --no-print-directory -B -n V=1 CC=rlock-probe-cc BUILD="$cdir" CPPFLAGS="$probe" all tools \
    "$cdir/demo" "$cdir/redisson/rlock_actor" $(for b in test/bench/*.c; do b=${b##*/}; echo "$cdir/bench/${b%.c}"; done) \
    2>/dev/null | grep -E '^rlock-probe-cc .*\.c( |$)' > "$tmp/compiles" || true
compiles=$(grep -c . "$tmp/compiles" || true)
missing=$(grep -v -c -- " $probe " "$tmp/compiles" || true)
[ "$compiles" -gt 0 ] || fail "make -n printed no compile commands"
[ "$missing" -eq 0 ] || fail "$missing of $compiles compile commands do not pass CPPFLAGS, e.g.: $(grep -v -m1 -- " $probe " "$tmp/compiles")"
echo "check-install: CPPFLAGS reaches all $compiles compile commands: OK"

# The README's C blocks, one file each (block1.c, block2.c, ...); the programs among them.
awk -v dir="$tmp" '/^```c$/ {on = 1; n++; next} /^```$/ {on = 0} on {print > (dir "/block" n ".c")}' README.md
examples=$(grep -l '^int main' "$tmp"/block*.c)
[ -n "$examples" ] || fail "README.md has no C block with a main"

# Whether $1 was linked with librlock.so (1) or has librlock.a's code in it (0).
links_librlock_so() {
    readelf -d "$1" | grep -q 'NEEDED.*librlock\.so'
}

# The hiredis a binary needs (its soname), which must be the one librlock.so was linked
# with: a static consumer linking the system's hiredis beside a librlock.a built for
# another would mix two ABIs.
hiredis_of() {
    readelf -d "$1" | sed -n 's/.*NEEDED.*\[\(libhiredis[^]]*\)\].*/\1/p'
}
hiredis=$(hiredis_of "$prefix/lib/librlock.so")
[ -n "$hiredis" ] || fail "librlock.so needs no libhiredis"

# CMake: one project building every example against each imported target, and
# asking for a version of another major, which the version file must refuse.
version=$(pkg-config --modversion rlock)
mkdir "$tmp/cmake"
{
    echo 'cmake_minimum_required(VERSION 3.13)'
    echo 'project(rlock_check_install C)'
    major=${version%%.*}
    minor=${version#*.}
    minor=${minor%%.*}
    # SameMajorVersion: neither the next major nor a newer minor of this one.
    for newer in "$((major + 1))" "$major.$((minor + 1))"; do
        echo "find_package(rlock $newer CONFIG QUIET)"
        echo 'if(rlock_FOUND)'
        echo "  message(FATAL_ERROR \"find_package(rlock $newer) found rlock \${rlock_VERSION}\")"
        echo 'endif()'
    done
    echo "find_package(rlock $version CONFIG REQUIRED)"
    echo "if(NOT rlock_VERSION STREQUAL \"$version\")"
    echo '  message(FATAL_ERROR "rlock_VERSION is ${rlock_VERSION}")'
    echo 'endif()'
    for example in $examples; do
        name=$(basename "${example%.c}")
        echo "add_executable(${name}_shared $example)"
        echo "target_link_libraries(${name}_shared PRIVATE rlock::rlock)"
        echo "add_executable(${name}_static $example)"
        echo "target_link_libraries(${name}_static PRIVATE rlock::rlock_static)"
    done
} > "$tmp/cmake/CMakeLists.txt"
cmake -S "$tmp/cmake" -B "$tmp/cmake/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; fail "cmake could not configure find_package(rlock CONFIG) against $prefix"; }
cmake --build "$tmp/cmake/build" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; fail "cmake could not build the README examples against $prefix"; }

binaries=()
for example in $examples; do
    name=$(basename "${example%.c}")
    # shellcheck disable=SC2046
    cc -o "$tmp/${name}_pc_shared" "$example" $(pkg-config --cflags --libs rlock) -Wl,-rpath,"$prefix/lib"
    # --static: the same flags with hiredis, uuid and pthread, and librlock.a by name (-l: takes
    # a file name) since -lrlock would pick the .so beside it; an -rpath for each -L (a
    # hiredis of its own prefix, make check-install LDFLAGS=-L...).
    # shellcheck disable=SC2046
    cc -o "$tmp/${name}_pc_static" "$example" $(pkg-config --static --cflags --libs rlock | sed 's/-lrlock /-l:librlock.a /') \
        $(pkg-config --static --libs-only-L rlock | sed 's/-L/-Wl,-rpath,/g')
    links_librlock_so "$tmp/${name}_pc_shared" || fail "${name}_pc_shared does not link librlock.so"
    links_librlock_so "$tmp/${name}_pc_static" && fail "${name}_pc_static links librlock.so"
    links_librlock_so "$tmp/cmake/build/${name}_shared" || fail "rlock::rlock did not link librlock.so"
    links_librlock_so "$tmp/cmake/build/${name}_static" && fail "rlock::rlock_static linked librlock.so"
    for binary in "$tmp/${name}_pc_static" "$tmp/cmake/build/${name}_static"; do
        [ "$(hiredis_of "$binary")" = "$hiredis" ] ||
            fail "${binary#"$tmp"/} needs '$(hiredis_of "$binary")', librlock.so was linked with $hiredis"
    done
    binaries+=("$tmp/${name}_pc_shared" "$tmp/${name}_pc_static"
               "$tmp/cmake/build/${name}_shared" "$tmp/cmake/build/${name}_static")
done
# shellcheck disable=SC2016
scripts/with-redis.sh sh -c 'for b in "$@"; do "$b" "$RLOCK_TEST_URL" || { echo "$b failed" >&2; exit 1; }; done' \
    sh "${binaries[@]}"
for binary in "${binaries[@]}"; do
    echo "check-install: README example ${binary#"$tmp"/} built against $prefix and ran: OK"
done

# The man pages: installed where man looks, no warnings from groff, and they render.
for page in man1/rlockctl.1 man3/rlock.3; do
    file="$prefix/share/man/$page"
    [ -f "$file" ] || fail "$file not installed"
    warnings=$(man -l --warnings -E UTF-8 "$file" 2>&1 >/dev/null) || fail "man -l $file failed: $warnings"
    [ -z "$warnings" ] || fail "man -l $file warns: $warnings"
    rendered=$(MANWIDTH=80 man -l -E UTF-8 "$file" 2>/dev/null)
    title=$(basename "${page%.*}")
    grep -q "^NAME" <<<"$rendered" || fail "man -l $file renders no NAME section"
    grep -q "^ *$title - " <<<"$rendered" || fail "man -l $file does not name $title"
    grep -q '@[A-Z_]*@' "$file" && fail "$file has a placeholder left: $(grep -o '@[A-Z_]*@' "$file" | head -1)"
    grep -q "rlock $version" <<<"$rendered" || fail "man -l $file does not say rlock $version"
done
# rlock.3 names only functions the header declares.
for fn in $(grep -o ':*rlock_[a-z_]*' "$prefix/share/man/man3/rlock.3" | grep -v '^:' | sort -u); do
    grep -q "RLOCK_EXTERN .*\b$fn(" "$prefix/include/rlock.h" ||
        grep -q "typedef struct $fn\b\|} $fn;" "$prefix/include/rlock.h" ||
        fail "rlock.3 names $fn, which rlock.h does not declare"
done
# rlockctl.1 is written from rlockctl --help: each command and option of the one is in the other.
rendered=$(MANWIDTH=200 man -l -E UTF-8 "$prefix/share/man/man1/rlockctl.1" 2>/dev/null)
for word in $("$prefix/bin/rlockctl" --help | sed -n 's/^  rlockctl \([a-z]*\).*/\1/p;s/^    \(--[a-z]*\).*/\1/p'); do
    grep -q -- "$word" <<<"$rendered" || fail "rlockctl --help has $word, rlockctl.1 does not"
done
echo "check-install: man -l renders rlockctl.1 and rlock.3 without warnings: OK"

"$prefix/bin/rlockctl" --help | grep -q '^EXIT STATUS' || fail "$prefix/bin/rlockctl --help has no EXIT STATUS section"
# An empty server: nothing matches, exit status 1 (0 would mean it listed something).
status=0
scripts/with-redis.sh sh -c '"$0" --url "$RLOCK_TEST_URL" list' "$prefix/bin/rlockctl" 2>/dev/null || status=$?
[ "$status" -eq 1 ] || fail "installed rlockctl list on an empty server exited $status, expected 1"
echo "check-install: $prefix/bin/rlockctl --help and list ran: OK"

make --no-print-directory uninstall PREFIX="$prefix" >/dev/null
left=$(find "$prefix" -type f -o -type l | grep -c . || true)
[ "$left" -eq 0 ] || fail "make uninstall left $left files in $prefix"
[ ! -e "$prefix/lib/cmake/rlock" ] || fail "make uninstall left $prefix/lib/cmake/rlock"
echo "check-install: make uninstall removed everything it installed: OK"
