-- Statements run by the River jobs in jobs/.

-- name: SweepTryLock :one
-- Sweeps run one at a time: a sweep restocks several stock rows in one
-- statement, and two sweeps could lock them in opposite orders (deadlock).
-- A sweeper that finds the lock taken does nothing: the holder is sweeping
-- the same rows. Held until the end of the transaction.
SELECT pg_try_advisory_xact_lock(x'666c737765657031'::bigint) AS locked;

-- name: ReservationsExpireDue :many
-- The expiry sweeper. Takes up to @batch_size pending reservations past their
-- expires_at, skipping rows another sweeper (or a confirm/cancel) holds, marks
-- each expired with a conditional update on restocked_at IS NULL, and returns
-- their units to stock in the same statement. Only rows that conditional
-- update matched reach the stock update and the ledger, so a second sweeper, a
-- retried job or a duplicated schedule returns nothing twice. Units are summed
-- per bucket first: an UPDATE ... FROM joins each target row once, so
-- several reservations of one bucket must arrive as one row.
WITH due AS (
    SELECT d.reservation_id
      FROM reservations d
     WHERE d.state = 'pending' AND d.expires_at <= now()
     ORDER BY d.expires_at
     LIMIT @batch_size::int
       FOR UPDATE SKIP LOCKED
), expired AS (
    UPDATE reservations r
       SET state = 'expired', expired_at = now(), restocked_at = now()
      FROM due
     WHERE r.reservation_id = due.reservation_id
       AND r.state = 'pending' AND r.restocked_at IS NULL
    RETURNING r.reservation_id, r.sale_id, r.bucket, r.quantity
), per_bucket AS (
    SELECT e.sale_id, e.bucket, sum(e.quantity)::int AS quantity
      FROM expired e
     GROUP BY e.sale_id, e.bucket
), restock AS (
    UPDATE stock
       SET quantity = stock.quantity + per_bucket.quantity
      FROM per_bucket
     WHERE stock.sale_id = per_bucket.sale_id AND stock.bucket = per_bucket.bucket
    RETURNING stock.sale_id
), ledger AS (
    INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id)
    SELECT e.sale_id, e.bucket, e.quantity, 'expire', e.reservation_id FROM expired e
)
SELECT e.reservation_id, e.sale_id, e.quantity FROM expired e;

-- name: InvariantCheck :many
-- The sales the invariant job checks (every sale not closed, and closed sales
-- that still hold pending reservations), or just @sale_id when given, and
-- whether each has opened (a sale not yet open is not named in metrics):
-- its opening time has passed (opening a sale sets it), or it was created
-- open, without one.
SELECT i.sale_id, i.state, i.initial_stock, i.available, i.pending, i.confirmed,
       i.ledger_total, i.ok,
       coalesce(s.opens_at <= now(), s.state <> 'scheduled')::boolean AS opened
  FROM sale_invariant i
  JOIN sales s ON s.sale_id = i.sale_id
 WHERE (i.state <> 'closed' OR i.pending > 0)
   AND (sqlc.narg(sale_id)::text IS NULL OR i.sale_id = sqlc.narg(sale_id)::text)
 ORDER BY i.sale_id;

-- name: VariantInvariants :many
-- The invariant of each variant of @sale_id (the sale_variant_invariant
-- view, migration 000026), in order: none for a sale without variants, at
-- most 100 (sales_variant_count_range).
SELECT v.sku, v.initial_stock, v.available, v.pending, v.confirmed, v.ledger_total, v.ok
  FROM sale_variant_invariant v
 WHERE v.sale_id = @sale_id
 ORDER BY v.position;

-- name: SaleLockForVerdict :exec
-- Serialises verdicts on one sale (the job, an admin resume), so that the
-- previous verdict InvariantStatusUpsert reads is the latest one and a
-- mismatch is recorded once.
SELECT 1 FROM sales WHERE sale_id = @sale_id FOR UPDATE;

-- name: InvariantStatusUpsert :one
-- Records a verdict; returns whether the previous verdict was ok (true when
-- there was none), so that an incident is recorded once per mismatch, not once
-- per check.
WITH prev AS (
    SELECT v.ok FROM invariant_status v WHERE v.sale_id = @sale_id
), up AS (
    INSERT INTO invariant_status (sale_id, ok, checked_at, detail)
    VALUES (@sale_id, @ok, now(), @detail)
    ON CONFLICT (sale_id) DO UPDATE
       SET ok = excluded.ok, checked_at = excluded.checked_at, detail = excluded.detail
)
SELECT coalesce((SELECT prev.ok FROM prev), true)::boolean AS previous_ok;

-- name: IncidentInsert :exec
INSERT INTO incidents (sale_id, kind, detail, initial_stock, available, pending,
                       confirmed, ledger_total)
VALUES (@sale_id, @kind, @detail, @initial_stock, @available, @pending,
        @confirmed, @ledger_total);

-- name: SalePauseForIncident :exec
-- Pauses a sale whose stock does not add up (unless it is closed already).
UPDATE sales
   SET state = 'paused', pause_reason = @pause_reason, updated_at = now()
 WHERE sale_id = @sale_id AND state IN ('scheduled', 'open', 'paused');

-- name: IdempotencyKeysPrune :execrows
-- Deletes a small batch of idempotency keys older than the retention, so the
-- delete never holds many locks or a long transaction. Called until it
-- deletes fewer than @batch_size rows.
DELETE FROM idempotency_keys
 WHERE (customer_id, key) IN (
       SELECT k.customer_id, k.key
         FROM idempotency_keys k
        WHERE k.created_at < now() - make_interval(secs => @retention_seconds::int)
        LIMIT @batch_size::int);

-- name: IncidentsForSale :many
SELECT incident_id, kind, detail, initial_stock, available, pending, confirmed,
       ledger_total, created_at
  FROM incidents
 WHERE sale_id = @sale_id
 ORDER BY created_at DESC
 LIMIT 20;

-- name: SweepOverdue :one
-- How far past its expiry the oldest pending hold is, in seconds (0: none
-- overdue): the sweeper's lag, read after each sweep (the
-- reservations_pending_expiry index answers it with one probe).
SELECT coalesce(extract(epoch FROM now() - min(r.expires_at)), 0)::float8 AS overdue_seconds
  FROM reservations r
 WHERE r.state = 'pending' AND r.expires_at <= now();
