-- Undoes 000020. Registrations without an instrument get one of their own
-- (the previous release requires one, unique in the sale); payments
-- refused for their instrument are still payments to refund, kept as
-- 'duplicate_payment' (a payment no order took).
UPDATE lottery_registrations SET payment_instrument = 'none:' || registration_id WHERE payment_instrument IS NULL;
ALTER TABLE lottery_registrations ALTER COLUMN payment_instrument SET NOT NULL;

UPDATE late_payments SET reason = 'duplicate_payment' WHERE reason = 'instrument_limit';
ALTER TABLE late_payments
    DROP CONSTRAINT late_payments_reason_valid,
    ADD CONSTRAINT late_payments_reason_valid
        CHECK (reason IN ('hold_expired', 'hold_cancelled', 'hold_voided', 'duplicate_payment', 'amount_mismatch'));

DROP TABLE payment_instruments;

DROP INDEX orders_by_payment_instrument;
ALTER TABLE orders
    DROP CONSTRAINT orders_payment_instrument_length,
    DROP COLUMN payment_instrument;
