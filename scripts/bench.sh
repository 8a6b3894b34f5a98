#!/usr/bin/env bash
# `make bench`: in one run on this machine, back to back,
#  1. PostgreSQL's per-request ceilings with pgbench (plain SQL in
#     scripts/pgbench/): one reservation per transaction on one hot stock row
#     at each client count, as the transaction flashline runs with
#     --max-batch 1 (reserve_tx.sql) and as one statement (reserve_cte.sql);
#     and the same transaction spread over 10,000 SKUs at 32 clients
#     (reserve_cold.sql): what PostgreSQL does per request with no hot row;
#     and the least a reservation must write (minimal.sql on
#     minimal_schema.sql: three tables, primary keys only, one statement) on
#     one hot row at each client count and over 10,000 SKUs at 32 clients;
#  2. flashline's `hot` scenario through HTTP on one hot SKU at the same
#     client counts, as a ratio to the better hot pgbench form and to the
#     10,000-SKU rate: with the defaults (one stock row, one batch in flight),
#     and with the SKU's stock spread over SPREAD rows (default 4) and as many
#     batches in flight (--batches-in-flight);
#  3. the answers that should cost what a route costs (`flashline-loadtest --scenario
#     no`, an in-process closed-loop generator over 64 keep-alive
#     connections): /healthz, a sold-out sale's reservations and waiting-room
#     status polls on the same instance, taking turns a second at a time, as
#     answers/s and ratios to /healthz;
#  4. the Go benchmarks of the hot code paths.
# Every pgbench form and every flashline run also reports what one
# reservation wrote: WAL bytes (pg_current_wal_lsn() before and after, after a
# CHECKPOINT) and heap rows inserted or updated (pg_stat_user_tables), each
# divided by the reservations made (scripts/pgbench/cost.sh).
#
#   CLIENTS="8 128" DURATION=15 scripts/bench.sh
#   SERVE_FLAGS="--batches-in-flight 2" BUCKETS=2 SPREAD=0 scripts/bench.sh
#   ONE=1 scripts/bench.sh     # also flashline with --max-batch 1
#   PIN=0 scripts/bench.sh     # everything shares every CPU
#
# Pinned (the default on the development cluster when taskset and two CPUs
# are there; PIN=0 turns it off, and a $DATABASE_URL server is never
# pinned): PostgreSQL and flashline serve run on CPU 0, pgbench and
# flashline-loadtest on CPU 1. Unpinned, the generators share the CPUs with
# what they measure, and they do not cost alike: pgbench sends a prepared
# statement, flashline-loadtest mints a customer token, writes an HTTP
# request and parses a JSON answer for each reservation (at 128 clients it
# used about a third of the machine's CPU, flashline serve 0.39 and
# PostgreSQL 0.19). Pinned, every form has the same one CPU to serve with,
# whatever its generator costs, as the overload curve is measured.
#
# The load generators, the service and PostgreSQL share this machine: compare
# figures within one run. Uses fresh databases flashline_bench (and
# flashline_bench_cold for the 10,000 SKUs) on
# $DATABASE_URL's server, else on the development cluster (started if needed;
# pgbench at 128 clients needs max_connections above 128, which the
# development cluster has).
set -euo pipefail
cd "$(dirname "$0")/.."
clients=(${CLIENTS:-1 8 32 128})
duration=${DURATION:-10}
buckets=${BUCKETS:-1}
serve_flags=(${SERVE_FLAGS:-})
make -s build
. scripts/pgbench/cost.sh

bindir=${FLASHLINE_PG_BINDIR:-}
if [ -z "$bindir" ] && command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/pgbench" ]; then bindir=$(pg_config --bindir); fi
if [ -z "$bindir" ]; then bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1); fi
[ -x "$bindir/pgbench" ] || { echo "bench: pgbench not found (set FLASHLINE_PG_BINDIR)" >&2; exit 1; }

gen=() srv=() pin=0
if [ "${PIN:-1}" != 0 ] && [ -z "${DATABASE_URL:-}" ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin=1 gen=(taskset -c 1) srv=(taskset -c 0)
fi
base=${DATABASE_URL:-$(bin/flashline devdb up 2>/dev/null)}
# pin_cluster CPUS: the development cluster's processes (its postmaster's
# children are forked with its affinity).
pin_cluster() {
  local pm
  pm=$(head -1 "${FLASHLINE_DEVDB_DIR:-.devdb}/data/postmaster.pid")
  for p in "$pm" $(pgrep -P "$pm"); do taskset -a -p -c "$1" "$p" >/dev/null 2>&1 || true; done
}
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  [ "$pin" = 1 ] && pin_cluster "0-$(( $(nproc) - 1 ))"
  true
}
trap cleanup EXIT
[ "$pin" = 1 ] && pin_cluster 0
admin_url=$(sed -E 's#/[^/?]*(\?|$)#/postgres\1#' <<<"$base")
bench_url=$(sed -E 's#/[^/?]*(\?|$)#/flashline_bench\1#' <<<"$base")
# The 10,000 cold SKUs live in a database of their own: in the service's,
# its sale cache would re-read them every second and its pacer scan them.
cold_url=$(sed -E 's#/[^/?]*(\?|$)#/flashline_bench_cold\1#' <<<"$base")
min_url=$(sed -E 's#/[^/?]*(\?|$)#/flashline_bench_min\1#' <<<"$base")
PGOPTIONS="-c client_min_messages=warning" "$bindir/psql" -q "$admin_url" \
  -c "DROP DATABASE IF EXISTS flashline_bench WITH (FORCE)" -c "CREATE DATABASE flashline_bench" \
  -c "DROP DATABASE IF EXISTS flashline_bench_cold WITH (FORCE)" -c "CREATE DATABASE flashline_bench_cold" \
  -c "DROP DATABASE IF EXISTS flashline_bench_min WITH (FORCE)" -c "CREATE DATABASE flashline_bench_min"
"$bindir/psql" -q -v ON_ERROR_STOP=1 "$min_url" -f scripts/pgbench/minimal_schema.sql
export FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef
DATABASE_URL=$cold_url bin/flashline migrate up >/dev/null
export DATABASE_URL=$bench_url
bin/flashline migrate up >/dev/null

new_sale() { bin/flashline sale create --sku "$1" --stock 100000000 2>/dev/null | sed -n 's/.*"saleId": "\([^"]*\)".*/\1/p'; }
# The 10,000 cold SKUs, as plain rows (a sale, its one stock row and its
# opening ledger row each), which is all reserve_cold.sql touches.
"$bindir/psql" -q "$cold_url" <<'SQL'
BEGIN;
INSERT INTO sales (sale_id, sku, state, initial_stock, per_customer_limit, reservation_ttl_seconds, draw_seed)
SELECT 'sale_cold_' || i, 'cold-' || i, 'open', 100000000, 1, 600, decode(repeat('00', 16), 'hex')
  FROM generate_series(1, 10000) i;
INSERT INTO stock (sale_id, bucket, quantity) SELECT 'sale_cold_' || i, 0, 100000000 FROM generate_series(1, 10000) i;
INSERT INTO stock_ledger (sale_id, bucket, delta, reason) SELECT 'sale_cold_' || i, 0, 100000000, 'initial' FROM generate_series(1, 10000) i;
COMMIT;
ANALYZE;
SQL

# pgbench clients script url [-D var=value ...]: tps, then WAL bytes and rows
# per reservation (every transaction of these scripts makes one).
pgbench() {
  local c=$1 script=$2 url=$3 out n tps
  shift 3
  cost_begin "$url"
  out=$("${gen[@]}" "$bindir/pgbench" -n -M prepared -c "$c" -j 2 -T "$duration" "$@" -f "$script" "$url" 2>/dev/null)
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
  n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  cost_end "$url" "${n:-0}"
  echo "${tps%.*} $cost_wal $cost_rows"
}
declare -A tx cte mhot http p99 batches one p99one sp p99sp wal rows
echo "bench: pgbench, ${duration}s per run" >&2
for c in "${clients[@]}"; do
  read -r tx[$c] wal[tx,$c] rows[tx,$c] <<<"$(pgbench "$c" scripts/pgbench/reserve_tx.sql "$bench_url" -D sale="$(new_sale "pgbench-tx-$c")")"
  read -r cte[$c] wal[cte,$c] rows[cte,$c] <<<"$(pgbench "$c" scripts/pgbench/reserve_cte.sql "$bench_url" -D sale="$(new_sale "pgbench-cte-$c")")"
  read -r mhot[$c] wal[mhot,$c] rows[mhot,$c] <<<"$(pgbench "$c" scripts/pgbench/minimal.sql "$min_url" -D skus=1)"
done
read -r cold wal[cold] rows[cold] <<<"$(pgbench 32 scripts/pgbench/reserve_cold.sql "$cold_url")"
read -r mcold wal[mcold] rows[mcold] <<<"$(pgbench 32 scripts/pgbench/minimal.sql "$min_url" -D skus=10000)"

# flashline through HTTP: coalescing (the default), and with ONE=1 again with
# --max-batch 1 (one transaction per reservation, the per-request design).
addr=127.0.0.1:18190
# The same SKU spread over $SPREAD stock rows with as many batches in flight
# (distinct rows, commits sharing an fsync) is printed beside it; SPREAD=0
# skips it.
spread=${SPREAD:-4}
modes=(coalesced)
[ "$spread" -gt 1 ] && modes+=(spread)
[ -n "${ONE:-}" ] && modes+=(one)
start_serve() {
  "${srv[@]}" bin/flashline serve --addr "$addr" --no-workers "$@" 2>>/tmp/flashline-bench-serve.log &
  pid=$!
  for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_serve() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
for mode in "${modes[@]}"; do
  flags=("${serve_flags[@]}") rows_=$buckets
  [ "$mode" = one ] && flags=(--max-batch 1)
  [ "$mode" = spread ] && flags=(--batches-in-flight "$spread") rows_=$spread
  echo "bench: flashline hot ($mode), ${duration}s per run" >&2
  for c in "${clients[@]}"; do
    # A serve per run: its connections close at the end, which reports
    # their row counters.
    start_serve "${flags[@]}"
    cost_begin "$bench_url"
    out=$("${gen[@]}" bin/flashline-loadtest --quiet --target "http://$addr" --scenario hot --clients "$c" --duration "${duration}s" --buckets "$rows_")
    stop_serve
    rate=$(sed -n 's/^successful reservations.*(\([0-9]*\)\/s).*/\1/p' <<<"$out")
    lat=$(awk -F/ '/^latency p50/ {gsub(/ /, "", $6); print $6}' <<<"$out")
    grep -q '^verified *ok' <<<"$out" || { echo "bench: the $mode run at $c clients did not verify:" >&2; echo "$out" >&2; exit 1; }
    cost_end "$bench_url" "$(sed -n 's/^successful reservations *\([0-9]*\) .*/\1/p' <<<"$out")"
    wal[$mode,$c]=$cost_wal rows[$mode,$c]=$cost_rows
    if [ "$mode" = coalesced ]; then
      http[$c]=$rate p99[$c]=$lat
      batches[$c]=$(sed -n 's/^reserve batches *mean \([0-9.]*\).*/\1/p' <<<"$out")
    elif [ "$mode" = spread ]; then
      sp[$c]=$rate p99sp[$c]=$lat
    else
      one[$c]=$rate p99one[$c]=$lat
    fi
  done
done

echo "bench: the \"no\" answers, ${duration}s per phase, a second at a time" >&2
start_serve "${serve_flags[@]}"
no=$("${gen[@]}" bin/flashline-loadtest --quiet --target "http://$addr" --scenario no --clients 64 --duration "${duration}s")
stop_serve
grep -q '^verified *ok' <<<"$no" || { echo "bench: the no scenario did not verify:" >&2; echo "$no" >&2; exit 1; }
healthz=$(sed -n 's#^/healthz answers/s *\([0-9]*\).*#\1#p' <<<"$no")
soldout=$(sed -n 's#^sold out answers/s *\([0-9]*\).*#\1#p' <<<"$no")
status=$(sed -n 's#^status poll answers/s *\([0-9]*\).*#\1#p' <<<"$no")

ratio() { awk "BEGIN{ if ($2 > 0) printf \"%.2fx\", $1/$2; else print \"-\" }"; }
echo
echo "flashline hot: one SKU ($buckets stock row(s)), serve ${serve_flags[*]:-(defaults)}; pgbench: one reservation per transaction; $([ "$pin" = 1 ] && echo "servers on CPU 0, generators on CPU 1" || echo "nothing pinned")"
printf '%-8s %13s %14s %14s %16s %10s %12s %12s %10s %11s' clients "pgbench tx/s" "pgbench cte/s" "minimal hot/s" "flashline http/s" "vs hot" "vs min hot" "vs 10k SKUs" "p99" "mean batch"
[ "$spread" -gt 1 ] && printf ' %18s %12s %10s' "$spread rows x $spread: http/s" "vs 10k SKUs" "p99"
[ -n "${ONE:-}" ] && printf ' %18s %14s' "one-per-tx http/s" "one-per-tx p99"
echo
for c in "${clients[@]}"; do
  best=$(( tx[$c] > cte[$c] ? tx[$c] : cte[$c] ))
  printf '%-8s %13s %14s %14s %16s %10s %12s %12s %10s %11s' "$c" "${tx[$c]}" "${cte[$c]}" "${mhot[$c]}" "${http[$c]}" \
    "$(ratio "${http[$c]}" "$best")" "$(ratio "${http[$c]}" "${mhot[$c]}")" "$(ratio "${http[$c]}" "$cold")" "${p99[$c]}" "${batches[$c]}"
  [ "$spread" -gt 1 ] && printf ' %18s %12s %10s' "${sp[$c]}" "$(ratio "${sp[$c]}" "$cold")" "${p99sp[$c]}"
  [ -n "${ONE:-}" ] && printf ' %18s %14s' "${one[$c]}" "${p99one[$c]}"
  echo
done
printf 'pgbench, the same transaction over 10,000 SKUs (no hot row), 32 clients: %s/s\n' "$cold"
printf 'pgbench, the minimal one-statement reservation over 10,000 SKUs, 32 clients: %s/s; flashline hot at %s clients: %s of it\n' \
  "$mcold" "${clients[-1]}" "$(ratio "${http[${clients[-1]}]}" "$mcold")"
echo
echo "what one reservation wrote: WAL bytes / heap rows inserted or updated, per reservation, at each client count"
printf '%-40s' "form"; for c in "${clients[@]}"; do printf ' %14s' "$c clients"; done; echo
form_row() { # label key
  printf '%-40s' "$1"; for c in "${clients[@]}"; do printf ' %14s' "${wal[$2,$c]:--} / ${rows[$2,$c]:--}"; done; echo
}
form_row "pgbench tx (full schema, hot row)" tx
form_row "pgbench cte (full schema, hot row)" cte
form_row "pgbench minimal (hot row)" mhot
for mode in "${modes[@]}"; do form_row "flashline http ($mode)" "$mode"; done
printf '%-40s %14s\n' "pgbench tx over 10,000 SKUs" "32: ${wal[cold]} / ${rows[cold]}"
printf '%-40s %14s\n' "pgbench minimal over 10,000 SKUs" "32: ${wal[mcold]} / ${rows[mcold]}"
echo
echo "the \"no\" answers on one instance, 64 keep-alive connections, closed loop (flashline-loadtest --scenario no)"
printf '%-34s %10s %8s\n' "" "answers/s" "ratio"
printf '%-34s %10s %8s\n' "GET /healthz" "$healthz" "1.00x"
printf '%-34s %10s %8s\n' "reservation in a sold-out sale" "$soldout" "$(ratio "$soldout" "$healthz")"
printf '%-34s %10s %8s\n' "waiting-room status poll" "$status" "$(ratio "$status" "$healthz")"
echo

if [ -z "${NO_GO_BENCH:-}" ]; then
  go test -run '^$' -bench . -benchmem ./loadshed/ ./waitroom/ ./internal/memo/
  go test -run '^$' -bench ReserveHotRow -benchtime 3s ./postgres/
fi
