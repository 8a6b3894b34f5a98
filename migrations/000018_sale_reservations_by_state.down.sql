-- Undoes 000018: reservations_sale_state holds every reservation again, and
-- the invariant reads the table as before.
CREATE OR REPLACE VIEW sale_invariant AS
SELECT s.sale_id,
       s.sku,
       s.state,
       s.initial_stock,
       st.available,
       r.pending,
       r.confirmed,
       r.expired,
       r.cancelled,
       l.ledger_total,
       (st.available + r.pending + r.confirmed)::bigint AS accounted,
       (st.available + r.pending + r.confirmed = s.initial_stock
           AND l.ledger_total = st.available) AS ok,
       r.voided
  FROM sales s
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity), 0)::bigint AS available
         FROM stock WHERE stock.sale_id = s.sale_id) st
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity) FILTER (WHERE state = 'pending'), 0)::bigint   AS pending,
              coalesce(sum(quantity) FILTER (WHERE state = 'confirmed'), 0)::bigint AS confirmed,
              coalesce(sum(quantity) FILTER (WHERE state = 'expired'), 0)::bigint   AS expired,
              coalesce(sum(quantity) FILTER (WHERE state = 'cancelled'), 0)::bigint AS cancelled,
              coalesce(sum(quantity) FILTER (WHERE state = 'voided'), 0)::bigint    AS voided
         FROM reservations WHERE reservations.sale_id = s.sale_id) r
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(delta), 0)::bigint AS ledger_total
         FROM stock_ledger WHERE stock_ledger.sale_id = s.sale_id) l;
DROP VIEW sale_reservations;

CREATE INDEX reservations_sale_state ON reservations (sale_id, state);
DROP INDEX reservations_sale_ended;
