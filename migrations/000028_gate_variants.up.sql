-- The Redis gate for a sale with variants (issue 49): the gate keeps one
-- counter per variant (flashline:gate:{sale}:stock:<sku>), so every unit
-- owed back to it must say which counter it goes back to. A sale without
-- variants is unchanged: its movements' variant is NULL and its one counter
-- is flashline:gate:{sale}:stock, as before.
--
-- Rolling upgrade: the migration only adds a nullable column and makes the
-- restock trigger fill it (NULL for a sale without variants, as the rows the
-- version before writes), so instances of the version before keep working on
-- every sale they know, gated ones included. They do not know a gate's
-- per-variant counters: until every instance runs this version, do not
-- create a gated sale with variants (the version before refuses to create
-- one; its gate job would find the sale's one counter missing and pause it,
-- and its returns would not name the variant).
--
-- The foreign key is added NOT VALID: every existing row's variant is NULL,
-- so there is nothing to check, and a validating scan of gate_outbox would
-- hold the table's lock (taken by ADD COLUMN, kept to the migration's
-- commit) for as long as it reads every row, with every cancel, expiry and
-- relay of every sale queued behind it. New rows are checked as always.
ALTER TABLE gate_outbox ADD COLUMN variant text;
ALTER TABLE gate_outbox ADD CONSTRAINT gate_outbox_variant_fkey
    FOREIGN KEY (sale_id, variant) REFERENCES sale_variants (sale_id, sku) NOT VALID;

-- A restock owes its units to the counter of the reservation's variant: the
-- one whose stock rows its bucket is among (position = bucket / 64, as in
-- the sale_variant_invariant view); NULL in a sale without variants.
CREATE OR REPLACE FUNCTION gate_outbox_restock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gate_outbox (movement_id, sale_id, customer_id, quantity, reason, variant)
    VALUES ('restock:' || NEW.reservation_id, NEW.sale_id, NEW.customer_id, NEW.quantity, 'restock',
            (SELECT v.sku FROM sale_variants v
              WHERE v.sale_id = NEW.sale_id AND v.position = NEW.bucket / 64))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
