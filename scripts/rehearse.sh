#!/usr/bin/env bash
# A rehearsal of a flash sale on Locust (scripts/rehearse/): USERS shoppers
# for UNITS units through a waiting room, a Locust master and WORKERS workers
# on this machine, and at the end the sale checked against what the
# shoppers saw (docs/rehearsal.md).
#
#   scripts/rehearse.sh          USERS=3000 UNITS=300 WORKERS=2 OUT=/tmp/flashline-rehearsal EDGE=go|worker
#
# VARIANTS=n rehearses a sale of n variants (1-100), the units split evenly:
# each shopper reserves one at random and switches when it is gone, and the
# checks hold each variant to its units.
#
# TARGET=url[,url...] rehearses against running instances (edges, or
# instances with the database): ADMIN_TARGET (default: the first target)
# takes the admin's requests and the payment events; FLASHLINE_ADMIN_TOKEN,
# FLASHLINE_JWT_SECRET and FLASHLINE_PAYMENT_WEBHOOK_SECRET must be theirs.
# Without TARGET it starts an instance (flashline serve, on $DATABASE_URL,
# else the development database) and an edge in front of it (serve --role
# edge), each on a free loopback port, and stops them at the end; with
# EDGE=worker the edge is the Cloudflare Worker (waitroom/worker) on workerd
# (make workerd installs it) rather than serve --role edge. ORIGINS=n
# (default 1) starts n instances on the one database, the edge in front of
# all of them (the admin's requests and the payment events to the first),
# and prints at the end how many requests each instance answered.
# REHEARSE_ARGS passes more to scripts/rehearse/rehearse.py (--spread,
# --after-share, --abandon-share, --challenge-bits, ...: see its --help).
set -euo pipefail
cd "$(dirname "$0")/.."
edge_kind=${EDGE:-go}
case "$edge_kind" in
  go | worker) ;;
  *) echo "rehearse: EDGE=$edge_kind: go (serve --role edge, the default) or worker (the Worker on workerd)" >&2; exit 2 ;;
esac
if [ -n "${TARGET:-}" ] && [ -n "${EDGE:-}${ORIGINS:-}" ]; then
  echo "rehearse: EDGE and ORIGINS name what the script starts; with TARGET it starts nothing (leave them out)" >&2
  exit 2
fi
n_origins=${ORIGINS:-1}
case "$n_origins" in
  [1-9] | [1-9][0-9]) ;;
  *) echo "rehearse: ORIGINS=$n_origins: the number of instances to start (1-99)" >&2; exit 2 ;;
esac
users=${USERS:-3000} units=${UNITS:-300} variants=${VARIANTS:-0} workers=${WORKERS:-2} out=${OUT:-/tmp/flashline-rehearsal}
# Debian's locust runs under /usr/bin/python3, whatever python3 is first on PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
pids=()
trap 'kill ${pids[*]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
if [ -z "${TARGET:-}" ]; then
  make -s build
  export DATABASE_URL="${DATABASE_URL:-$(bin/flashline devdb up)}"
  export FLASHLINE_ADMIN_TOKEN=rehearse-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=rehearse-jwt-secret-0123456789abcdef \
    FLASHLINE_WAITROOM_KEYS=r1:rehearse-waitroom-key-0123456789abcdef \
    FLASHLINE_PAYMENT_WEBHOOK_SECRET=rehearse-payment-secret-0123456789abcdef
  mkdir -p "$out"
  port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  up() { for _ in $(seq 200); do curl -fs "http://$1/healthz" >/dev/null 2>&1 && return; sleep 0.1; done; echo "rehearse: $1 did not start" >&2; exit 2; }
  origin=127.0.0.1:$(port) edge=127.0.0.1:$(port)
  if [ "$n_origins" = 1 ]; then
    bin/flashline serve --addr "$origin" 2>"$out/origin.log" & pids+=($!)
    up "$origin"
    origins=$origin
  else
    # n instances on the one database, each its own log; the first is $origin.
    origins=$origin
    for i in $(seq 2 "$n_origins"); do origins+=,127.0.0.1:$(port); done
    i=0
    for o in ${origins//,/ }; do
      i=$((i + 1))
      bin/flashline serve --addr "$o" 2>"$out/origin$i.log" & pids+=($!)
    done
    for o in ${origins//,/ }; do up "$o"; done
  fi
  origin_urls=http://${origins//,/,http://}
  if [ "$edge_kind" = worker ]; then
    make -s workerd
    # The Worker as make worker-dev runs it, with the instance's secrets
    # (wrangler.toml's on Cloudflare); its own id per isolate.
    (cd waitroom/worker && exec env -u DATABASE_URL ORIGINS="$origin_urls" EDGE_ID= \
      node_modules/.bin/workerd serve config.capnp --socket-addr "http=$edge" >"$out/edge.log" 2>&1) & pids+=($!)
    up "$edge"
    # Its first answer waits for the origin's document; ready once it has one.
    for _ in $(seq 200); do curl -fs "http://$edge/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    if [ "$n_origins" = 1 ]; then
      echo "rehearse: an instance on http://$origin, the Worker on workerd on http://$edge (logs in $out)"
    else
      echo "rehearse: $n_origins instances on ${origin_urls//,/, }, the Worker on workerd on http://$edge in front of them all (logs in $out)"
    fi
  else
    env -u DATABASE_URL bin/flashline serve --role edge --origin "$origin_urls" --addr "$edge" 2>"$out/edge.log" & pids+=($!)
    up "$edge"
    if [ "$n_origins" = 1 ]; then
      echo "rehearse: an instance on http://$origin, an edge on http://$edge (logs in $out)"
    else
      echo "rehearse: $n_origins instances on ${origin_urls//,/, }, an edge on http://$edge in front of them all (logs in $out)"
    fi
  fi
  TARGET=http://$edge ADMIN_TARGET=http://$origin
fi
if [ "$n_origins" = 1 ]; then
  # shellcheck disable=SC2086
  "$py" scripts/rehearse/rehearse.py --target "$TARGET" --admin-target "${ADMIN_TARGET:-${TARGET%%,*}}" \
    --users "$users" --units "$units" --variants "$variants" --workers "$workers" --out "$out" ${REHEARSE_ARGS:-}
  exit 0 # (a failure has ended the script with its status, as set -e does)
fi
rc=0
# shellcheck disable=SC2086
"$py" scripts/rehearse/rehearse.py --target "$TARGET" --admin-target "${ADMIN_TARGET:-${TARGET%%,*}}" \
  --users "$users" --units "$units" --variants "$variants" --workers "$workers" --out "$out" ${REHEARSE_ARGS:-} || rc=$?
# What each instance answered (its flashline_http_requests_total, every
# route but the edges' /edge/* and the probes; the reservations, every
# outcome, apart: the payment events go to the first), so that the spread
# over the origins is on the page.
i=0
for o in ${origins//,/ }; do
  i=$((i + 1))
  n=$(curl -fs -H "Authorization: Bearer $FLASHLINE_ADMIN_TOKEN" "http://$o/metrics" |
    awk '/^flashline_http_requests_total\{/ && !/route="\/(edge\/|healthz|readyz|metrics)/ {s += $NF}
      /^flashline_http_requests_total\{/ && /route="\/sales\/:saleId\/reservations"/ {r += $NF}
      END {printf "%d requests, %d reservations", s, r}') || n="? requests"
  echo "  origin $i             http://$o answered $n (flashline_http_requests_total, /edge/* and probes aside)"
done | tee "$out/origins.txt"
exit "$rc"
