-- Variants under one line (issue 49): a sale may sell 1-100 variants (sizes,
-- tiers, editions) through one admission. A sale without variants is
-- unchanged: variant_count 0, its stock rows' variant NULL.
--
-- Each variant has its own stock rows: variant at position p with b buckets
-- owns buckets p*64 .. p*64+b-1 of its sale (sales.buckets, at most 64, is
-- then the most buckets any variant has). A reservation's bucket names its
-- variant, so the conditional decrement, the restocks and the ledger are the
-- ones a sale without variants has, per row; the limits per customer and per
-- instrument, and the one active reservation per customer
-- (reservations_one_active_per_customer), stay per sale.
--
-- Rolling upgrade: the migration only adds (a table, two nullable or
-- defaulted columns, a view), so instances of the version before keep
-- working on every sale they know. They do not know variants: until every
-- instance runs this version, do not create a sale with variants (the old
-- version would sell its stock rows as one undivided stock).
CREATE TABLE sale_variants (
    sale_id       text    NOT NULL,
    sku           text    NOT NULL,
    position      integer NOT NULL,
    title         text    NOT NULL,
    initial_stock integer NOT NULL,
    buckets       integer NOT NULL,
    CONSTRAINT sale_variants_pkey PRIMARY KEY (sale_id, sku),
    CONSTRAINT sale_variants_position_unique UNIQUE (sale_id, position),
    CONSTRAINT sale_variants_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id),
    CONSTRAINT sale_variants_sku_format CHECK (sku ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    CONSTRAINT sale_variants_position_range CHECK (position BETWEEN 0 AND 99),
    CONSTRAINT sale_variants_title_length CHECK (length(title) BETWEEN 1 AND 120),
    CONSTRAINT sale_variants_initial_stock_range CHECK (initial_stock BETWEEN 1 AND 100000000),
    CONSTRAINT sale_variants_buckets_range CHECK (buckets BETWEEN 1 AND 64)
);

ALTER TABLE sales ADD COLUMN variant_count integer NOT NULL DEFAULT 0;
ALTER TABLE sales ADD CONSTRAINT sales_variant_count_range CHECK (variant_count BETWEEN 0 AND 100);

-- NULL: the sale has no variants.
ALTER TABLE stock ADD COLUMN variant text;
ALTER TABLE stock ADD CONSTRAINT stock_variant_fkey
    FOREIGN KEY (sale_id, variant) REFERENCES sale_variants (sale_id, sku);

-- The invariant per variant, as sale_invariant is per sale: the variant's
-- available units (its stock rows) + its pending and confirmed reservations
-- (those of its buckets) = its initial stock, and its buckets' ledger adds
-- up to what they hold.
CREATE VIEW sale_variant_invariant AS
SELECT v.sale_id,
       v.sku,
       v.position,
       v.initial_stock,
       st.available,
       r.pending,
       r.confirmed,
       l.ledger_total,
       (st.available + r.pending + r.confirmed = v.initial_stock
           AND l.ledger_total = st.available) AS ok
  FROM sale_variants v
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity), 0)::bigint AS available
         FROM stock WHERE stock.sale_id = v.sale_id AND stock.variant = v.sku) st
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity) FILTER (WHERE state = 'pending'), 0)::bigint   AS pending,
              coalesce(sum(quantity) FILTER (WHERE state = 'confirmed'), 0)::bigint AS confirmed
         FROM reservations
        WHERE reservations.sale_id = v.sale_id AND reservations.state IN ('pending', 'confirmed')
          AND reservations.bucket / 64 = v.position) r
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(delta), 0)::bigint AS ledger_total
         FROM stock_ledger
        WHERE stock_ledger.sale_id = v.sale_id AND stock_ledger.bucket / 64 = v.position) l;
