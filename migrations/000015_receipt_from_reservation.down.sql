-- The bodies of the keys stored without one, written as flashline.Receipt
-- encodes them (encoding/json, fields in order, the expiry in RFC 3339 UTC
-- to the second), so that a replay after the downgrade is the same bytes.
UPDATE idempotency_keys k
   SET response_body = convert_to(format('{"reservationId":%s,"saleId":%s,"quantity":%s,"state":"pending","expiresAt":"%s"}',
                                         to_json(r.reservation_id), to_json(r.sale_id), r.quantity,
                                         to_char(k.receipt_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')), 'UTF8')
  FROM reservations r
 WHERE r.reservation_id = k.reservation_id AND k.response_body IS NULL;

ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_receipt,
    DROP COLUMN receipt_expires_at,
    ALTER COLUMN response_body SET NOT NULL;
