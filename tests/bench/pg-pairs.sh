#!/usr/bin/env bash
# Same-window throughput of several leaseholdd builds on PostgreSQL
# (BENCHMARKS.md, "PostgreSQL: one and several replicas"): for each round, for each
# build, a fresh database on one throwaway cluster, REPLICAS replicas of that
# build on it, and leasehold-bench spreading its connections over them.
#
#   tests/bench/pg-pairs.sh ROUNDS REPLICAS SCENARIOS BIN...
#   e.g. tests/bench/pg-pairs.sh 3 2 healthz,checkout,heartbeat \
#            /tmp/base/leaseholdd target/release/leaseholdd
#
# Needs root (the cluster runs as user postgres), PostgreSQL 15's binaries
# and a release leasehold-bench (BENCH, default target/release/). Prints
# one line per scenario and run; JSON results go to OUT (default a temp dir).
set -euo pipefail
rounds=$1 replicas=$2 scenarios=$3
shift 3
bins=("$@")
bench=${BENCH:-target/release/leasehold-bench}
pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
work=$(mktemp -d)
out=${OUT:-$work/out}
mkdir -p "$out"
chown postgres "$work"
port=55433
runuser -u postgres -- "$pg/initdb" --auth=trust -U postgres -D "$work/data" >/dev/null
runuser -u postgres -- "$pg/pg_ctl" -D "$work/data" -l "$work/pg.log" -w \
  -o "-p $port -k $work -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  runuser -u postgres -- "$pg/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$bench" --print-licenses >"$work/licenses.toml"
export LEASEHOLD_ADMIN_TOKEN=bench-admin-token-0123456789
db_pid=$(head -1 "$work/data/postmaster.pid")

for round in $(seq 1 "$rounds"); do
  for i in "${!bins[@]}"; do
    bin=${bins[$i]}
    db=lh_${round}_$i
    runuser -u postgres -- "$pg/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db"
    data=$(mktemp -d)
    urls=() pids=()
    for r in $(seq 1 "$replicas"); do
      log=$work/replica-$round-$i-$r.log
      "$bin" --database "postgres://postgres@127.0.0.1:$port/$db" --data-dir "$data" \
        --licenses "$work/licenses.toml" --listen 127.0.0.1:0 >"$log" 2>&1 &
      pids+=($!)
      for _ in $(seq 100); do
        addr=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | awk '{print $3}') || true
        [ -n "${addr:-}" ] && break
        sleep 0.1
      done
      [ -n "${addr:-}" ] || { cat "$log"; exit 1; }
      urls+=("$addr")
      addr=
    done
    server=$(IFS=,; echo "${urls[*]}")
    server_pids=$(IFS=,; echo "${pids[*]}")
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$bench" --server "$server" --server-pid "$server_pids" --db-pid "$db_pid" \
      --scenario "$scenarios" --warmup 1s --duration 5s \
      --json "$out/r$round-b$i.json" >"$out/r$round-b$i.txt" 2>&1
    echo "== round $round build $i ($bin) replicas $replicas load $load"
    grep -E '^\s*(healthz|checkout|heartbeat|mixed)\b|database|store-writer' "$out/r$round-b$i.txt" || cat "$out/r$round-b$i.txt"
    for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
    pids=()
    rm -rf "$data"
  done
done
echo "results in $out"
