#!/usr/bin/env bash
# `make profile`: CPU and allocation profiles of `flashline serve` under the
# hot scenario (one hot SKU, closed loop) and under the "no" scenario
# (/healthz, a sold-out sale's reservations, waiting-room status polls), taken
# from the profiler serve exposes on --metrics-addr (/debug/pprof/), and their
# top entries printed. The profiles land in $OUT (default /tmp/flashline-profile),
# not in the repository; open one with `go tool pprof -http : bin/flashline $OUT/hot.cpu`.
#
#   CLIENTS=32 PROFILE_SECONDS=10 scripts/profile.sh
#
# PostgreSQL's side of the hot phase is printed too: WAL bytes and rows
# written per reservation (scripts/pgbench/cost.sh), the CPU time of the
# server's processes against the service's (from /proc, when PostgreSQL runs
# on this machine), and, when the server has pg_stat_statements loaded
# (shared_preload_libraries), each statement's calls, time, rows and WAL.
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
. scripts/pgbench/cost.sh

bindir=${FLASHLINE_PG_BINDIR:-}
if [ -z "$bindir" ] && command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/psql" ]; then bindir=$(pg_config --bindir); fi
if [ -z "$bindir" ]; then bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1); fi
base=${DATABASE_URL:-$(bin/flashline devdb up 2>/dev/null)}
admin_url=$(sed -E 's#/[^/?]*(\?|$)#/postgres\1#' <<<"$base")
prof_url=$(sed -E 's#/[^/?]*(\?|$)#/flashline_profile\1#' <<<"$base")
PGOPTIONS="-c client_min_messages=warning" "$bindir/psql" -q "$admin_url" -c "DROP DATABASE IF EXISTS flashline_profile WITH (FORCE)" -c "CREATE DATABASE flashline_profile"
statements=
if "$bindir/psql" -qAtX "$prof_url" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT count(*) FROM pg_stat_statements" >/dev/null 2>&1; then statements=1; fi
export DATABASE_URL=$prof_url FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef

addr=127.0.0.1:18290
pprof=127.0.0.1:18291
start_serve() {
  bin/flashline serve --addr "$addr" --metrics-addr "$pprof" --no-workers 2>>"$out/serve.log" &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_serve() { kill "$pid"; wait "$pid" 2>/dev/null || true; trap - EXIT; }
: >"$out/serve.log"
start_serve

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
# CPU seconds used so far by the server's processes, when it runs on this
# machine and its data directory is readable: the postmaster's own and its
# ended children's (from /proc), and its live children's.
pg_datadir=$("$bindir/psql" -qAtX "$prof_url" -c "SHOW data_directory" 2>/dev/null || true)
pg_cpu() {
  local pm
  pm=$(head -1 "$pg_datadir/postmaster.pid" 2>/dev/null || true)
  [ -n "$pm" ] && [ -r "/proc/$pm/stat" ] || { echo 0; return; }
  { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat"
    for c in $(pgrep -P "$pm"); do awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null; done; } | awk '{ s += $1 } END { print s / 100 }'
}
serve_cpu() { awk '{ print ($14 + $15) / 100 }' "/proc/$pid/stat"; }
# hot: one phase of $seconds + 4 s; the CPU profile covers $seconds of it.
[ -n "$statements" ] && "$bindir/psql" -qAtX "$prof_url" -c "SELECT pg_stat_statements_reset()" >/dev/null
cost_begin "$prof_url"
pg0=$(pg_cpu) sv0=$(serve_cpu)
profile hot hot "$((seconds + 4))s" "$clients" 2 "$seconds"
pg1=$(pg_cpu) sv1=$(serve_cpu)
hot_n=$(sed -n 's/^successful reservations *\([0-9]*\) .*/\1/p' "$out/hot.loadtest")
# A serve of its own for the "no" phases: the hot one's connections close,
# which reports their row counters.
stop_serve
cost_end "$prof_url" "$hot_n"
start_serve
# no: three phases (/healthz, sold out, status) of $seconds each, after its
# setup; the CPU profile covers all three (split them in pprof with -focus).
profile no no "${seconds}s" 64 1 "$((3 * seconds))"

stop_serve
for name in hot no; do
  echo "=== $name: loadtest"
  cat "$out/$name.loadtest"
  if [ "$name" = hot ]; then
    echo "=== hot: what one reservation cost ($hot_n reservations, the whole phase)"
    echo "WAL bytes per reservation $cost_wal; rows written per reservation $cost_rows ($cost_detail)"
    awk -v n="$hot_n" -v pg="$(awk "BEGIN { print $pg1 - $pg0 }")" -v sv="$(awk "BEGIN { print $sv1 - $sv0 }")" 'BEGIN {
      if (n > 0) printf "CPU per reservation over the whole phase: service %.0f us, PostgreSQL %.0f us (0: not on this machine)\n", sv * 1e6 / n, pg * 1e6 / n }'
    if [ -n "$statements" ]; then
      echo "=== hot: pg_stat_statements, by total time"
      "$bindir/psql" -X "$prof_url" -c "SELECT calls, round(total_exec_time::numeric, 1) AS total_ms,
               round((total_exec_time / calls)::numeric, 3) AS ms_per_call, rows, wal_records, wal_fpi, wal_bytes,
               left(regexp_replace(query, '\s+', ' ', 'g'), 60) AS query
          FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
         ORDER BY total_exec_time DESC LIMIT 8"
    fi
  fi
  echo "=== $name: CPU, top $top by cumulative time (the service only)"
  go tool pprof -top -cum -nodecount="$top" bin/flashline "$out/$name.cpu" 2>/dev/null | grep -v -e '^File:' -e '^Build ID:' -e '^Time:'
  echo "=== $name: CPU, top $top by own time"
  go tool pprof -top -nodecount="$top" bin/flashline "$out/$name.cpu" 2>/dev/null | grep -v -e '^File:' -e '^Build ID:' -e '^Time:'
  echo "=== $name: allocations during the run, top $top by bytes"
  go tool pprof -top -sample_index=alloc_space -nodecount="$top" -base "$out/$name.allocs.before" bin/flashline "$out/$name.allocs" 2>/dev/null | grep -v -e '^File:' -e '^Build ID:' -e '^Time:'
done
echo "profiles in $out (go tool pprof -http : bin/flashline $out/hot.cpu)"
