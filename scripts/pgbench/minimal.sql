-- The essential work of one reservation as one statement in its own
-- implicit transaction (autocommit), on minimal_schema.sql: the conditional
-- decrement, the reservation row and the idempotency row, each written only
-- if the one before it was. The SKU is one of the first :skus (pgbench
-- -D skus=10000: no hot row; -D skus=1: one hot row); every transaction is a
-- new customer.
\set c random(1, 2000000000)
\set s random(1, :skus)
WITH dec AS (
    UPDATE stock SET quantity = quantity - 1
     WHERE sku = :s AND quantity >= 1
    RETURNING sku
), res AS (
    INSERT INTO reservations (reservation_id, sku, customer_id, quantity)
    SELECT 'res_bench_' || :c || '_' || txid_current(), dec.sku, 'bench-' || :c, 1
      FROM dec
    RETURNING reservation_id
), idem AS (
    INSERT INTO idempotency_keys (customer_id, key, reservation_id)
    SELECT 'bench-' || :c, 'k', res.reservation_id FROM res
    ON CONFLICT DO NOTHING
    RETURNING reservation_id
)
SELECT (SELECT count(*) FROM idem);
