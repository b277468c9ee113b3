#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# with-tls-redis.sh CMD ARGS... - run CMD against throwaway TLS redis-servers.
#
# In a mktemp -d directory it makes with openssl a CA of its own and, signed
# by it: a server certificate (CN localhost, SANs DNS:localhost and
# IP:127.0.0.1), one for the wrong name (wrong.example), one expired
# (-days -1), and a client certificate; and a second CA (another.pem) that
# signed none of them. Then it starts Debian's redis-server four times on
# 127.0.0.1, each on free random ports in 20000-32000:
#   main     --tls-port, and a plaintext --port too; ACL user alice/secret
#   wrong    --tls-port only, the wrong-name certificate
#   expired  --tls-port only, the expired certificate
#   mtls     --tls-port only, --tls-auth-clients yes (a client certificate required)
#   smaster, sreplica  a master and its replica, replicating over TLS
#   sentinel a TLS sentinel (tls-replication yes) watching "mymaster" (main) and
#            "failmaster" (smaster, for a failover, then a killed master: down
#            after 2 s)
#   cluster1..3  a TLS cluster (tls-cluster yes) of three masters, and cluster4 a
#            replica of the second (not with RLOCK_TLS_NO_CLUSTER set)
# With RLOCK_TLS_MAIN_ONLY set, only main is started (make bench's TLS rows:
# the others would cost seconds and cores for nothing).
# and exports
#   RLOCK_TLS_DIR (the certificates: ca.pem, another.pem, client.pem,
#   client.key), RLOCK_TLS_PORT, RLOCK_TLS_PLAIN_PORT, RLOCK_TLS_WRONG_PORT,
#   RLOCK_TLS_EXPIRED_PORT, RLOCK_TLS_MTLS_PORT, RLOCK_TLS_SENTINEL_PORT,
#   RLOCK_TLS_CLUSTER_PORT (a node of the cluster), RLOCK_TLS_CLUSTER_REPLICA_PORT
#   (the replica), RLOCK_TLS_FAIL_SERVERS ("PORT:PID PORT:PID": smaster and
#   sreplica, for a test to kill the one that is master)
# runs CMD, then stops the servers by pid and removes the directory (also on
# failure, INT and TERM). Exits with CMD's status.
set -uo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi
for tool in redis-server openssl; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "with-tls-redis.sh: $tool not found (run scripts/deps.sh)" >&2
        exit 1
    fi
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/rlock-tls.XXXXXX") || exit 1
# shellcheck source=throwaway.sh
. "$(dirname "$0")/throwaway.sh" # stops the servers by pid, removes $dir
conf=""

# ---- certificates --------------------------------------------------------------

ssl() { openssl "$@" >/dev/null 2>"$dir/openssl.err" || { cat "$dir/openssl.err" >&2; exit 1; }; }

# cert NAME CN SAN DAYS: a key and a certificate signed by the CA.
cert() {
    local name=$1 cn=$2 san=$3 days=$4
    ssl req -newkey rsa:2048 -nodes -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$cn"
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$san" >"$dir/$name.ext"
    ssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -out "$dir/$name.pem" -days "$days" -extfile "$dir/$name.ext"
}

ssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 30 \
    -subj "/CN=rlock test CA"
ssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/another.key" -out "$dir/another.pem" \
    -days 30 -subj "/CN=rlock another CA"
cert server localhost "DNS:localhost,IP:127.0.0.1" 30
cert wrong wrong.example "DNS:wrong.example" 30
# -days -1: notAfter a day before notBefore (now) -- expired, with no clock games.
cert expired localhost "DNS:localhost,IP:127.0.0.1" -1
cert client "rlock test client" "DNS:client.example" 30
chmod 600 "$dir"/*.key

# ---- servers -------------------------------------------------------------------

free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$(( 20000 + RANDOM % 12000 )) # below the ephemeral ports (32768-)
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# start NAME CERT PLAIN ARGS...: a TLS redis-server (and a plaintext port if PLAIN is
# 1); sets the globals tls_port and plain_port.
start() {
    local name=$1 crt=$2 plain=$3 started=0
    shift 3
    for _ in $(seq 1 10); do
        tls_port=$(free_port) || break
        plain_port=0
        if [ "$plain" -eq 1 ]; then
            plain_port=$(free_port) || break
        fi
        mkdir -p "$dir/$name"
        : >"$dir/$name/redis.log"
        redis-server ${conf:+"$conf"} --bind 127.0.0.1 --tls-port "$tls_port" --protected-mode yes \
            --tls-cert-file "$dir/$crt.pem" --tls-key-file "$dir/$crt.key" \
            --tls-ca-cert-file "$dir/ca.pem" --dir "$dir/$name" --logfile "$dir/$name/redis.log" \
            --save "" --appendonly no --daemonize no --port "$plain_port" "$@" >/dev/null 2>&1 &
        local pid=$!
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            if grep -qE "Ready to accept connections|\+monitor master" "$dir/$name/redis.log"; then
                started=1
                break
            fi
            sleep 0.05
        done
        if [ "$started" -eq 1 ]; then
            servers+=("$pid")
            return 0
        fi
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    echo "with-tls-redis.sh: could not start the $name redis-server" >&2
    tail -n 20 "$dir/$name/redis.log" >&2
    exit 1
}

start main server 1 --tls-auth-clients no \
    --user alice on '>secret' '~*' '&*' '+@all'
export RLOCK_TLS_PORT=$tls_port RLOCK_TLS_PLAIN_PORT=$plain_port
if [ -z "${RLOCK_TLS_MAIN_ONLY:-}" ]; then
start wrong wrong 0 --tls-auth-clients no
export RLOCK_TLS_WRONG_PORT=$tls_port
start expired expired 0 --tls-auth-clients no
export RLOCK_TLS_EXPIRED_PORT=$tls_port
start mtls server 0 --tls-auth-clients yes
export RLOCK_TLS_MTLS_PORT=$tls_port
# A sentinel over TLS (its own port, and tls-replication: TLS to the master it watches), the
# main server as its master "mymaster": it announces 127.0.0.1, verified against the IP SAN.
# A second master with a replica (replication over TLS), "failmaster", for a failover.
start smaster server 0 --tls-replication yes --tls-auth-clients no
smaster_port=$tls_port
RLOCK_TLS_FAIL_SERVERS="$tls_port:${servers[-1]}"
start sreplica server 0 --tls-replication yes --tls-auth-clients no \
    --replicaof 127.0.0.1 "$smaster_port"
export RLOCK_TLS_FAIL_SERVERS="$RLOCK_TLS_FAIL_SERVERS $tls_port:${servers[-1]}"
conf=$dir/sentinel.conf
{
    printf 'sentinel monitor mymaster 127.0.0.1 %s 1\n' "$RLOCK_TLS_PORT"
    printf 'sentinel down-after-milliseconds mymaster 5000\n'
    printf 'sentinel monitor failmaster 127.0.0.1 %s 1\n' "$smaster_port"
    printf 'sentinel down-after-milliseconds failmaster 2000\n'
} >"$conf"
start sentinel server 0 --sentinel --tls-replication yes --tls-auth-clients no
conf=
export RLOCK_TLS_SENTINEL_PORT=$tls_port

# A cluster of three masters over TLS (clients, and the bus: tls-cluster), slots given
# out by redis-cli --cluster create over TLS; CLUSTER SLOTS announces 127.0.0.1.
if [ -z "${RLOCK_TLS_NO_CLUSTER:-}" ]; then
    nodes=()
    for i in 1 2 3; do
        start "cluster$i" server 0 --cluster-enabled yes --tls-cluster yes --tls-replication yes \
            --cluster-port "$(free_port)" --cluster-config-file nodes.conf \
            --tls-auth-clients no --repl-diskless-sync-delay 0
        nodes+=("127.0.0.1:$tls_port")
    done
    cli=(redis-cli --tls --cacert "$dir/ca.pem")
    "${cli[@]}" --cluster create "${nodes[@]}" --cluster-yes >"$dir/cluster-create.log" 2>&1 ||
        { cat "$dir/cluster-create.log" >&2; exit 1; }
    for _ in $(seq 1 100); do
        ok=1
        for n in "${nodes[@]}"; do
            "${cli[@]}" -p "${n##*:}" cluster info 2>/dev/null | grep -q "cluster_state:ok" || ok=0
        done
        [ "$ok" -eq 1 ] && break
        sleep 0.1
    done
    [ "$ok" -eq 1 ] || { echo "with-tls-redis.sh: the TLS cluster is not ok" >&2; exit 1; }
    # A replica of the second master (replication and bus over TLS), for a failover; the
    # masters sync at once (repl-diskless-sync-delay 0).
    start cluster4 server 0 --cluster-enabled yes --tls-cluster yes --tls-replication yes \
        --cluster-port "$(free_port)" --cluster-config-file nodes.conf --tls-auth-clients no
    master_id=$("${cli[@]}" -p "${nodes[1]##*:}" cluster myid)
    "${cli[@]}" --cluster add-node "127.0.0.1:$tls_port" "${nodes[0]}" --cluster-slave \
        --cluster-master-id "$master_id" >"$dir/cluster-add.log" 2>&1 ||
        { cat "$dir/cluster-add.log" >&2; exit 1; }
    for _ in $(seq 1 100); do
        "${cli[@]}" -p "$tls_port" info replication 2>/dev/null | grep -q "master_link_status:up" &&
            "${cli[@]}" -p "$tls_port" cluster info 2>/dev/null | grep -q "cluster_state:ok" &&
            break
        sleep 0.1
    done
    "${cli[@]}" -p "$tls_port" info replication 2>/dev/null | grep -q "master_link_status:up" ||
        { echo "with-tls-redis.sh: the TLS cluster's replica is not in sync" >&2; exit 1; }
    export RLOCK_TLS_CLUSTER_PORT=${nodes[0]##*:} RLOCK_TLS_CLUSTER_REPLICA_PORT=$tls_port
fi
fi # RLOCK_TLS_MAIN_ONLY
export RLOCK_TLS_DIR=$dir

throwaway_run "$@"
