#!/usr/bin/env bash
# `make bench`: in one run on this machine, the ceiling of one reservation
# per transaction on one hot stock row (pgbench, plain SQL in scripts/pgbench/)
# and flashline's own `hot` scenario through HTTP, at the same client counts,
# with the ratio; then the Go benchmarks of the hot code paths.
#
#   CLIENTS="8 128" DURATION=15 scripts/bench.sh
#
# Uses a fresh database flashline_bench on $DATABASE_URL's server, else on the
# development cluster (started if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
clients=(${CLIENTS:-8 32 128})
duration=${DURATION:-15}
make -s build

bindir=${FLASHLINE_PG_BINDIR:-}
if [ -z "$bindir" ] && command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/pgbench" ]; then bindir=$(pg_config --bindir); fi
if [ -z "$bindir" ]; then bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1); fi
[ -x "$bindir/pgbench" ] || { echo "bench: pgbench not found (set FLASHLINE_PG_BINDIR)" >&2; exit 1; }

base=${DATABASE_URL:-$(bin/flashline devdb up 2>/dev/null)}
admin_url=$(sed -E 's#/[^/?]*(\?|$)#/postgres\1#' <<<"$base")
bench_url=$(sed -E 's#/[^/?]*(\?|$)#/flashline_bench\1#' <<<"$base")
"$bindir/psql" -q "$admin_url" -c "DROP DATABASE IF EXISTS flashline_bench WITH (FORCE)" -c "CREATE DATABASE flashline_bench"
export DATABASE_URL=$bench_url FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef
bin/flashline migrate up >/dev/null

new_sale() { bin/flashline sale create --sku "$1" --stock 100000000 2>/dev/null | sed -n 's/.*"saleId": "\([^"]*\)".*/\1/p'; }

declare -A tx cte http
for c in "${clients[@]}"; do
  for form in tx cte; do
    sale=$(new_sale "pgbench-$form-$c")
    tps=$("$bindir/pgbench" -n -M prepared -c "$c" -j 2 -T "$duration" -D sale="$sale" \
          -f "scripts/pgbench/reserve_$form.sql" "$bench_url" 2>/dev/null |
          sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    if [ "$form" = tx ]; then tx[$c]=${tps%.*}; else cte[$c]=${tps%.*}; fi
  done
done

# flashline through HTTP, twice: coalescing (the default) and --max-batch 1
# (one transaction per reservation, the per-request design) for its p99.
addr=127.0.0.1:18190
declare -A p99 p99one one batches
hot() { # clients
  bin/flashline loadtest --quiet --target "http://$addr" --scenario hot --clients "$1" --duration "${duration}s"
}
for mode in coalesced one; do
  flags=()
  [ "$mode" = one ] && flags=(--max-batch 1)
  bin/flashline serve --addr "$addr" --no-workers "${flags[@]}" 2>>/tmp/flashline-bench-serve.log &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  for c in "${clients[@]}"; do
    out=$(hot "$c")
    rate=$(sed -n 's/^successful reservations.*(\([0-9]*\)\/s).*/\1/p' <<<"$out")
    lat=$(awk -F/ '/^latency p50/ {gsub(/ /, "", $6); print $6}' <<<"$out")
    grep -q '^verified *ok' <<<"$out" || { echo "bench: the $mode run at $c clients did not verify:" >&2; echo "$out" >&2; exit 1; }
    if [ "$mode" = coalesced ]; then
      http[$c]=$rate p99[$c]=$lat
      batches[$c]=$(sed -n 's/^reserve batches *\(mean [0-9.]*\).*/\1/p' <<<"$out")
    else
      one[$c]=$rate p99one[$c]=$lat
    fi
  done
  kill $pid; wait $pid 2>/dev/null || true; trap - EXIT
done

best_any=0
for c in "${clients[@]}"; do
  for v in "${tx[$c]}" "${cte[$c]}"; do [ "$v" -gt "$best_any" ] && best_any=$v; done
done
printf '\n%-8s %13s %14s %16s %8s %12s %18s %16s %12s\n' clients "pgbench tx/s" "pgbench cte/s" "flashline http/s" ratio "p99" "one-per-tx http/s" "one-per-tx p99" "batch size"
for c in "${clients[@]}"; do
  best=$(( tx[$c] > cte[$c] ? tx[$c] : cte[$c] ))
  printf '%-8s %13s %14s %16s %7.2fx %12s %18s %16s %12s\n' "$c" "${tx[$c]}" "${cte[$c]}" "${http[$c]}" \
    "$(awk "BEGIN{print ${http[$c]}/$best}")" "${p99[$c]}" "${one[$c]}" "${p99one[$c]}" "${batches[$c]}"
done
printf 'best per-request rate pgbench reached at any client count: %s/s\n\n' "$best_any"

go test -run '^$' -bench . -benchmem ./loadshed/ ./waitroom/
go test -run '^$' -bench ReserveHotRow -benchtime 3s ./postgres/
