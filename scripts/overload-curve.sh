#!/usr/bin/env bash
# Goodput under overload, with and without the admission limiter: one
# `flashline serve` with a small purchase pool, flooded open-loop at rising
# rates by `flashline loadtest --scenario overload`. Prints one line per run.
#
#   scripts/overload-curve.sh [rates...]      (default: 250 500 1000 2000 4000)
#
# Uses $DATABASE_URL, else the development database (make devdb-up).
set -euo pipefail
cd "$(dirname "$0")/.."
rates=("$@"); [ ${#rates[@]} -gt 0 ] || rates=(250 500 1000 2000 4000)
make -s build
export DATABASE_URL="${DATABASE_URL:-$(bin/flashline devdb up)}"
export FLASHLINE_ADMIN_TOKEN=curve-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=curve-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=c1:curve-waitroom-key-0123456789abcdef
addr=127.0.0.1:18181
pool=${POOL:-4}
duration=${DURATION:-8s}
printf '%-8s %-6s %10s %12s %10s %10s %12s\n' limiter rate sent/s reserved/s p99 healthz99 outcomes
for mode in on off; do
  flags=(--sale-pool-size "$pool" --no-workers --addr "$addr")
  [ "$mode" = off ] && flags+=(--no-shed)
  bin/flashline serve "${flags[@]}" 2>/tmp/overload-curve-serve.log &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  for rate in "${rates[@]}"; do
    out=$(bin/flashline loadtest --quiet --target "http://$addr" --scenario overload --rate "$rate" --duration "$duration" --stock 10000000 || true)
    sent=$(awk -F'  +' '/^throughput/{print $2}' <<<"$out" | awk '{print $1}')
    good=$(awk -F'  +' '/^successful reservations/{print $2}' <<<"$out" | sed 's/.*(\(.*\)\/s)/\1/')
    p99=$(awk -F'  +' '/^latency/{print $2}' <<<"$out" | awk -F' / ' '{print $3}')
    h99=$(awk -F'  +' '/^\/healthz/{print $2}' <<<"$out" | awk -F' / ' '{print $2}')
    outcomes=$(awk '/^  [0-9a-z]/{gsub(/^ +/,""); gsub(/ +/," "); printf "%s; ", $0}' <<<"$out")
    printf '%-8s %-6s %10s %12s %10s %10s  %s\n' "$mode" "$rate" "$sent" "$good" "$p99" "$h99" "$outcomes"
  done
  kill $pid; wait $pid 2>/dev/null || true
  trap - EXIT
done
