-- name: MigrationLock :exec
-- Serialises schema migrations across processes. A session lock, held on one
-- connection while the migrations run on others (River's migrations need
-- several transactions). The key is an arbitrary constant: 'flashlin' in hex.
SELECT pg_advisory_lock(x'666c6173686c696e'::bigint);

-- name: MigrationUnlock :exec
SELECT pg_advisory_unlock(x'666c6173686c696e'::bigint);
