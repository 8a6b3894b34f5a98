#!/usr/bin/env bash
# The packages (as ./dir) whose test files declare a function of the given
# kind, e.g. `scripts/packages-with.sh Benchmark` or `Fuzz`: read from the
# files, without building anything.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -rl --include='*_test.go' "^func ${1}[A-Za-z0-9_]*(" . | xargs -n1 dirname | sort -u
