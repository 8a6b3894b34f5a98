#!/usr/bin/env bash
# The front door under overload, measured fairly: `flashline serve` (default
# flags) and a PostgreSQL cluster of its own together in a CPU cap (a cgroup:
# cgroup v1's cpu.cfs_quota_us, or v2's cpu.max) pinned to one CPU, and the
# load generator pinned to the other, flooding reservations of distinct
# buyers open-loop at rising rates, with the admission limiter on and then
# off (--no-shed). The generator cannot take the service's CPU, so refusing
# faster cannot just lend the generator more of the machine: what a row shows
# is what the capped service does with the slice it has.
#
#   scripts/overload-curve.sh [rates...]    (default: 1000 2000 3000 4000 6000 8000 12000 16000)
#   CAP=50          percent of one CPU for the service and its PostgreSQL (0: no cap,
#                   no pinning: everything shares the machine, the old way)
#   DURATION=5s     the offered window of each rate
#   SLO=1s          a 201 within this is goodput
#   MODES="on off"  limiter on, then off
#   OUT=/tmp/overload-curve   writes $OUT.tsv (the points) and $OUT.svg (the picture)
#   SERVE_BIN=...   another build of the service (to compare builds in one run)
#   FLOOR=1         then the floor under a refusal: the same flood against a server
#                   that only answers (net/http, then no net/http); FLOOR=0 skips it
#
# Each row: goodput (201s within the SLO per second of the offered window),
# the p99 of the 201s, the rate the generator managed to send (a row where it
# fell behind its offered rate by more than 5 % does not count, and says so),
# and the CPU the service and PostgreSQL used per second. The last line
# floods a sold-out sale at the highest rate and reports the service's CPU
# per refusal (its own CPU time over the refusals it answered).
#
# Both the cap and the generator get a cgroup of their own whose CPU weight
# is the highest there is (v1 cpu.shares 262144, v2 cpu.weight 10000), so
# other work on a shared machine neither eats into the service's slice nor
# slows the generator: the cap stays a ceiling and a floor.
#
# Needs root for the cgroup (CAP=0 does without), the PostgreSQL server
# binaries (as `make run` does) and taskset (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."
rates=("$@"); [ ${#rates[@]} -gt 0 ] || rates=(1000 2000 3000 4000 6000 8000 12000 16000)
top=${rates[${#rates[@]}-1]} # the sold-out flood's and the floor's rate
cap=${CAP:-50}
duration=${DURATION:-5s}
slo=${SLO:-1s}
modes=${MODES:-on off}
out=${OUT:-/tmp/overload-curve}
serve_bin=${SERVE_BIN:-bin/flashline}
make -s build
mkdir -p "$(dirname "$out")"
export FLASHLINE_ADMIN_TOKEN=curve-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=curve-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=c1:curve-waitroom-key-0123456789abcdef
addr=127.0.0.1:18181
dbdir=$(mktemp -d /var/tmp/flashline-curve-XXXXXX)
chmod 755 "$dbdir"
cg= acct= gen= pid=

# The cap: a cpu cgroup (and, on v1, a cpuacct one beside it, for the
# group's CPU time), joined by whatever incap starts.
if [ "$cap" != 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "overload-curve: CAP=$cap needs root (a cgroup of its own); CAP=0 runs without a cap" >&2; exit 1; }
  command -v taskset >/dev/null || { echo "overload-curve: taskset (util-linux) is needed to pin the service and the generator" >&2; exit 1; }
  name=flashline-curve-$$
  if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    cg=/sys/fs/cgroup/cpu/$name
    mkdir "$cg"
    echo 100000 >"$cg/cpu.cfs_period_us"
    echo $((cap * 1000)) >"$cg/cpu.cfs_quota_us"
    echo 262144 >"$cg/cpu.shares"
    gen=/sys/fs/cgroup/cpu/$name-generator
    mkdir "$gen"
    echo 262144 >"$gen/cpu.shares"
    if [ -d /sys/fs/cgroup/cpuacct ]; then acct=/sys/fs/cgroup/cpuacct/$name; mkdir "$acct"; fi
  elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
    cg=/sys/fs/cgroup/$name
    mkdir "$cg"
    echo "$((cap * 1000)) 100000" >"$cg/cpu.max"
    echo 10000 >"$cg/cpu.weight"
    gen=/sys/fs/cgroup/$name-generator
    mkdir "$gen"
    echo 10000 >"$gen/cpu.weight"
  else
    echo "overload-curve: no cgroup cpu controller found (cgroup v1 /sys/fs/cgroup/cpu, or v2 /sys/fs/cgroup)" >&2
    exit 1
  fi
fi
# "${incap[@]}" cmd runs cmd inside the cap, on CPU 0 (cmd as is, with CAP=0);
# an array, not a function, so that "${incap[@]}" cmd & gives $! the
# command's own pid once it has exec'ed into it.
incap=()
if [ -n "$cg" ]; then
  incap=(bash -c 'for g in "$1" "$2"; do [ -n "$g" ] && echo $$ >"$g/cgroup.procs"; done; shift 2; exec taskset -c 0 "$@"' _ "$cg" "$acct")
fi
# ongen runs the generator on CPU 1, away from the cap, in its own group.
ongen() {
  if [ -z "$cg" ]; then "$@"; return; fi
  bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec taskset -c 1 "$@"' _ "$gen" "$@"
}

cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  FLASHLINE_DEVDB_DIR=$dbdir bin/flashline devdb down >/dev/null 2>&1 || true
  rm -rf "$dbdir"
  for g in "$cg" "$acct" "$gen"; do [ -n "$g" ] && rmdir "$g" 2>/dev/null || true; done
}
trap cleanup EXIT

# The cluster of its own, started inside the cap (its postmaster and every
# backend stay there).
export DATABASE_URL
DATABASE_URL=$(FLASHLINE_DEVDB_DIR=$dbdir "${incap[@]}" bin/flashline devdb up 2>/dev/null)

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# The cap's CPU time so far, in seconds (v1: cpuacct.usage; v2: cpu.stat).
group_cpu() {
  if [ -n "$acct" ]; then awk '{printf "%.3f", $1/1e9}' "$acct/cpuacct.usage"
  elif [ -n "$cg" ] && [ -f "$cg/cpu.stat" ]; then awk '/^usage_usec/{printf "%.3f", $2/1e6}' "$cg/cpu.stat"
  else echo 0; fi
}
field() { awk -F'  +' -v k="$1" 'index($0, k) == 1 {print $2}' <<<"$2"; }

printf '# limiter\toffered/s\tsent/s\tgoodput/s\tp99 of 201s (cap %s%% of a CPU, %s per rate, SLO %s)\n' "$cap" "$duration" "$slo" >"$out.tsv"
printf '%-7s %7s %8s %11s %12s %10s %14s  %s\n' limiter offered sent/s goodput/s "p99 of 201s" "serve CPU" "serve+pg CPU" "answers"
serve() {
  local flags=(--addr "$addr" --no-workers)
  [ "$1" = off ] && flags+=(--no-shed)
  "${incap[@]}" "$serve_bin" serve "${flags[@]}" 2>/tmp/overload-curve-serve.log &
  pid=$!
  await serve /tmp/overload-curve-serve.log
}
# await WHAT LOG: until $addr answers /healthz (20 s at most).
await() {
  for _ in $(seq 200); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && return; sleep 0.1; done
  echo "overload-curve: $1 did not start; see $2" >&2
  exit 1
}
# per_answer LABEL: the CPU of $pid per 409 sold_out answer of the last flood.
per_answer() {
  local n
  n=$(awk '/^  409 sold_out/{print $3}' <<<"$LAST_RUN")
  if [ -n "$n" ]; then
    printf '%s (%s/s offered): %.1f µs over %s answers\n' "$1" "$top" "$(echo "$LAST_SCPU * 1000000 / $n" | bc -l)" "$n"
  fi
}
# stop: the server of the last runs.
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
# flood MODE RATE STOCK: one open-loop run; prints its row.
flood() {
  local mode=$1 rate=$2 stock=$3
  local s0 g0 t0 run wall scpu gcpu sent good p99 answers note=""
  s0=$(ticks "$pid"); g0=$(group_cpu); t0=$(date +%s.%N)
  run=$(GOGC=400 ongen bin/flashline-loadtest --quiet --target "http://$addr" --scenario overload \
    --rate "$rate" --duration "$duration" --slo "$slo" --stock "$stock" 2>&1 || true)
  wall=$(echo "$(date +%s.%N) - $t0" | bc)
  scpu=$(echo "($(ticks "$pid") - $s0) / $hz" | bc -l)
  gcpu=$(echo "$(group_cpu) - $g0" | bc -l)
  sent=$(field "offered / sent" "$run" | awk -F' / ' '{sub("/s","",$2); print $2}')
  good=$(field "goodput within" "$run" | sed 's/.*(\(.*\)\/s)/\1/')
  p99=$(field "p99 of 201s" "$run")
  answers=$(awk '/^  [0-9a-z]/{gsub(/^ +/,""); gsub(/ +/," "); printf "%s; ", $0}' <<<"$run")
  if [ -z "$sent" ]; then
    echo "overload-curve: the generator failed:" >&2; echo "$run" >&2; exit 1
  fi
  if [ "$(echo "$sent < 0.95 * $rate" | bc)" = 1 ]; then note=" (generator behind: row does not count)"; fi
  printf '%-7s %7s %8.0f %11s %12s %9.2f/s %13.2f/s  %s%s\n' "$mode" "$rate" "$sent" "$good" "$p99" \
    "$(echo "$scpu / $wall" | bc -l)" "$(echo "$gcpu / $wall" | bc -l)" "$answers" "$note"
  LAST_RUN=$run LAST_SCPU=$scpu
  [ "$stock" = 1 ] || printf '%s\t%s\t%.0f\t%s\t%s\n' "$mode" "$rate" "$sent" "${good//,/}" "$p99" >>"$out.tsv"
}
for mode in $modes; do
  serve "$mode"
  for rate in "${rates[@]}"; do flood "$mode" "$rate" 10000000; done
  if [ "$mode" = on ]; then
    # The refusal's cost: a sold-out sale at the highest rate, every answer a
    # refusal the service decides without the database.
    flood sold-out "$top" 1
    per_answer "service CPU per refusal, sold out"
  fi
  stop
done
# The floor under that refusal, in the same cap at the same rate: a server
# that answers every reservation with the same bytes and does nothing else,
# first behind net/http, then with no net/http at all (internal/loadtest's
# Floor). What the service costs per refusal above these is its own.
if [ "${FLOOR:-1}" = 1 ]; then
  for kind in http tcp; do
    "${incap[@]}" bin/flashline-loadtest --floor "$kind" --target "http://$addr" 2>/tmp/overload-curve-floor.log &
    pid=$!
    await "the floor ($kind)" /tmp/overload-curve-floor.log
    flood "floor-$kind" "$top" 1
    per_answer "floor CPU per answer, $kind"
    stop
  done
fi
bin/flashline-loadtest --curve "$out.tsv" --report "$out.svg"
