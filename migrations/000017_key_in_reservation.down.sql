-- Keys stored in their reservation's row go back to idempotency_keys, as the
-- version before 000017 reads them: without a body (000015), with the expiry
-- the receipt first gave. A key of the same customer already there (none
-- should be: a reserve replays a key it finds there) stops the migration
-- before anything is written, on idempotency_keys_pkey.
INSERT INTO idempotency_keys (customer_id, key, sale_id, request_hash, status_code,
                              reservation_id, receipt_expires_at, created_at)
SELECT r.customer_id, r.idempotency_key, r.sale_id, r.request_hash, 201,
       r.reservation_id, r.receipt_expires_at, r.created_at
  FROM reservations r
 WHERE r.request_hash IS NOT NULL;

DROP VIEW idempotency_answers;
DROP INDEX reservations_idempotency_key;
ALTER TABLE reservations
    DROP CONSTRAINT reservations_key_receipt,
    DROP COLUMN receipt_expires_at,
    DROP COLUMN request_hash;
