#!/usr/bin/env bash
# Runs every fuzz target in the module (each decoder of untrusted input has
# one) for FUZZTIME each, default 3s: part of `make test`. A failing input is
# saved under the package's testdata/fuzz/ and the run fails; commit it with
# the fix so that it stays a regression test.
#
#   scripts/fuzz.sh                 FUZZTIME=30s scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-3s}
n=0
# FUZZ_NICE_WHILE names a file (make test's): while it exists, each target
# runs at nice 19, in the CPU the suite's tests leave idle.
run() {
  local prio=()
  if [[ -n ${FUZZ_NICE_WHILE:-} && -e $FUZZ_NICE_WHILE ]]; then prio=(nice -n 19); fi
  "${prio[@]}" go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1
}
# The targets, read from the test files (go test -list would build every
# package's test binary just to list them): func FuzzX(f *testing.F).
for dir in $(scripts/packages-with.sh Fuzz); do
  pkg=$dir
  for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' "$dir"/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/' | sort -u); do
    n=$((n + 1))
    if ! out=$(run); then
      # Go's fuzzing engine sometimes ends a run that found nothing with
      # "context deadline exceeded" (its deadline met a worker mid-call, on
      # a busy machine): no failing input is written then. Run that target
      # once more; a real finding is written under testdata/fuzz and fails.
      if [[ $out == *"context deadline exceeded"* && $out != *"Failing input written to"* ]]; then
        echo "fuzz: $pkg $name: the engine's deadline, no failing input; once more"
        out=$(run) && continue
      fi
      echo "fuzz: $pkg $name FAILED"
      echo "$out"
      exit 1
    fi
  done
done
echo "fuzz: $n targets, $fuzztime each, no failure"
