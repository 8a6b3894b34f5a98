#!/usr/bin/env bash
# `make profile`: CPU and allocation profiles of `flashline serve` under the
# hot scenario (one hot SKU, closed loop) and under the "no" scenario
# (/healthz, a sold-out sale's reservations, waiting-room status polls), taken
# from the profiler serve exposes on --metrics-addr with --pprof (/debug/pprof/), and their
# top entries printed. The profiles land in $OUT (default /tmp/flashline-profile),
# not in the repository; open one with `go tool pprof -http : bin/flashline $OUT/hot.cpu`.
#
#   CLIENTS=32 PROFILE_SECONDS=10 scripts/profile.sh
#
# Uses a fresh database flashline_profile on $DATABASE_URL's server, else on
# the development cluster (started if needed).
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${CLIENTS:-32}
seconds=${PROFILE_SECONDS:-10}
out=${OUT:-/tmp/flashline-profile}
top=${TOP:-25}
mkdir -p "$out"
make -s build

bindir=${FLASHLINE_PG_BINDIR:-}
if [ -z "$bindir" ] && command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/psql" ]; then bindir=$(pg_config --bindir); fi
if [ -z "$bindir" ]; then bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1); fi
base=${DATABASE_URL:-$(bin/flashline devdb up 2>/dev/null)}
admin_url=$(sed -E 's#/[^/?]*(\?|$)#/postgres\1#' <<<"$base")
prof_url=$(sed -E 's#/[^/?]*(\?|$)#/flashline_profile\1#' <<<"$base")
"$bindir/psql" -q "$admin_url" -c "DROP DATABASE IF EXISTS flashline_profile WITH (FORCE)" -c "CREATE DATABASE flashline_profile"
export DATABASE_URL=$prof_url FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef

addr=127.0.0.1:18290
pprof=127.0.0.1:18291
bin/flashline serve --addr "$addr" --metrics-addr "$pprof" --pprof --no-workers 2>"$out/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

# profile NAME SCENARIO DURATION: start the scenario, and once it is warm take
# a CPU profile over most of it; the allocation profile (allocs: every
# allocation since the start, sampled) is the difference over the run.
profile() {
  local name=$1 scenario=$2 duration=$3
  curl -fs -o "$out/$name.allocs.before" "http://$pprof/debug/pprof/allocs"
  bin/flashline-loadtest --quiet --target "http://$addr" --scenario "$scenario" --clients "$4" --duration "$duration" >"$out/$name.loadtest" &
  local lt=$!
  sleep "${5:-2}"
  curl -fs -o "$out/$name.cpu" "http://$pprof/debug/pprof/profile?seconds=$6"
  wait $lt
  curl -fs -o "$out/$name.allocs" "http://$pprof/debug/pprof/allocs"
}
# hot: one phase of $seconds + 4 s; the CPU profile covers $seconds of it.
profile hot hot "$((seconds + 4))s" "$clients" 2 "$seconds"
# no: three phases (/healthz, sold out, status) of $seconds each, after its
# setup; the CPU profile covers all three (split them in pprof with -focus).
profile no no "${seconds}s" 64 1 "$((3 * seconds))"

for name in hot no; do
  echo "=== $name: loadtest"
  cat "$out/$name.loadtest"
  echo "=== $name: CPU, top $top by cumulative time (the service only)"
  go tool pprof -top -cum -nodecount="$top" bin/flashline "$out/$name.cpu" 2>/dev/null | grep -v -e '^File:' -e '^Build ID:' -e '^Time:'
  echo "=== $name: CPU, top $top by own time"
  go tool pprof -top -nodecount="$top" bin/flashline "$out/$name.cpu" 2>/dev/null | grep -v -e '^File:' -e '^Build ID:' -e '^Time:'
  echo "=== $name: allocations during the run, top $top by bytes"
  go tool pprof -top -sample_index=alloc_space -nodecount="$top" -base "$out/$name.allocs.before" bin/flashline "$out/$name.allocs" 2>/dev/null | grep -v -e '^File:' -e '^Build ID:' -e '^Time:'
done
echo "profiles in $out (go tool pprof -http : bin/flashline $out/hot.cpu)"
