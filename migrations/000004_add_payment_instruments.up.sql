-- Units per payment instrument (sales.per_instrument_limit, migration 000003).
--
-- A reservation records the payment instrument's fingerprint it was made
-- with. The limit is enforced in the reserve statement: every reserve for a
-- (sale, instrument) takes the advisory lock
--   hashtextextended('flashline instrument' || E'\n' || sale_id || E'\n' || instrument, 0)
-- first, so the count of the instrument's active units that the statement
-- checks cannot change under it. Expired and cancelled reservations stop
-- counting by themselves.
ALTER TABLE reservations
    ADD COLUMN payment_instrument text,
    ADD CONSTRAINT reservations_payment_instrument_length CHECK (length(payment_instrument) BETWEEN 1 AND 255);

-- The count above, for one instrument of one sale.
CREATE INDEX reservations_active_by_instrument
    ON reservations (sale_id, payment_instrument)
    WHERE state IN ('pending', 'confirmed') AND payment_instrument IS NOT NULL;
