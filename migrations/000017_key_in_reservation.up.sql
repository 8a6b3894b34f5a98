-- A reservation's idempotency key lives in the reservation's own row (issue
-- 26): the row already held the key; it now holds the request's hash too,
-- and a unique index over (customer, key) takes the place of the
-- idempotency_keys row, its two index entries and its foreign key's check,
-- about 350 bytes of WAL per reservation. The receipt is made again from the
-- row as after 000015, with the expiry it first gave, which the row now
-- keeps beside expires_at (an extension moves expires_at, and so may a DBA
-- releasing a hold by hand; a replay is still the first answer).
--
-- Keys stored before (and by instances of the version before, while the
-- service rolls) stay in idempotency_keys and are read there: a reserve looks
-- in both. The index covers only rows written with a hash, so reservations
-- of keys reused after the old retention (the prune forgot them) do not
-- stop it from being built. A key in a reservation is kept as long as the
-- reservation: the prune (--key-retention) deletes old keys of
-- idempotency_keys only.
--
-- Rolling upgrade: an instance of the version before would not find a new
-- key (it reads idempotency_keys only) and would answer a retry as a new
-- request, so it must leave the load balancer (its /readyz, once the schema
-- is ahead of it) before new keys are written, as for 000015. The nullable
-- columns are added without a rewrite, the constraint without a scan (NOT
-- VALID: no row has a hash yet); the index build holds a SHARE lock on
-- reservations (writes wait) for as long as it takes, which is quick here:
-- no row has a hash yet, so it writes no entry, but it reads the table once
-- (about a second per million reservations). On a large table, run it
-- between sales.
ALTER TABLE reservations
    ADD COLUMN request_hash bytea,
    ADD COLUMN receipt_expires_at timestamptz,
    ADD CONSTRAINT reservations_key_receipt CHECK (request_hash IS NULL OR receipt_expires_at IS NOT NULL) NOT VALID;
CREATE UNIQUE INDEX reservations_idempotency_key
    ON reservations (customer_id, idempotency_key) WHERE request_hash IS NOT NULL;

-- Every stored answer to a key, wherever it is kept: the purchase path, the
-- gate and a DBA look a key up here (WHERE customer_id = … AND key = …, one
-- index probe per branch; with LIMIT 1 the second branch is probed only when
-- the first finds nothing). The receipt is made again from sale_id, quantity
-- and receipt_expires_at, or response_body is replayed (keys stored before
-- 000015).
CREATE VIEW idempotency_answers AS
SELECT r.customer_id, r.idempotency_key AS key, r.request_hash, NULL::bytea AS response_body,
       r.reservation_id, r.sale_id, r.quantity, r.receipt_expires_at
  FROM reservations r
 WHERE r.request_hash IS NOT NULL
UNION ALL
SELECT k.customer_id, k.key, k.request_hash, k.response_body,
       k.reservation_id, r.sale_id, r.quantity, k.receipt_expires_at
  FROM idempotency_keys k
  JOIN reservations r ON r.reservation_id = k.reservation_id;
