#!/usr/bin/env bash
# The Redis gate, on and off, measured with `flashline loadtest` against one
# `flashline serve` (River workers off, so that the database's transaction
# count is the purchase path's): for each run, the reservations per second,
# p99, and PostgreSQL transactions per attempt (pg_stat_database, before
# and after the run).
#
#   scripts/gate-bench.sh                 DURATION=8s CLIENTS=128 POOL=8
#
#   hot        a sale with stock for the whole run: every attempt wins
#   sell-out   2,000 units for the same crowd: won, then sold out
#   sold-out   1 unit: nearly every attempt is a loser
#   crowd      the waiting-room scenario (2,000 customers, 200 units)
#
# Starts its own redis-server (no persistence) on a free loopback port.
# Uses $DATABASE_URL, else the development database (make devdb-up); psql
# reads the transaction counts.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
export DATABASE_URL="${DATABASE_URL:-$(bin/flashline devdb up)}"
export FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef
duration=${DURATION:-8s}
clients=${CLIENTS:-128}
pool=${POOL:-8}
addr=127.0.0.1:18183
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rdir=$(mktemp -d)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$rdir" >"$rdir/log" 2>&1 &
rpid=$!
spid=
trap 'kill $rpid ${spid:-} 2>/dev/null || true; rm -rf "$rdir"' EXIT
xacts() { psql -XAtq "$DATABASE_URL" -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"; }
bin/flashline serve --addr "$addr" --redis-url "redis://127.0.0.1:$rport/0" --no-workers --db-conns "$((pool + 10))" --sale-pool-size "$pool" 2>/tmp/gate-bench-serve.log &
spid=$!
for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
printf '%-9s %-6s %9s %12s %10s %8s %10s  %s\n' run gate attempts reserved/s p99 "pg tx" "tx/1k try" outcomes
for run in hot sell-out sold-out crowd; do
  for gate in none redis; do
    case $run in
      hot) args=(--scenario hot --stock 10000000 --clients "$clients" --duration "$duration") ;;
      sell-out) args=(--scenario hot --stock 2000 --clients "$clients" --duration "$duration") ;;
      sold-out) args=(--scenario hot --stock 1 --clients "$clients" --duration "$duration") ;;
      crowd) args=(--scenario crowd) ;;
    esac
    sleep 1.5; x0=$(xacts)
    out=$(GOGC=400 ${LOADGEN_PREFIX-nice -n 19} bin/flashline loadtest --quiet --target "http://$addr" --gate "$gate" "${args[@]}" 2>&1 || true)
    sleep 1.5; x1=$(xacts)   # the statistics reach pg_stat_database within a second
    tries=$(awk '/^requests/{print $2; exit}' <<<"$out")
    good=$(awk -F'  +' '/^successful reservations/{print $2}' <<<"$out" | sed 's/.*(\(.*\)\/s)/\1/')
    p99=$(awk -F'  +' '/^latency/{print $2}' <<<"$out" | awk -F' / ' '{print $3}')
    outcomes=$(awk '/^  [0-9a-z]/{gsub(/^ +/,""); gsub(/ +/," "); printf "%s; ", $0}' <<<"$out")
    tx=$(awk -v a="$x0" -v b="$x1" -v n="${tries:-0}" 'BEGIN{ if (n > 0) printf "%.1f", 1000*(b-a)/n; else print "-" }')
    printf '%-9s %-6s %9s %12s %10s %8s %10s  %s\n' "$run" "$gate" "${tries:--}" "${good:--}" "${p99:--}" "$((x1 - x0))" "$tx" "$outcomes"
    grep -q '^verified *ok' <<<"$out" || { echo "$out" | grep -E '^verified|error' >&2 || true; }
  done
done
