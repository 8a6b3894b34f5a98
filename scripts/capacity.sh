#!/usr/bin/env bash
# The rates the capacity plan (docs/operations.md, "Capacity plan") is
# worked out from, measured in one run on one origin and one edge on this
# machine (both built without the race detector):
#
#   1. at the edge, per process: /healthz, new pre-open tickets signed, and
#      status answers per second (loadtest --scenario edge, the three taking
#      turns a second at a time, DURATION each);
#   2. at the origin: reservations per second of one hot sale
#      (loadtest --scenario hot, HOT_CLIENTS clients for HOT);
#   3. a rehearsal on Locust through the edge (scripts/rehearse.sh, USERS
#      shoppers for UNITS units on WORKERS workers): what a shopper costs
#      (requests), what a Locust worker does per CPU-second and holds per
#      shopper, and "sold out" heard p50/p99.
#
#   scripts/capacity.sh        DURATION=10s HOT=5s HOT_CLIENTS=128 USERS=10000 UNITS=1000 WORKERS=2
#
# ONLY=edge runs the first part alone.
#
# Uses $DATABASE_URL, else the development database (make devdb-up); the
# rehearsal's files in OUT (/tmp/flashline-capacity).
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
export DATABASE_URL="${DATABASE_URL:-$(bin/flashline devdb up)}"
export FLASHLINE_ADMIN_TOKEN=capacity-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=capacity-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=c1:capacity-waitroom-key-0123456789abcdef \
  FLASHLINE_PAYMENT_WEBHOOK_SECRET=capacity-payment-secret-0123456789abcdef
out=${OUT:-/tmp/flashline-capacity}
mkdir -p "$out"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up() { for _ in $(seq 200); do curl -fs "http://$1/healthz" >/dev/null 2>&1 && return; sleep 0.1; done; echo "capacity: $1 did not start" >&2; exit 2; }
pids=()
trap 'kill ${pids[*]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
origin=127.0.0.1:$(port) edge=127.0.0.1:$(port)
bin/flashline serve --addr "$origin" 2>"$out/origin.log" & pids+=($!)
up "$origin"
env -u DATABASE_URL bin/flashline serve --role edge --origin "http://$origin" --addr "$edge" 2>"$out/edge.log" & pids+=($!)
up "$edge"
echo "== $(date -u +%H:%M) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "== 1. the edge, per process: tickets and status answers against its /healthz (${DURATION:-10s} each)"
GOGC=400 bin/flashline-loadtest --quiet --scenario edge --target "http://$origin,http://$edge" --duration "${DURATION:-10s}" 2>&1
if [ "${ONLY:-}" = edge ]; then echo "== done $(date -u +%H:%M) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"; exit 0; fi
echo
echo "== 2. the origin: reservations of one hot sale (${HOT_CLIENTS:-128} clients, ${HOT:-5s})"
GOGC=400 bin/flashline-loadtest --quiet --scenario hot --target "http://$origin" --clients "${HOT_CLIENTS:-128}" --duration "${HOT:-5s}" 2>&1
echo
echo "== 3. a rehearsal on Locust through the edge: ${USERS:-10000} shoppers, ${UNITS:-1000} units, ${WORKERS:-2} workers"
"$py" scripts/rehearse/rehearse.py --target "http://$edge" --admin-target "http://$origin" \
  --users "${USERS:-10000}" --units "${UNITS:-1000}" --workers "${WORKERS:-2}" --out "$out" ${REHEARSE_ARGS:-}
echo "== done $(date -u +%H:%M) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
