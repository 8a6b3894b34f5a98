-- The Redis gate (gate/, postgres/gate.go). Redis counts the units a gated
-- sale may still hand out; these statements keep it honest: every unit it
-- hands out ends in exactly one of a reservation (reservations.gate_seq) or
-- a return (gate_outbox), and every unit owed back reaches it once.

-- name: GateLockCustomer :exec
-- The customer's advisory lock, the same key the purchase path takes
-- (ReserveBatchBegin): while it is held, no reservation of the customer can
-- commit, so what GateReturn reads next cannot change under it. Waits.
SELECT pg_advisory_xact_lock(hashtextextended('flashline customer' || E'\n' || @customer_id::text, 0));

-- name: GateReturn :one
-- Gives unit <gate_seq> back to the gate, unless a reservation holds it; run
-- after GateLockCustomer in the same transaction, so its snapshot sees every
-- reservation that could hold it. At most one return per seq (primary key,
-- and gate_outbox_return_seq). returned is false when a reservation holds
-- the seq or it was returned already. @variant is the variant whose counter
-- the unit came from, in a sale with variants (empty: none, the sale's one
-- counter; migration 000028).
-- A unit handed out before the counter's last rebuild is not returned: the
-- rebuilt counter already counts it. The epoch is read FOR SHARE, so a
-- return and a rebuild (GateNextEpoch's UPDATE of the same row) take turns:
-- a rebuild that comes first makes this read its new epoch (READ COMMITTED
-- reads the row again once the lock is granted) and the unit is not
-- returned; a return that comes first commits before the rebuild's settle
-- statement starts, which then sees its row and settles it. Unlocked, a
-- return that read the old epoch and committed after that statement's
-- snapshot was both counted by the rebuilt counter and relayed to it.
WITH ins AS (
    INSERT INTO gate_outbox (movement_id, sale_id, customer_id, quantity, reason, gate_seq, variant)
    SELECT 'return:' || @sale_id::text || ':' || @gate_seq::bigint, @sale_id::text,
           @customer_id::text, @quantity::int, 'return', @gate_seq::bigint, NULLIF(@variant::text, '')
     WHERE (SELECT true FROM reservations r
             WHERE r.sale_id = @sale_id::text AND r.gate_seq = @gate_seq::bigint
             LIMIT 1) IS NULL
       AND (@gate_seq::bigint >> 40) = (SELECT s.gate_epoch FROM sales s WHERE s.sale_id = @sale_id::text FOR SHARE)
    ON CONFLICT DO NOTHING
    RETURNING movement_id
)
SELECT (SELECT count(*) FROM ins)::int > 0 AS returned;

-- name: GateSettlements :many
-- For units the gate handed out: whether a reservation holds each, or it was
-- returned.
SELECT s.seq::bigint AS seq,
       ((SELECT true FROM reservations r
          WHERE r.sale_id = @sale_id::text AND r.gate_seq = s.seq LIMIT 1) IS NOT NULL)::boolean AS reserved,
       ((SELECT true FROM gate_outbox o
          WHERE o.sale_id = @sale_id::text AND o.gate_seq = s.seq LIMIT 1) IS NOT NULL)::boolean AS returned
  FROM unnest(@seqs::bigint[]) AS s(seq);

-- name: GateOutboxTake :many
-- The relay's next movements, oldest first, locked so that concurrent relays
-- take different rows (SKIP LOCKED); marked applied in the same transaction
-- once Redis has them (which would also dedupe a second application). A
-- movement's variant names the counter it goes back to (empty: the sale's
-- one counter, a sale without variants). Sales
-- in @skip_sales (whose counter cannot take them now) are left for later,
-- and so are the movements in @skip_movements (set aside by this relay).
-- A movement written without a variant by an instance of the version before
-- migration 000028 (during a rolling upgrade) in a sale with variants has
-- its variant resolved here when it can be: a restock's is its
-- reservation's (bucket / 64 is the variant's position, as the restock
-- trigger has it); has_variants says the sale has variants, so that the
-- relay sets aside one still without a variant instead of applying it to a
-- counter the sale does not have.
SELECT o.movement_id, o.sale_id, o.customer_id, o.quantity, o.reason, o.gate_seq,
       coalesce(o.variant,
                (SELECT v.sku FROM reservations r
                   JOIN sale_variants v ON v.sale_id = r.sale_id AND v.position = r.bucket / 64
                  WHERE o.reason = 'restock' AND r.sale_id = o.sale_id
                    AND r.reservation_id = substr(o.movement_id, length('restock:') + 1)),
                '')::text AS variant,
       EXISTS (SELECT 1 FROM sale_variants v WHERE v.sale_id = o.sale_id)::boolean AS has_variants
  FROM gate_outbox o
 WHERE o.applied_at IS NULL AND NOT (o.sale_id = ANY(@skip_sales::text[]))
   AND NOT (o.movement_id = ANY(@skip_movements::text[]))
 ORDER BY o.created_at
 LIMIT @batch_size::int
   FOR UPDATE SKIP LOCKED;

-- name: GateOutboxMarkApplied :exec
UPDATE gate_outbox SET applied_at = now()
 WHERE movement_id = ANY(@movement_ids::text[]) AND applied_at IS NULL;

-- name: GateLedger :one
-- What the database says a gated sale's counter should account for: units
-- available, and units owed back to the gate and not applied yet (with the age
-- of the oldest, the relay's lag, and each movement: the gate job asks Redis
-- which of them it applied already, since a relay marks them applied only
-- after Redis has them), and the epoch of its counter (rebuilds so far),
-- which the counter in Redis must carry.
-- stock_version and returns say whether anything moved between two reads:
-- the gate job reads this before and after reading Redis, and judges the
-- drift only when both are the same. stock_version is the versions (xmin)
-- of the sale's stock rows, which every reservation and restock updates (a
-- reservation and a restock of the same quantity leave available as it
-- was, not the rows' versions); returns counts the units ever given back
-- (the partial index gate_outbox_return_seq), which a return written and
-- relayed between two reads changes while the owed movements do not.
-- A sale with variants has a counter per variant: variant_skus (in position
-- order) and variant_available are each variant's units in its stock rows,
-- and owed_variants the variant of each movement owed (empty: none; all of
-- them in a sale without variants, whose variant arrays are empty).
-- The movements owed are read once (owed, materialized) for their age, ids,
-- quantities and variants.
WITH owed AS MATERIALIZED (
    SELECT o.movement_id, o.quantity, coalesce(o.variant, '') AS variant, o.created_at
      FROM gate_outbox o
     WHERE o.sale_id = @sale_id::text AND o.applied_at IS NULL
)
SELECT coalesce((SELECT s.gate_epoch FROM sales s WHERE s.sale_id = @sale_id::text), 0)::bigint AS epoch,
       coalesce((SELECT sum(st.quantity) FROM stock st WHERE st.sale_id = @sale_id::text), 0)::bigint AS available,
       coalesce((SELECT string_agg(st.bucket || ':' || st.xmin::text, ',' ORDER BY st.bucket)
                   FROM stock st WHERE st.sale_id = @sale_id::text), '')::text AS stock_version,
       (SELECT count(*) FROM gate_outbox o
         WHERE o.sale_id = @sale_id::text AND o.gate_seq IS NOT NULL)::bigint AS returns,
       coalesce((SELECT extract(epoch FROM now() - min(w.created_at)) FROM owed w), 0)::float8 AS owed_age_seconds,
       coalesce((SELECT array_agg(w.movement_id ORDER BY w.movement_id) FROM owed w), '{}')::text[] AS owed_ids,
       coalesce((SELECT array_agg(w.quantity ORDER BY w.movement_id) FROM owed w), '{}')::int[] AS owed_quantities,
       coalesce((SELECT array_agg(w.variant ORDER BY w.movement_id) FROM owed w), '{}')::text[] AS owed_variants,
       coalesce((SELECT array_agg(v.sku ORDER BY v.position) FROM sale_variants v
                  WHERE v.sale_id = @sale_id::text), '{}')::text[] AS variant_skus,
       coalesce((SELECT array_agg((SELECT coalesce(sum(st.quantity), 0) FROM stock st
                                    WHERE st.sale_id = v.sale_id AND st.variant = v.sku) ORDER BY v.position)
                   FROM sale_variants v WHERE v.sale_id = @sale_id::text), '{}')::bigint[] AS variant_available;

-- name: GateOwedToCustomer :one
-- Units of a customer owed back to a gated sale's counter and not applied
-- yet (restocks of their holds, returns of their attempts' units): the gate's
-- count of the customer's units is above the database's by as many; and
-- whether the customer holds an active (pending or confirmed) reservation of
-- the sale, what the purchase path refuses limit_reached for (has_active in
-- reserve.sql). One read for the gate's limit refusal.
SELECT coalesce((SELECT sum(quantity) FROM gate_outbox
                  WHERE sale_id = @sale_id::text AND customer_id = @customer_id::text AND applied_at IS NULL), 0)::bigint AS owed,
       EXISTS (SELECT 1 FROM reservations
                WHERE sale_id = @sale_id::text AND customer_id = @customer_id::text
                  AND state IN ('pending', 'confirmed'))::boolean AS holds;

-- name: GateStoredAnswer :one
-- The stored answer to a customer's idempotency key (to replay), read on its
-- own: a retry whose first attempt reserved is answered from it while the
-- gate cannot run its step (Redis down, the counter missing or rebuilt).
-- The key is looked up as the purchase path's read does (idempotency_answers),
-- and the receipt is made again the same way.
SELECT a.request_hash, a.response_body, a.reservation_id AS stored_reservation_id,
       a.sale_id AS stored_sale_id, a.quantity AS stored_quantity, a.receipt_expires_at AS stored_expires_at
  FROM idempotency_answers a
 WHERE a.customer_id = @customer_id::text AND a.key = @key::text
 LIMIT 1;

-- name: GateNextEpoch :one
-- Starts a rebuild of a paused gated sale's counter: the units handed out
-- so far belong to the old epoch. The row lock orders this against batches
-- committing gated reservations (ReserveBatchCommit's FOR SHARE). No row:
-- the sale is unknown, not gated or not paused.
UPDATE sales SET gate_epoch = gate_epoch + 1, updated_at = now()
 WHERE sale_id = @sale_id::text AND gate = 'redis' AND state = 'paused'
RETURNING gate_epoch;

-- name: GateRebuildTryLock :one
-- A rebuild of the sale's counter runs alone: a session-level advisory lock,
-- held on a connection of its own for as long as the rebuild runs. It never
-- waits (a second rebuild is refused at once, and says so); it goes with the
-- session if the connection or the process dies.
SELECT pg_try_advisory_lock(hashtextextended('flashline gate rebuild' || E'\n' || @sale_id::text, 0)) AS locked;

-- name: GateRebuildUnlock :exec
SELECT pg_advisory_unlock(hashtextextended('flashline gate rebuild' || E'\n' || @sale_id::text, 0));

-- name: GateRebuildSettle :one
-- The rest of a rebuild, after GateNextEpoch, in one statement and so one
-- snapshot: the movements owed to the old counter marked applied (the new
-- counter is computed from this database, so it counts them already), the
-- new counter (initial − pending − confirmed, the sale_invariant view), and
-- the active gated reservations it is made of (who holds how many units,
-- under which idempotency key and unit number: the buyer set and the
-- attempts); in a sale with variants, each variant's counter too (its
-- initial stock − its pending − its confirmed, the sale_variant_invariant
-- view's terms; variant_skus in position order). A restock (cancel, expiry,
-- void) committed while this runs is
-- in all three or in none: in none, it stays owed and the relay applies it
-- to the new counter. As separate statements at READ COMMITTED, one that
-- committed between the settling and the counting was counted by the new
-- counter and relayed to it again. Not REPEATABLE READ for the whole
-- transaction: its snapshot would be taken by GateNextEpoch's UPDATE before
-- it waits for the returns holding the sale row (GateReturn's FOR SHARE),
-- and would miss the rows they commit.
WITH settled AS (
    UPDATE gate_outbox SET applied_at = now()
     WHERE sale_id = @sale_id::text AND applied_at IS NULL
    RETURNING movement_id
), holds AS (
    SELECT r.customer_id, r.idempotency_key, r.quantity, r.gate_seq
      FROM reservations r
     WHERE r.sale_id = @sale_id::text AND r.state IN ('pending', 'confirmed') AND r.gate_seq IS NOT NULL
)
SELECT (SELECT i.initial_stock::bigint - i.pending - i.confirmed
          FROM sale_invariant i WHERE i.sale_id = @sale_id::text)::bigint AS counter,
       (SELECT count(*) FROM settled)::int AS settled,
       coalesce((SELECT array_agg(h.customer_id ORDER BY h.gate_seq) FROM holds h), '{}')::text[] AS hold_customers,
       coalesce((SELECT array_agg(h.idempotency_key ORDER BY h.gate_seq) FROM holds h), '{}')::text[] AS hold_keys,
       coalesce((SELECT array_agg(h.quantity ORDER BY h.gate_seq) FROM holds h), '{}')::int[] AS hold_quantities,
       coalesce((SELECT array_agg(h.gate_seq ORDER BY h.gate_seq) FROM holds h), '{}')::bigint[] AS hold_seqs,
       coalesce((SELECT array_agg(v.sku ORDER BY v.position) FROM sale_variants v
                  WHERE v.sale_id = @sale_id::text), '{}')::text[] AS variant_skus,
       coalesce((SELECT array_agg(v.initial_stock::bigint
                                  - (SELECT coalesce(sum(r.quantity), 0) FROM reservations r
                                      WHERE r.sale_id = v.sale_id AND r.state IN ('pending', 'confirmed')
                                        AND r.bucket / 64 = v.position) ORDER BY v.position)
                   FROM sale_variants v WHERE v.sale_id = @sale_id::text), '{}')::bigint[] AS variant_counters;

-- name: GatedSales :many
-- Every gated sale the gate job looks after: not closed, or closed for less
-- than a day (units may still come back to it).
SELECT s.sale_id, s.state, s.created_at
  FROM sales s
 WHERE s.gate = 'redis' AND (s.state <> 'closed' OR s.updated_at > now() - interval '1 day')
 ORDER BY s.sale_id;

-- name: GateIncident :one
-- Records an incident of a gated sale's gate (kind gate_*), with the sale's
-- counts as they stand; with @pause it pauses the sale too (unless it is
-- paused or closed already) and records the incident only if it did, so a
-- gate that stays broken is one incident, not one per check. paused is
-- whether this statement paused it.
WITH p AS (
    UPDATE sales
       SET state = 'paused', pause_reason = @reason::text, updated_at = now()
     WHERE sale_id = @sale_id::text AND @pause::boolean AND state IN ('scheduled', 'open')
    RETURNING sale_id
), i AS (
    INSERT INTO incidents (sale_id, kind, detail, initial_stock, available, pending, confirmed, ledger_total)
    SELECT v.sale_id, @kind::text, @detail::text, v.initial_stock, v.available, v.pending, v.confirmed, v.ledger_total
      FROM sale_invariant v
     WHERE v.sale_id = @sale_id::text AND (NOT @pause::boolean OR EXISTS (SELECT 1 FROM p))
    RETURNING incident_id
)
SELECT (SELECT count(*) FROM p)::int > 0 AS paused;
