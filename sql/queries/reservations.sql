-- name: ReservationGet :one
-- A reservation, its order if it has one, who confirms its sale's holds, and
-- its variant's SKU (NULL for a sale without variants): its bucket names the
-- variant's position (bucket / 64, migration 000026).
SELECT r.reservation_id, r.sale_id, r.customer_id, r.bucket, r.quantity, r.state,
       r.created_at, r.expires_at, r.confirmed_at, r.cancelled_at, r.expired_at,
       r.restocked_at, o.order_id, r.voided_at, r.void_reason, o.payment_reference,
       s.confirmation, (r.expires_at <= now())::boolean AS past_expiry,
       v.sku AS variant
  FROM reservations r
  JOIN sales s ON s.sale_id = r.sale_id
  LEFT JOIN orders o ON o.reservation_id = r.reservation_id
  LEFT JOIN sale_variants v ON v.sale_id = r.sale_id AND v.position = r.bucket / 64
 WHERE r.reservation_id = @reservation_id;

-- name: ReservationOfCustomer :one
-- A customer's active (pending or confirmed) reservation in a sale, with the
-- columns of ReservationGet: there is at most one, and
-- reservations_one_active_per_customer finds it.
SELECT r.reservation_id, r.sale_id, r.customer_id, r.bucket, r.quantity, r.state,
       r.created_at, r.expires_at, r.confirmed_at, r.cancelled_at, r.expired_at,
       r.restocked_at, o.order_id, r.voided_at, r.void_reason, o.payment_reference,
       s.confirmation, (r.expires_at <= now())::boolean AS past_expiry,
       v.sku AS variant
  FROM reservations r
  JOIN sales s ON s.sale_id = r.sale_id
  LEFT JOIN orders o ON o.reservation_id = r.reservation_id
  LEFT JOIN sale_variants v ON v.sale_id = r.sale_id AND v.position = r.bucket / 64
 WHERE r.sale_id = @sale_id AND r.customer_id = @customer_id
   AND r.state IN ('pending', 'confirmed');

-- name: ReservationConfirm :one
-- The customer confirms a pending reservation that has not expired (even if
-- no sweep has run yet) and creates its one order, in a sale whose holds its
-- customers confirm (sales.confirmation = 'customer'; a payment event
-- confirms the others: ReservationConfirmByPayment). Concurrent confirms and
-- cancels are serialised by the reservation's row lock; the losers match no
-- row (the WHERE clause is re-evaluated on the row they waited for) and read
-- the outcome instead. orders_reservation_unique is the backstop.
WITH r AS (
    UPDATE reservations
       SET state = 'confirmed', confirmed_at = now()
     WHERE reservations.reservation_id = @reservation_id
       AND state = 'pending' AND expires_at > now()
       AND (SELECT s.confirmation FROM sales s WHERE s.sale_id = reservations.sale_id) = 'customer'
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
