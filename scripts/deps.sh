#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# deps.sh [PACKAGE...] - install the Debian packages rlock needs to build and
# test, plus any PACKAGEs named (make test-redisson adds Java and Maven).
#
# Idempotent: asks dpkg-query which packages are missing and installs only
# those (one apt-get update, one apt-get install). Prints nothing when every
# package is already installed.
set -euo pipefail

PACKAGES=(
    build-essential
    pkg-config
    libhiredis-dev
    uuid-dev
    libssl-dev
    openssl
    redis-server
    redis-tools
    redis-sentinel
    libcmocka-dev
    valgrind
    cppcheck
    lua5.1
    gnuplot-nox
    jq
    "$@"
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [ "$status" != "installed" ]; then
        missing+=("$pkg")
    fi
done

[ "${#missing[@]}" -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps.sh: missing packages: ${missing[*]}; apt-get not found, install them by hand" >&2
    exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "deps.sh: missing packages: ${missing[*]}; not root and no sudo, install them by hand" >&2
        exit 1
    fi
fi

echo "deps.sh: installing ${missing[*]}"
${SUDO[@]+"${SUDO[@]}"} apt-get update -qq
${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
