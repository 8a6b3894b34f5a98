-- A gated sale with variants cannot be kept by the version before: its gate
-- has a counter per variant, which that version neither reads nor relays
-- to. The down migration refuses while one exists (delete or
-- close-and-archive it first).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM sales WHERE variant_count > 0 AND gate = 'redis') THEN
        RAISE EXCEPTION 'gated sales with variants exist: the version before cannot gate them';
    END IF;
END $$;
CREATE OR REPLACE FUNCTION gate_outbox_restock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gate_outbox (movement_id, sale_id, customer_id, quantity, reason)
    VALUES ('restock:' || NEW.reservation_id, NEW.sale_id, NEW.customer_id, NEW.quantity, 'restock')
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

ALTER TABLE gate_outbox DROP CONSTRAINT gate_outbox_variant_fkey;
ALTER TABLE gate_outbox DROP COLUMN variant;
