-- The purchase path. Concurrent reservations for one sale on one instance are
-- coalesced into a batch (postgres/batch.go), and a batch is one transaction
-- of three round trips:
--
--   BEGIN; SET LOCAL plan_cache_mode = force_generic_plan;
--   ReserveBatchBegin;          -- one round trip (postgres/pipeline.go); the
--                               -- SET LOCAL: planned once, not at every Bind
--   ReserveBatchCommit;         -- another
--   COMMIT                      -- the third, only if it took what it allocated
--
-- and, when the decrement missed (others took the stock since the read):
--
--   ReserveLockBucket; ReserveBatchCommit   -- before the COMMIT
--
-- or when a request of the batch will hear sold out (its key is asked about
-- again first): ReserveKeysStored before the COMMIT.
--
-- A request on its own is a batch of one: there is one purchase path. The
-- conditional decrement in ReserveBatchCommit is the only statement that takes
-- stock away; it takes the units of the whole batch at once, so the hot stock
-- row is locked once per batch instead of once per reservation.

-- name: ReserveBatchBegin :many
-- Reads everything the reserve decisions need, one row per request in the
-- order given, each with the sale's state and rules. Every lookup per request
-- is a correlated subquery with LIMIT (a LATERAL, or a scalar subquery), never
-- a join or an EXISTS: PostgreSQL runs those as one index probe per request.
-- A flash sale grows its tables faster than autovacuum analyzes them, and
-- with joins or EXISTS the planner, believing them small, hashed every active
-- reservation of the sale once per batch.
--  * a stored answer for the (customer, idempotency key), to replay, from
--    idempotency_answers: the reservation that holds the key (migration
--    000017), or the key's row in idempotency_keys (keys stored before it,
--    and by the version before it while the service rolls). What is
--    replayed is its body (keys stored before migration 000015), or the
--    receipt made again of the reservation's id, sale and quantity and the
--    expiry it first gave, which the key keeps (an extension moves the
--    reservation's own);
--  * the customer's lock: pg_try_advisory_xact_lock never waits. Held until
--    COMMIT/ROLLBACK, it means no other transaction, on any instance, is
--    reserving for this customer, so what the next statement reads about the
--    customer's keys and reservations cannot change under it. A request whose
--    lock is taken is tried again in a later batch;
--  * whether the customer already holds an active reservation for the sale
--    (the unique index reservations_one_active_per_customer enforces it);
--  * whether the admission token was used already
--    (reservations_admission_token_unique enforces it);
--  * for sales with a per-instrument limit, the payment instrument's lock
--    (same rule as the customer's: no other transaction reserves on it while
--    this one runs) and the units it holds in the sale;
--  * for a gated sale, whether the unit the gate handed out for the request
--    (gate_seq) was given back already, or handed out before the counter's
--    last rebuild: it cannot be reserved any more;
--  * the stock of every bucket of the request's variant (@variant: '' for a
--    sale without variants, whose rows' variant is NULL), read without a
--    lock; variant_count says whether the sale has variants (migration
--    000026). A batch holds requests of one variant (coalescer.go).
-- now() is the transaction's start time, used for created_at and expires_at.
-- The batch never holds two requests of one customer, or of one payment
-- instrument (batch.go defers them).
WITH input AS (
    -- Set-returning functions in a select list run in step: one row per
    -- request, in order.
    SELECT unnest(@customer_ids::text[])     AS customer_id,
           unnest(@idempotency_keys::text[]) AS idempotency_key,
           unnest(@admission_ids::text[])    AS admission_id,
           unnest(@instruments::text[])      AS instrument,
           unnest(@gate_seqs::bigint[])      AS gate_seq,
           generate_series(1, cardinality(@customer_ids::text[])) AS ord
), sale AS MATERIALIZED ( -- read once, not once per request
    SELECT s.sale_id, s.state, s.per_customer_limit, s.reservation_ttl_seconds, s.admission,
           s.per_instrument_limit, s.min_account_age_seconds, s.gate_epoch,
           (s.state = 'open' OR (s.state = 'scheduled' AND coalesce(s.opens_at <= now(), false)))::boolean AS is_open,
           s.variant_count,
           (SELECT array_agg(st.bucket ORDER BY st.bucket) FROM stock st
             WHERE st.sale_id = s.sale_id AND coalesce(st.variant, '') = @variant::text)::int[] AS buckets,
           (SELECT array_agg(st.quantity ORDER BY st.bucket) FROM stock st
             WHERE st.sale_id = s.sale_id AND coalesce(st.variant, '') = @variant::text)::int[] AS quantities
      FROM sales s
     WHERE s.sale_id = @sale_id::text
)
SELECT i.ord::int AS ord,
       -- stored: the key has an answer (its receipt) to replay.
       (k.request_hash IS NOT NULL)::boolean AS stored, k.request_hash, k.response_body,
       coalesce(k.reservation_id, '')::text AS stored_reservation_id, coalesce(k.sale_id, '')::text AS stored_sale_id,
       coalesce(k.quantity, 0)::int AS stored_quantity, k.receipt_expires_at AS stored_expires_at,
       pg_try_advisory_xact_lock(hashtextextended('flashline customer' || E'\n' || i.customer_id, 0)) AS locked,
       ((SELECT true FROM reservations r
          WHERE r.sale_id = sale.sale_id AND r.customer_id = i.customer_id
            AND r.state IN ('pending', 'confirmed')
          LIMIT 1) IS NOT NULL)::boolean AS has_active,
       (i.admission_id <> '' AND (SELECT true FROM reservations r
                                   WHERE r.admission_token_id = i.admission_id
                                   LIMIT 1) IS NOT NULL)::boolean AS admission_used,
       (i.instrument = '' OR sale.per_instrument_limit IS NULL OR pg_try_advisory_xact_lock(hashtextextended(
           'flashline instrument' || E'\n' || sale.sale_id || E'\n' || i.instrument, 0)))::boolean AS instrument_locked,
       (SELECT coalesce(sum(r.quantity), 0) FROM reservations r
         WHERE sale.per_instrument_limit IS NOT NULL AND i.instrument <> ''
           AND r.sale_id = sale.sale_id AND r.payment_instrument = i.instrument
           AND r.state IN ('pending', 'confirmed'))::int AS instrument_units,
       (i.gate_seq <> 0 AND ((i.gate_seq >> 40) <> sale.gate_epoch
                             OR (SELECT true FROM gate_outbox o
                                  WHERE o.sale_id = sale.sale_id AND o.gate_seq = i.gate_seq
                                  LIMIT 1) IS NOT NULL))::boolean AS gate_returned,
       sale.state, sale.per_customer_limit, sale.reservation_ttl_seconds, sale.admission, sale.is_open,
       coalesce(sale.per_instrument_limit, 0)::int AS per_instrument_limit, sale.min_account_age_seconds,
       sale.buckets, sale.quantities, sale.variant_count,
       now()::timestamptz AS now
  FROM input i
 CROSS JOIN sale
  LEFT JOIN LATERAL (SELECT a.request_hash, a.response_body, a.reservation_id, a.sale_id, a.quantity, a.receipt_expires_at
                       FROM idempotency_answers a
                      WHERE a.customer_id = i.customer_id AND a.key = i.idempotency_key
                      LIMIT 1) k ON true
 ORDER BY i.ord;

-- name: ReserveKeysStored :many
-- Which of a batch's (customer, key) pairs have a stored answer now. A batch
-- about to answer sold out asks again: its first read's snapshot may predate
-- the commit of another attempt with the same key (on another instance),
-- whose customer lock was free by the time the read asked for it, so the
-- read saw neither its stored answer nor the unit it took.
WITH input AS (
    SELECT unnest(@customer_ids::text[])     AS customer_id,
           unnest(@idempotency_keys::text[]) AS idempotency_key
)
SELECT i.customer_id::text AS customer_id, i.idempotency_key::text AS key
  FROM input i
 WHERE (SELECT true FROM idempotency_answers a
         WHERE a.customer_id = i.customer_id AND a.key = i.idempotency_key
         LIMIT 1) IS NOT NULL;

-- name: ReserveLockBucket :one
-- Locks one bucket's stock row and reads its quantity, for allocating a batch
-- that ReserveBatchCommit could not take whole. The lock is held to COMMIT.
SELECT quantity FROM stock WHERE sale_id = @sale_id::text AND bucket = @bucket::int FOR UPDATE;

-- name: ReserveBatchCommit :one
-- The conditional decrement of the whole batch and everything that depends on
-- it, as one statement. The UPDATE re-checks quantity >= total while holding
-- the row lock (READ COMMITTED re-evaluates the WHERE clause on the latest row
-- version), so concurrent batches can never take more than there is. If it
-- matches no row, nothing else is written and the caller allocates against the
-- locked quantity (ReserveLockBucket). A reservation of one of these
-- customers, or of their key, committed since ReserveBatchBegin read (between
-- its snapshot and the customer's lock) is caught by the unique indexes,
-- which check every committed row whatever the snapshot: the statement fails
-- (unique_violation), the caller rolls the batch back and runs it again, and
-- the new read answers the request concerned. (ON CONFLICT DO NOTHING, which
-- skipped the row instead, wrote a confirmation record per row, 48 bytes of
-- WAL per reservation, for a conflict that needs the rollback anyway.) A
-- payment instrument's units are counted again against this statement's
-- snapshot, which is newer than the instrument's lock. The idempotency key
-- is stored in the reservation's row with the request's hash and the expiry
-- its receipt gives (migration 000017), and reservations_idempotency_key
-- keeps it unique per customer. The caller commits only when reserved equals
-- the batch size.
WITH input AS (
    SELECT unnest(@reservation_ids::text[])  AS reservation_id,
           unnest(@customer_ids::text[])     AS customer_id,
           unnest(@idempotency_keys::text[]) AS idempotency_key,
           unnest(@quantities::int[])        AS quantity,
           unnest(@request_hashes::bytea[])  AS request_hash,
           unnest(@admission_ids::text[])    AS admission_id,
           unnest(@instruments::text[])      AS instrument,
           unnest(@gate_seqs::bigint[])      AS gate_seq
), dec AS (
    UPDATE stock
       SET quantity = stock.quantity - @total::int
     WHERE stock.sale_id = @sale_id::text AND stock.bucket = @bucket::int AND stock.quantity >= @total::int
    RETURNING stock.sale_id, stock.bucket
), res AS (
    INSERT INTO reservations (reservation_id, sale_id, customer_id, bucket, quantity,
                              idempotency_key, request_hash, receipt_expires_at, admission_token_id,
                              payment_instrument, gate_seq, created_at, expires_at)
    SELECT i.reservation_id, dec.sale_id, i.customer_id, dec.bucket, i.quantity,
           i.idempotency_key, i.request_hash, @expires_at::timestamptz, nullif(i.admission_id, ''),
           nullif(i.instrument, ''), nullif(i.gate_seq, 0), now(), @expires_at::timestamptz
      FROM input i
     CROSS JOIN dec
     WHERE (@per_instrument_limit::int = 0 OR i.instrument = '' OR
            (SELECT coalesce(sum(r.quantity), 0) FROM reservations r
              WHERE r.sale_id = dec.sale_id AND r.payment_instrument = i.instrument
                AND r.state IN ('pending', 'confirmed')) + i.quantity <= @per_instrument_limit::int)
       -- A gate unit given back since the read (GateReturn) cannot be held:
       -- this snapshot is newer than the customer's lock, so it sees it. Nor
       -- one handed out before a rebuild: the sale row's FOR SHARE lock
       -- (taken only for a gated batch) orders this statement and the
       -- rebuild's epoch bump, so one of them sees the other.
       AND (i.gate_seq = 0 OR (
                (i.gate_seq >> 40) = (SELECT s.gate_epoch FROM sales s
                                       WHERE s.sale_id = dec.sale_id AND @gated::boolean
                                         FOR SHARE)
            AND (SELECT true FROM gate_outbox o
                  WHERE o.sale_id = dec.sale_id AND o.gate_seq = i.gate_seq
                  LIMIT 1) IS NULL))
    RETURNING reservations.reservation_id, reservations.sale_id, reservations.bucket, reservations.quantity
), ledger AS (
    -- One row for the batch's decrement, naming the reservations it took
    -- the units for (migration 000016).
    INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_ids)
    SELECT res.sale_id, res.bucket, -sum(res.quantity), 'reserve', array_agg(res.reservation_id)
      FROM res
     GROUP BY res.sale_id, res.bucket
)
SELECT (SELECT count(*) FROM dec)::int AS decremented,
       (SELECT count(*) FROM res)::int AS reserved;
