#!/usr/bin/env bash
# A/B of what one reservation costs between two revisions of flashline: builds
# bin/flashline of each (git revisions; "." is the working tree) and runs
# short `flashline-loadtest --scenario hot` runs against each in turn, A B B A
# per round so that both meet the same load from whatever else runs on the
# machine, each on a fresh database with one `serve`; prints every run and,
# per revision and client count, the median reservations/s, WAL bytes and
# rows written per reservation (scripts/pgbench/cost.sh), and B's ratio to A.
#
#   scripts/cost-ab.sh main .                  # main against the working tree
#   ROUNDS=4 CLIENTS="1 8 128" DURATION=5s scripts/cost-ab.sh HEAD~1 HEAD
#   SERVE_FLAGS="--batches-in-flight 2" scripts/cost-ab.sh main .
#
# The load generator is always the working tree's. Uses a database
# flashline_ab on $DATABASE_URL's server, else on the development cluster
# (started if needed); run nothing else on that cluster meanwhile (the WAL
# figure is the cluster's).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: scripts/cost-ab.sh REV_A REV_B   (\".\": the working tree)" >&2; exit 2; }
rounds=${ROUNDS:-3}
clients=(${CLIENTS:-1 128})
duration=${DURATION:-5s}
serve_flags=(${SERVE_FLAGS:-})
make -s build
. scripts/pgbench/cost.sh

bindir=${FLASHLINE_PG_BINDIR:-}
if [ -z "$bindir" ] && command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/psql" ]; then bindir=$(pg_config --bindir); fi
if [ -z "$bindir" ]; then bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1); fi

work=$(mktemp -d /tmp/flashline-cost-ab.XXXXXX)
pid=
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
build() { # rev -> path of its binary
  local rev=$1 out=$work/flashline-$2
  if [ "$rev" = . ]; then cp bin/flashline "$out"; echo "$out"; return; fi
  mkdir -p "$work/src-$2"
  git archive "$rev" | tar -x -C "$work/src-$2"
  (cd "$work/src-$2" && go build -o "$out" ./cmd/flashline)
  echo "$out"
}
bin_a=$(build "$1" a) bin_b=$(build "$2" b)

base=${DATABASE_URL:-$(bin/flashline devdb up 2>/dev/null)}
admin_url=$(sed -E 's#/[^/?]*(\?|$)#/postgres\1#' <<<"$base")
ab_url=$(sed -E 's#/[^/?]*(\?|$)#/flashline_ab\1#' <<<"$base")
export DATABASE_URL=$ab_url FLASHLINE_ADMIN_TOKEN=bench-admin-token-0123456789abcdef FLASHLINE_JWT_SECRET=bench-jwt-secret-0123456789abcdef \
  FLASHLINE_WAITROOM_KEYS=b1:bench-waitroom-key-0123456789abcdef
addr=127.0.0.1:18490

declare -A rates wals rows
run() { # label binary clients
  PGOPTIONS="-c client_min_messages=warning" "$bindir/psql" -qX "$admin_url" -c "DROP DATABASE IF EXISTS flashline_ab WITH (FORCE)" -c "CREATE DATABASE flashline_ab"
  "$2" migrate up >/dev/null
  "$2" serve --addr "$addr" --no-workers "${serve_flags[@]}" 2>>"$work/serve.log" &
  pid=$!
  for _ in $(seq 100); do curl -fs "http://$addr/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  cost_begin "$ab_url"
  local out n rate
  out=$(bin/flashline-loadtest --quiet --target "http://$addr" --scenario hot --clients "$3" --duration "$duration")
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  grep -q '^verified *ok' <<<"$out" || { echo "cost-ab: $1 at $3 clients did not verify:" >&2; echo "$out" >&2; exit 1; }
  n=$(sed -n 's/^successful reservations *\([0-9]*\) .*/\1/p' <<<"$out")
  rate=$(sed -n 's/^successful reservations.*(\([0-9]*\)\/s).*/\1/p' <<<"$out")
  cost_end "$ab_url" "$n"
  printf '%-3s %4s clients %7s res/s %6s B WAL/res %5s rows/res  (%s)\n' "$1" "$3" "$rate" "$cost_wal" "$cost_rows" "$cost_detail"
  rates[$1,$3]+="$rate " wals[$1,$3]+="$cost_wal " rows[$1,$3]=$cost_rows
}
echo "cost-ab: A = $1, B = $2; $rounds rounds of A B B A, $duration per run, serve ${serve_flags[*]:-(defaults)}"
for r in $(seq "$rounds"); do
  for c in "${clients[@]}"; do
    run A "$bin_a" "$c"; run B "$bin_b" "$c"; run B "$bin_b" "$c"; run A "$bin_a" "$c"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
echo
printf '%-8s %12s %12s %8s %12s %12s %10s %10s\n' clients "A res/s" "B res/s" "B/A" "A WAL/res" "B WAL/res" "A rows" "B rows"
for c in "${clients[@]}"; do
  ra=$(median "${rates[A,$c]}") rb=$(median "${rates[B,$c]}") wa=$(median "${wals[A,$c]}") wb=$(median "${wals[B,$c]}")
  printf '%-8s %12s %12s %8s %12s %12s %10s %10s\n' "$c" "$ra" "$rb" "$(awk "BEGIN{ printf \"%.2fx\", $rb/$ra }")" "$wa" "$wb" "${rows[A,$c]}" "${rows[B,$c]}"
done
