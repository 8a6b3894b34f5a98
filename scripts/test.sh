#!/usr/bin/env bash
# The suite as `make test` runs it, once the binaries are built and
# FLASHLINE_TEST_DATABASE_URL is set (the Makefile does both): every test
# with the race detector, every benchmark once (-benchtime 1x: do they still
# run, not how fast) and every fuzz target for FUZZTIME (scripts/fuzz.sh),
# in lanes that run side by side, then the ten slowest tests.
#
# Most of the suite waits (on flashline serve processes, PostgreSQL
# clusters, browsers, Locust) rather than computes, so on two cores it runs
# in these lanes at once:
#   - the packages, four at a time (-p 4), the longest three named first so
#     that they start first and the fourth place runs the others beside them
#     (with three, the others waited for the three, about 9 minutes, and
#     then took 3.5 more);
#   - each of cmd/flashline's SHARDS (regular expressions of its test names,
#     about a lane's worth each): its end-to-end tests run one after another
#     within a package, and are most of the suite's time;
#   - the benchmarks, then the fuzz targets, at the lowest CPU priority
#     (nice 19) while tests run: they take the CPU the tests leave idle;
#     what is left of them once the tests end runs at the normal priority.
#     The benchmarks run in a go test of their own because go test runs
#     packages one at a time whenever -bench is set.
# go test -json of every test lane goes through gotestsum (a line per package,
# the output of each failing test) into OUT (.test-out), from which the
# slowest tests are read.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.test-out}
rm -rf "$out" && mkdir -p "$out"

# cmd/flashline's lanes beside the packages' lane, as regular expressions of
# test names (-run); the package's other tests run in the packages' lane.
# Balanced by the times the slowest-tests list shows. They hold the
# package's sequential end-to-end tests (no t.Parallel: go test runs them one
# after another before any parallel test of the package starts), so that
# these run beside the parallel ones.
shards=(
  '^(TestNorthline|TestNorthlineThroughPgBouncer|TestSoldOutCostsNoTransactions)$'
  '^(TestPreopenTicketsWriteNoRowPerArrival|TestEdgesTicketsAndAdmissions|TestEdgeWithoutDatabase|TestEdgeFailsOverToAnotherOrigin|TestEdgeLosesItsOrigin|TestEdgeWithSkewedClock|TestGate|TestGateWithoutRedis|TestDatabaseDownFailsClosed|TestSkewedClocksJudgeByTheDatabase|TestWaitingRoomEndToEnd|TestConnectionFloodFromOneAddress)$'
)
heavy=(./cmd/flashline ./waitroom/waitpage ./internal/testkit/chaos)

gotestsum() { go tool -modfile=scripts/tools/go.mod gotestsum "$@"; }
# lane NAME GO-TEST-ARGS...: go test -json through gotestsum, its events in
# OUT/NAME.json; the exit status is go test's.
lane() {
  local name=$1
  shift
  gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg --jsonfile "$out/$name.json" -- "$@"
}

# The binaries the end-to-end tests start (internal/testkit/testserver: the same
# names and flags), built once here for every lane's test processes, which
# would otherwise each link their own.
bin=$(cd "$out" && pwd)/bin
go build -race -tags flashline_testhooks -o "$bin/flashline" ./cmd/flashline &
b1=$!
go build -tags flashline_testhooks -o "$bin/flashline-plain" ./cmd/flashline &
b2=$!
go build -o "$bin/flashline-loadtest" ./cmd/flashline-loadtest &
b3=$!
wait $b1 && wait $b2 && wait $b3 || { echo "make test: the test binaries did not build"; exit 1; }
export FLASHLINE_TEST_BIN_DIR=$bin

skip=$(IFS='|'; echo "${shards[*]}")
pids=()
for i in "${!shards[@]}"; do
  lane "flashline-$i" -race -count=1 -timeout 30m -run "${shards[$i]}" ./cmd/flashline &
  pids+=($!)
done
lane packages -race -count=1 -p 4 -timeout 30m -skip "$skip" "${heavy[@]}" ./... &
pids+=($!)
# The tail runs at nice 19 while the tests run (the marker file says so):
# it takes the CPU they leave idle. Once they end, what is left of it runs
# at the normal priority: at nice 19 beside a busy machine's other work (two
# CPU burners, fresh-clone run 28) each fuzz target's build starved for
# minutes after the tests had ended.
testing=$out/testing
touch "$testing"
(
  # Not through gotestsum, which takes a benchmark's result for a test
  # that never ended: the output is shown when a benchmark fails.
  if nice -n 19 go test -race -count=1 -run '^$' -bench . -benchtime 1x $(scripts/packages-with.sh Benchmark) >"$out/benchmarks.log" 2>&1; then
    echo "benchmarks: every one ran once ($out/benchmarks.log)"
  else
    cat "$out/benchmarks.log"
    echo "benchmarks: FAILED"
    exit 1
  fi
  FUZZ_NICE_WHILE=$testing scripts/fuzz.sh
) &
tail=$!

rc=0
for p in "${pids[@]}"; do
  wait "$p" || rc=1
done
rm -f "$testing"
wait "$tail" || rc=1

echo
echo "The ten slowest tests of this run (go test -json, $out):"
cat "$out"/*.json >"$out/all.jsonl"
gotestsum tool slowest --jsonfile "$out/all.jsonl" --threshold 1ms --num 10 | sed 's/^/  /'
if [[ $rc != 0 ]]; then
  echo "make test: FAILED (each failure above; the events are in $out)"
fi
exit $rc
