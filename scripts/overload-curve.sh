#!/usr/bin/env bash
# Goodput under overload, with and without the admission limiter: one
# `flashline serve` with a small purchase pool, flooded open-loop at rising
# rates by `flashline-loadtest --scenario overload`. Prints one line per run,
# records the points in $OUT.tsv and draws them in $OUT.svg.
#
#   scripts/overload-curve.sh [rates...]      (default: 1000 4000 6000 10000 20000)
#   DURATION=6s POOL=4 OUT=docs/overload-curve scripts/overload-curve.sh ...
#   SERVE_BIN=/tmp/flashline-old scripts/overload-curve.sh ...   (another build of the service)
#
# The load generator runs on the same machine as the service and PostgreSQL,
# niced (LOADGEN_PREFIX, default "nice -n 19") and with a lazier garbage
# collector (GOGC=400), so that it takes as little as it can of the CPU they
# need: the crowd's machines are not the store's. Still, a Go HTTP client
# costs about 50 µs of CPU per request: past about 1.3 times the path's
# capacity the generator needs most of a core on a 2-core machine, and that
# limits what this curve can show (the "cores" column says who used what).
#
# Uses $DATABASE_URL, else the development database (make devdb-up).
set -euo pipefail
cd "$(dirname "$0")/.."
rates=("$@"); [ ${#rates[@]} -gt 0 ] || rates=(1000 4000 6000 10000 20000)
make -s build
export DATABASE_URL="${DATABASE_URL:-$(bin/flashline devdb up)}"
export FLASHLINE_ADMIN_TOKEN=curve-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=curve-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=c1:curve-waitroom-key-0123456789abcdef
addr=127.0.0.1:18181
pool=${POOL:-4}
duration=${DURATION:-8s}
out=${OUT:-/tmp/overload-curve}
mkdir -p "$(dirname "$out")"
printf '# limiter\toffered/s\tsent/s\treserved/s\tp99 (pool %s, %s per rate)\n' "$pool" "$duration" >"$out.tsv"
# CPU seconds used so far by a process, and by every PostgreSQL process.
cpu_of() { awk '{printf "%.2f", ($14+$15)/100}' "/proc/$1/stat"; }
cpu_pg() { for p in $(pgrep -u postgres postgres); do awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null; done | awk '{s+=$1} END {printf "%.2f", s/100}'; }
printf '%-8s %-6s %10s %12s %10s %10s %22s  %s\n' limiter rate sent/s reserved/s p99 healthz99 "cores: gen/serve/pg" outcomes
for mode in on off; do
  flags=(--sale-pool-size "$pool" --no-workers --addr "$addr")
  [ "$mode" = off ] && flags+=(--no-shed)
  ${SERVE_BIN:-bin/flashline} serve "${flags[@]}" 2>/tmp/overload-curve-serve.log &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  for rate in "${rates[@]}"; do
    s0=$(cpu_of $pid); p0=$(cpu_pg); t0=$(date +%s.%N)
    run=$(GOGC=400 /usr/bin/time -f 'generator-cpu %U %S' ${LOADGEN_PREFIX-nice -n 19} bin/flashline-loadtest --quiet --target "http://$addr" --scenario overload --rate "$rate" --duration "$duration" --stock 10000000 2>&1 || true)
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    cores=$(awk -v s="$(echo "$(cpu_of $pid) - $s0" | bc)" -v p="$(echo "$(cpu_pg) - $p0" | bc)" -v w="$wall" \
      '/^generator-cpu/{printf "%.2f/%.2f/%.2f", ($2+$3)/w, s/w, p/w}' <<<"$run")
    sent=$(awk -F'  +' '/^throughput/{print $2}' <<<"$run" | awk '{print $1}')
    good=$(awk -F'  +' '/^successful reservations/{print $2}' <<<"$run" | sed 's/.*(\(.*\)\/s)/\1/')
    p99=$(awk -F'  +' '/^latency/{print $2}' <<<"$run" | awk -F' / ' '{print $3}')
    h99=$(awk -F'  +' '/^\/healthz/{print $2}' <<<"$run" | awk -F' / ' '{print $2}')
    outcomes=$(awk '/^  [0-9a-z]/{gsub(/^ +/,""); gsub(/ +/," "); printf "%s; ", $0}' <<<"$run")
    printf '%-8s %-6s %10s %12s %10s %10s %22s  %s\n' "$mode" "$rate" "$sent" "$good" "$p99" "$h99" "$cores" "$outcomes"
    printf '%s\t%s\t%s\t%s\t%s\n' "$mode" "$rate" "${sent//,/}" "${good//,/}" "$p99" >>"$out.tsv"
  done
  kill $pid; wait $pid 2>/dev/null || true
  trap - EXIT
done
bin/flashline-loadtest --curve "$out.tsv" --report "$out.svg"
