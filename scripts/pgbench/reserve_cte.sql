-- The same work as one statement in its own implicit transaction: the best
-- one-reservation-per-transaction form on one hot row
-- (measured with pgbench on this project's machine: about twice the multi-statement rate).
\set c random(1, 2000000000)
WITH dec AS (
    UPDATE stock SET quantity = quantity - 1
     WHERE sale_id = :sale AND bucket = 0 AND quantity >= 1
    RETURNING sale_id, bucket
), res AS (
    INSERT INTO reservations (reservation_id, sale_id, customer_id, bucket, quantity, idempotency_key, expires_at)
    SELECT 'res_bench_' || :c || '_' || txid_current(), dec.sale_id, 'bench-' || :c, dec.bucket, 1, 'k', now() + interval '10 minutes'
      FROM dec
    ON CONFLICT (sale_id, customer_id) WHERE state IN ('pending', 'confirmed') DO NOTHING
    RETURNING reservation_id, sale_id, bucket, quantity
), idem AS (
    INSERT INTO idempotency_keys (customer_id, key, sale_id, request_hash, status_code, response_body, reservation_id)
    SELECT 'bench-' || :c, 'k', res.sale_id, '\x00'::bytea, 201, '\x00'::bytea, res.reservation_id FROM res
    ON CONFLICT (customer_id, key) DO NOTHING
    RETURNING reservation_id
), ledger AS (
    INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id)
    SELECT res.sale_id, res.bucket, -res.quantity, 'reserve', res.reservation_id FROM res
)
SELECT (SELECT count(*) FROM dec), (SELECT count(*) FROM res), (SELECT count(*) FROM idem);
