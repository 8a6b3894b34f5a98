#!/usr/bin/env bash
# What watching a sale's live page costs the database: one `flashline serve`
# (River workers on, as in production, so their own transactions are the
# baseline), one open waiting-room sale, and 0, 1 and PAGES (50) pages
# polling GET /admin/sales/{id}/live once a second, as the console's page
# does; for each, PostgreSQL's committed transactions per second over
# WINDOW seconds (20), from pg_stat_database before and after.
#
#   scripts/console-cost.sh                 PAGES=50 WINDOW=20
#   NO_WORKERS=1 scripts/console-cost.sh    serve --no-workers: no jobs' own
#                                           transactions around the pages'
#
# Uses $DATABASE_URL, else the development database (make devdb-up); psql
# reads the transaction counts.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
export DATABASE_URL="${DATABASE_URL:-$(bin/flashline devdb up)}"
export FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef
pages=${PAGES:-50}
window=${WINDOW:-20}
addr=127.0.0.1:18184
base="http://$addr"
auth="Authorization: Bearer $FLASHLINE_ADMIN_TOKEN"
spid=
pollers=()
stop_pollers() { for p in "${pollers[@]}"; do kill "$p" 2>/dev/null || true; done; pollers=(); }
trap 'stop_pollers; kill ${spid:-} 2>/dev/null || true' EXIT
xacts() { psql -XAtq "$DATABASE_URL" -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"; }
flags=()
if [ -n "${NO_WORKERS:-}" ]; then flags+=(--no-workers); fi
bin/flashline serve --addr "$addr" "${flags[@]}" 2>/tmp/console-cost-serve.log &
spid=$!
for _ in $(seq 100); do curl -fs "$base/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
sale=$(curl -fs -X POST "$base/admin/sales" -H "$auth" -H 'Content-Type: application/json' \
  -d '{"sku":"console-cost","initialStock":100,"admission":"waiting_room","confirmation":"customer"}' | sed 's/.*"saleId":"\([^"]*\)".*/\1/')
curl -fs -X POST "$base/admin/sales/$sale/open" -H "$auth" >/dev/null
printf '%-6s %8s %10s %10s\n' pages seconds "pg tx" "tx/s"
for n in 0 1 "$pages"; do
  for _ in $(seq "$n"); do
    (while :; do curl -fs -o /dev/null -H "$auth" "$base/admin/sales/$sale/live" || true; sleep 1; done) &
    pollers+=($!)
  done
  sleep 3 # the pages settle, the statistics of the previous run are reported
  before=$(xacts); t0=$(date +%s.%N)
  sleep "$window"
  after=$(xacts); t1=$(date +%s.%N)
  stop_pollers
  python3 -c "import sys; n,b,a,t0,t1=sys.argv[1:]; d=float(t1)-float(t0); print('%-6s %8.1f %10d %10.2f' % (n, d, int(a)-int(b), (int(a)-int(b))/d))" "$n" "$before" "$after" "$t0" "$t1"
done
snapshots=$(curl -fs -H "$auth" "$base/metrics" | awk '/^flashline_console_snapshots_total/ {print $2}')
echo "snapshots read by the console in all: $snapshots"
