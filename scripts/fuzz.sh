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
for pkg in $(go list ./...); do
  for name in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    n=$((n + 1))
    if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1); then
      echo "fuzz: $pkg $name FAILED"
      echo "$out"
      exit 1
    fi
  done
done
echo "fuzz: $n targets, $fuzztime each, no failure"
