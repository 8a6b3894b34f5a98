-- The per-request transaction of reserve_tx.sql with no hot row at all: each
-- transaction reserves in one of 10,000 sales (SKUs) picked at random, so
-- concurrent transactions almost never share a stock row. What PostgreSQL
-- does per request on this machine when the row lock costs nothing: the
-- mark the hot SKU is measured against. scripts/bench.sh creates the sales
-- (sale_cold_1 ... sale_cold_10000) with plain SQL.
\set c random(1, 2000000000)
\set s random(1, 10000)
BEGIN;
SELECT k.status_code,
       pg_try_advisory_xact_lock(hashtextextended('bench-' || :c || E'\n' || 'k', 0)),
       s.state, s.per_customer_limit, s.reservation_ttl_seconds, now()
  FROM sales s
  LEFT JOIN idempotency_keys k ON k.customer_id = 'bench-' || :c AND k.key = 'k'
 WHERE s.sale_id = 'sale_cold_' || :s;
WITH dec AS (
    UPDATE stock SET quantity = quantity - 1
     WHERE sale_id = 'sale_cold_' || :s AND bucket = 0 AND quantity >= 1
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
COMMIT;
