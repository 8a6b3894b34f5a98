-- The purchase path. A reservation is one transaction:
--   BEGIN; ReserveBegin; ReserveCommit (repeated with another bucket if the
--   chosen one emptied meanwhile); COMMIT
-- The conditional decrement in ReserveCommit is the only statement that takes
-- stock away. Everything it writes depends on that decrement having matched a
-- row, and it is the last statement before COMMIT, so the hot stock row is
-- locked for one statement and the commit, not for a chain of round trips.

-- name: ReserveBegin :one
-- Reads everything the reserve decision needs in one round trip:
--  * the sale's state and rules;
--  * a stored answer for this (customer, idempotency key), to replay;
--  * whether another transaction is working on the same key right now:
--    pg_try_advisory_xact_lock never waits, so a concurrent retry is answered
--    409 request_in_progress at once instead of blocking on the other
--    transaction's uncommitted idempotency row. The lock is released at
--    COMMIT/ROLLBACK;
--  * whether the customer already holds an active reservation (a cheap early
--    "limit reached"; the unique index reservations_one_active_per_customer is
--    what enforces it);
--  * a bucket that holds enough stock (a plain read, no lock; -1 = sold out).
-- now() is the transaction's start time, used for created_at and expires_at.
SELECT k.request_hash, k.status_code, k.response_body,
       pg_try_advisory_xact_lock(
           hashtextextended(@customer_id::text || E'\n' || @idempotency_key::text, 0)) AS key_locked,
       s.state, s.per_customer_limit, s.reservation_ttl_seconds, s.admission,
       (s.state = 'open' OR (s.state = 'scheduled' AND coalesce(s.opens_at <= now(), false)))::boolean AS is_open,
       EXISTS (SELECT 1 FROM reservations r
                WHERE r.sale_id = s.sale_id AND r.customer_id = @customer_id::text
                  AND r.state IN ('pending', 'confirmed'))::boolean AS has_active,
       coalesce((SELECT st.bucket FROM stock st
                  WHERE st.sale_id = s.sale_id AND st.quantity >= @quantity::int
                  ORDER BY random() LIMIT 1), -1)::int AS bucket,
       now()::timestamptz AS now
  FROM sales s
  LEFT JOIN idempotency_keys k ON k.customer_id = @customer_id::text AND k.key = @idempotency_key::text
 WHERE s.sale_id = @sale_id::text;

-- name: ReservePickBucket :one
-- Another bucket with enough stock after the chosen one emptied (-1: none).
SELECT coalesce((SELECT st.bucket FROM stock st
                  WHERE st.sale_id = @sale_id::text AND st.quantity >= @quantity::int
                  ORDER BY st.quantity DESC LIMIT 1), -1)::int AS bucket;

-- name: ReserveCommit :one
-- The conditional decrement and everything that depends on it, as one
-- statement. The UPDATE re-checks quantity >= n while holding the row lock, so
-- concurrent transactions can never take more than there is (READ COMMITTED
-- re-evaluates the WHERE clause on the latest row version). If it matches no
-- row, nothing else is written. The caller rolls back unless all three counts
-- are 1: reserved = 0 means the customer already holds an active reservation
-- (limit reached); key_stored = 0 means another transaction stored this
-- idempotency key first (replay it).
WITH dec AS (
    UPDATE stock
       SET quantity = quantity - @quantity::int
     WHERE sale_id = @sale_id::text AND bucket = @bucket::int AND quantity >= @quantity::int
    RETURNING sale_id, bucket
), res AS (
    INSERT INTO reservations (reservation_id, sale_id, customer_id, bucket, quantity,
                              idempotency_key, admission_token_id, created_at, expires_at)
    SELECT @reservation_id::text, dec.sale_id, @customer_id::text, dec.bucket, @quantity::int,
           @idempotency_key::text, sqlc.narg(admission_token_id)::text, now(), @expires_at::timestamptz
      FROM dec
    ON CONFLICT (sale_id, customer_id) WHERE state IN ('pending', 'confirmed') DO NOTHING
    RETURNING reservation_id, sale_id, bucket, quantity
), idem AS (
    INSERT INTO idempotency_keys (customer_id, key, sale_id, request_hash, status_code,
                                  response_body, reservation_id)
    SELECT @customer_id::text, @idempotency_key::text, res.sale_id, @request_hash::bytea,
           201, @response_body::bytea, res.reservation_id
      FROM res
    ON CONFLICT (customer_id, key) DO NOTHING
    RETURNING reservation_id
), ledger AS (
    INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id)
    SELECT res.sale_id, res.bucket, -res.quantity, 'reserve', res.reservation_id
      FROM res
)
SELECT (SELECT count(*) FROM dec)::int  AS decremented,
       (SELECT count(*) FROM res)::int  AS reserved,
       (SELECT count(*) FROM idem)::int AS key_stored;

-- name: ReservationGet :one
SELECT r.reservation_id, r.sale_id, r.customer_id, r.bucket, r.quantity, r.state,
       r.created_at, r.expires_at, r.confirmed_at, r.cancelled_at, r.expired_at,
       r.restocked_at, o.order_id
  FROM reservations r
  LEFT JOIN orders o ON o.reservation_id = r.reservation_id
 WHERE r.reservation_id = @reservation_id;

-- name: ReservationConfirm :one
-- Confirms a pending reservation that has not expired (even if no sweep has
-- run yet) and creates its one order. Concurrent confirms and cancels are
-- serialised by the reservation's row lock; the losers match no row (the
-- WHERE clause is re-evaluated on the row they waited for) and read the
-- outcome instead. orders_reservation_unique is the backstop.
WITH r AS (
    UPDATE reservations
       SET state = 'confirmed', confirmed_at = now()
     WHERE reservations.reservation_id = @reservation_id
       AND state = 'pending' AND expires_at > now()
    RETURNING reservations.reservation_id
)
INSERT INTO orders (order_id, reservation_id)
SELECT @order_id, r.reservation_id FROM r
RETURNING order_id;

-- name: ReservationCancel :one
-- Cancels a pending reservation and returns its units exactly once: the stock
-- update and the ledger row depend on the conditional update of the
-- reservation (restocked_at IS NULL) having matched a row, so a repeated or
-- concurrent cancel, on any instance, returns nothing twice.
WITH r AS (
    UPDATE reservations
       SET state = 'cancelled', cancelled_at = now(), restocked_at = now()
     WHERE reservations.reservation_id = @reservation_id
       AND state = 'pending' AND restocked_at IS NULL
    RETURNING reservations.reservation_id, reservations.sale_id,
              reservations.bucket, reservations.quantity
), s AS (
    UPDATE stock
       SET quantity = stock.quantity + r.quantity
      FROM r
     WHERE stock.sale_id = r.sale_id AND stock.bucket = r.bucket
    RETURNING stock.sale_id
), ledger AS (
    INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id)
    SELECT r.sale_id, r.bucket, r.quantity, 'cancel', r.reservation_id FROM r
)
SELECT count(*)::int AS restocked FROM r;
