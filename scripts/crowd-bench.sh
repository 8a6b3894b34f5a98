#!/usr/bin/env bash
# The waiting room's pace against the purchase path's, measured with
# `flashline-loadtest` against two `flashline serve` processes on this
# machine: first the hot scenario (reservations per second the path sells,
# no waiting room), then the crowd scenario (CLIENTS customers through a
# waiting room of STOCK units): when the last unit sold after the open,
# admissions per second, and the purchase batches' mean size. Compare the
# two within one run: the crowd's STOCK units at the hot rate would take
# STOCK / rate seconds.
#
#   scripts/crowd-bench.sh            CLIENTS=10000 STOCK=1000 HOT=5s HOT_CLIENTS=128
#
# EDGES=n runs one origin (serve --role origin) and n edges (serve --role
# edge, no database) instead: the hot scenario against the origin, the crowd
# through the edges (its admin requests to the origin).
#
# SERVE_BIN runs another build's serve (e.g. the one before a change); the
# load generator is always this one's. SAMPLER=cmd runs `cmd ADDR` beside
# each instance (its output in $LOG-sample-ADDR.txt); METRICS_OUT=prefix
# keeps each instance's /metrics at the end.
# Uses $DATABASE_URL, else the development database (make devdb-up).
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
serve=${SERVE_BIN:-bin/flashline}
export DATABASE_URL="${DATABASE_URL:-$(bin/flashline devdb up)}"
export FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef
clients=${CLIENTS:-10000}
stock=${STOCK:-1000}
hot=${HOT:-5s}
hot_clients=${HOT_CLIENTS:-128}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
a1=127.0.0.1:$(port) a2=127.0.0.1:$(port)
pids=()
trap 'kill ${pids[*]:-} 2>/dev/null || true' EXIT
log=${LOG:-/tmp/crowd-bench}
up() { for _ in $(seq 100); do curl -fs "http://$1/healthz" >/dev/null 2>&1 && return; sleep 0.1; done; }
crowd_targets=() admin_target=()
if [ -n "${EDGES:-}" ]; then
  $serve serve --role origin --addr "$a1" 2>"$log-origin.log" & pids+=($!)
  up "$a1"
  targets="http://$a1" a2=
  admin_target=(--admin-target "http://$a1")
  for i in $(seq "$EDGES"); do
    e=127.0.0.1:$(port)
    env -u DATABASE_URL $serve serve --role edge --origin "http://$a1" --addr "$e" 2>"$log-edge-$i.log" & pids+=($!)
    up "$e"
    crowd_targets+=("http://$e")
  done
  crowd=$(IFS=,; echo "${crowd_targets[*]}")
else
  $serve serve --addr "$a1" 2>"$log-1.log" & pids+=($!)
  $serve serve --addr "$a2" 2>"$log-2.log" & pids+=($!)
  up "$a1"; up "$a2"
  targets="http://$a1,http://$a2"
  crowd=$targets
fi
if [ -n "${SAMPLER:-}" ]; then for a in "$a1" ${a2:+"$a2"}; do $SAMPLER "$a" >"$log-sample-$a.txt" 2>&1 & pids+=($!); done; fi
echo "== hot: $hot_clients clients for $hot"
GOGC=400 bin/flashline-loadtest --quiet --target "$targets" --scenario hot --clients "$hot_clients" --duration "$hot" 2>&1
echo
echo "== crowd: $clients customers, $stock units"
GOGC=400 bin/flashline-loadtest --quiet --target "$crowd" ${admin_target[@]+"${admin_target[@]}"} --scenario crowd --clients "$clients" --stock "$stock" ${CROWD_ARGS:-} 2>&1
if [ -n "${METRICS_OUT:-}" ]; then
  for a in "$a1" ${a2:+"$a2"}; do curl -s -H "Authorization: Bearer $FLASHLINE_ADMIN_TOKEN" "http://$a/metrics" >"$METRICS_OUT-$a.txt"; done
fi
