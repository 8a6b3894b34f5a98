-- A new reservation writes one index entry fewer (issue 26): a sale's
-- reservations are found through two partial indexes, one for the live ones
-- and one for the ended ones, instead of reservations_sale_state, which held
-- every reservation (about 100 bytes of WAL each). A pending or confirmed
-- reservation is already in reservations_one_active_per_customer, whose key
-- starts with the sale; an ended one (expired, cancelled, voided) is now in
-- reservations_sale_ended. The two predicates are complements, so every
-- reservation is in exactly one of them, whatever states come later. A state
-- change (pending to confirmed or expired, confirmed to voided) writes new
-- entries in every index anyway (the state is in their predicates: never a
-- HOT update), so no change writes more than before.
--
-- A query for a sale's reservations whatever their state reads the view
-- sale_reservations (WHERE sale_id = …): its two branches are one per index,
-- and PostgreSQL pushes the sale into both. A plain WHERE sale_id = … on
-- reservations, without a state that implies one of the predicates, has no
-- index to use any more and reads the whole table.
--
-- Rolling upgrade: instances of the version before read a sale's
-- reservations with WHERE sale_id = … on the table (the sale cache's holders
-- on every reload of a sold-out sale, the invariant job, the sale's GET), so
-- once the old index is gone they read the whole table each time. The
-- answers stay right; on a large table, roll the instances promptly, or run
-- the migration between sales. The index build holds a SHARE lock on
-- reservations (writes wait) while it reads the table once and writes an
-- entry per ended reservation: run it between sales on a large table.
CREATE INDEX reservations_sale_ended
    ON reservations (sale_id, state) WHERE state NOT IN ('pending', 'confirmed');
DROP INDEX reservations_sale_state;

-- Every reservation, each branch read through the index that holds its
-- state: filter it by sale_id.
CREATE VIEW sale_reservations AS
SELECT * FROM reservations WHERE state IN ('pending', 'confirmed')
UNION ALL
SELECT * FROM reservations WHERE state NOT IN ('pending', 'confirmed');

-- The invariant as before (000007), reading the sale's reservations through
-- the view.
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
         FROM sale_reservations WHERE sale_reservations.sale_id = s.sale_id) r
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(delta), 0)::bigint AS ledger_total
         FROM stock_ledger WHERE stock_ledger.sale_id = s.sale_id) l;
