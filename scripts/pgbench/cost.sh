# Sourced by scripts/bench.sh and scripts/cost-ab.sh: what a run wrote, per
# reservation. cost_begin URL before a run (a CHECKPOINT first, when the role
# may, so that every run starts as full page writes begin again; then the WAL
# position and the database's row counters); cost_end URL N after it, once
# the run's connections have closed (a backend reports its row counters when
# it exits, or at most once a second while it works), with N the
# reservations it made: sets cost_wal (WAL bytes per reservation, the whole
# cluster's, so run nothing else on it meanwhile), cost_rows (heap rows
# inserted and updated per reservation, in that database) and cost_detail
# (the same per table, for the tables the run wrote).
# Needs $bindir (psql).
cost_snapshot() {
  "$bindir/psql" -qAtX "$1" -c "SELECT pg_current_wal_lsn(), coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables"
}
cost_begin() {
  "$bindir/psql" -qAtX "$1" -c "CHECKPOINT" >/dev/null 2>&1 || true
  cost_before=$(cost_snapshot "$1" | tr '|' ' ')
  cost_tables=$("$bindir/psql" -qAtX "$1" -c "SELECT relname || '=' || (n_tup_ins + n_tup_upd) FROM pg_stat_user_tables ORDER BY relname" | tr '\n' ' ')
}
cost_end() {
  local url=$1 n=$2 lsn0 ins0 upd0 lsn1 ins1 upd1
  read -r lsn0 ins0 upd0 <<<"$cost_before"
  read -r lsn1 ins1 upd1 <<<"$(cost_snapshot "$url" | tr '|' ' ')"
  local wal
  wal=$("$bindir/psql" -qAtX "$url" -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
  cost_wal=$(awk "BEGIN{ if ($n > 0) printf \"%.0f\", $wal/$n; else print \"-\" }")
  cost_rows=$(awk "BEGIN{ if ($n > 0) printf \"%.2f\", ($ins1 - $ins0 + $upd1 - $upd0)/$n; else print \"-\" }")
  cost_detail=$("$bindir/psql" -qAtX "$url" -c "SELECT relname || '=' || (n_tup_ins + n_tup_upd) FROM pg_stat_user_tables ORDER BY relname" |
    awk -v before="$cost_tables" -v n="$n" 'BEGIN { split(before, b, " "); for (i in b) { split(b[i], kv, "="); was[kv[1]] = kv[2] } }
      { split($0, kv, "="); d = kv[2] - was[kv[1]]; if (d > 0 && n > 0) printf "%s%s %.2f", sep, kv[1], d / n; if (d > 0) sep = ", " }')
}
