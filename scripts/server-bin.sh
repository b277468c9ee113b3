#!/usr/bin/env bash
# server-bin.sh SERVER DIR - make DIR a bin directory whose redis-server and
# redis-sentinel are SERVER (a redis-server or valkey-server binary: sentinel
# mode follows from the name it is run by) and whose redis-cli is the cli
# beside SERVER (redis-cli or valkey-cli), else the one in PATH. The tests find
# their servers in PATH by those names: `make test REDIS_SERVER=...` puts DIR
# first in PATH.
set -euo pipefail
server=${1:?usage: server-bin.sh SERVER DIR}
dir=${2:?usage: server-bin.sh SERVER DIR}
case $server in */*) ;; *) server=$(command -v "$server") || { echo "server-bin.sh: $1 not found" >&2; exit 1; } ;; esac
[ -x "$server" ] || { echo "server-bin.sh: $server is not an executable" >&2; exit 1; }
server=$(cd "$(dirname "$server")" && pwd)/$(basename "$server")
cli=""
for name in redis-cli valkey-cli; do
    [ -x "$(dirname "$server")/$name" ] && { cli=$(dirname "$server")/$name; break; }
done
[ -n "$cli" ] || cli=$(command -v redis-cli) || { echo "server-bin.sh: no redis-cli beside $server nor in PATH" >&2; exit 1; }
mkdir -p "$dir"
ln -sfn "$server" "$dir/redis-server"
ln -sfn "$server" "$dir/redis-sentinel"
ln -sfn "$cli" "$dir/redis-cli"
echo "server-bin.sh: tests use $("$dir/redis-server" --version | head -1)" >&2
