#!/usr/bin/env bash
# Hunts flaky tests: runs a package's tests (or the tests matching TEST) N
# times, one run after another, each beside BURNERS busy loops that keep the
# CPUs taken (as CI's busy two-core machine does), and prints the failure
# rate and the first lines of each failure. The test binary is built once,
# with the race detector, as make test builds it.
#
#   scripts/flaky.sh ./waitroom/waitpage                    every test, 10 runs
#   scripts/flaky.sh ./cmd/flashline '^TestGate$' 20
#   BURNERS=0 scripts/flaky.sh ./salecache           on a quiet machine
#
# The database is $FLASHLINE_TEST_DATABASE_URL, else $DATABASE_URL, else the
# development cluster (bin/flashline devdb up; stopped again at the end if
# this script started it). Each run's whole output is kept in OUT
# (/tmp/flashline-flaky) as run-K.log. Exit status: 0 when every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=${1:?usage: scripts/flaky.sh PKG [TEST] [N]}
test=${2:-.}
n=${3:-10}
burners=${BURNERS:-2}
out=${OUT:-/tmp/flashline-flaky}
timeout=${TIMEOUT:-30m}
case $pkg in ./*) ;; *) pkg=./$pkg ;; esac
[[ -d $pkg ]] || { echo "flaky: no package directory $pkg" >&2; exit 2; }
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "flaky: N must be a positive number, not '$n'" >&2; exit 2; }
[[ $burners =~ ^[0-9]+$ ]] || { echo "flaky: BURNERS must be a number, not '$burners'" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out"/run-*.log

go build -o bin/flashline ./cmd/flashline
bin=$(mktemp -d)
pids=()
started=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$bin"
  if [[ -n $started ]]; then bin/flashline devdb down >/dev/null || true; fi
}
trap cleanup EXIT
echo "flaky: building $pkg's tests (race detector on)"
go test -race -c -o "$bin/pkg.test" "$pkg"

if [[ -z ${FLASHLINE_TEST_DATABASE_URL:-} ]]; then
  if [[ -n ${DATABASE_URL:-} ]]; then
    FLASHLINE_TEST_DATABASE_URL=$DATABASE_URL
  else
    bin/flashline devdb status >/dev/null 2>&1 || started=1
    FLASHLINE_TEST_DATABASE_URL=$(bin/flashline devdb up)
  fi
fi
export FLASHLINE_TEST_DATABASE_URL

for ((i = 0; i < burners; i++)); do
  (while :; do :; done) &
  pids+=($!)
done

failed=0
for ((k = 1; k <= n; k++)); do
  log=$out/run-$k.log
  start=$(date +%s)
  # go test runs a package's tests in its own directory: so does this.
  if (cd "$pkg" && "$bin/pkg.test" -test.count=1 -test.run "$test" -test.timeout "$timeout" -test.v) >"$log" 2>&1; then
    echo "flaky: run $k/$n passed in $(($(date +%s) - start)) s"
  else
    failed=$((failed + 1))
    echo "flaky: run $k/$n FAILED in $(($(date +%s) - start)) s ($log):"
    # Each failing test's line and the first lines of what it said.
    grep -E -A12 -- '^\s*--- FAIL|^panic:|^WARNING: DATA RACE|test timed out' "$log" | head -40 | sed 's/^/    /'
  fi
done
echo "flaky: $pkg ${test}: $failed of $n runs failed beside $burners CPU burners"
[[ $failed = 0 ]]
