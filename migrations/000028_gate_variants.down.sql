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
