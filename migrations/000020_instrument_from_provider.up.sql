-- The payment instrument from a party the shopper cannot forge (issue 48).
--
-- An order records the instrument that paid for it, as its payment
-- provider reported it (a card's fingerprint): a payment whose instrument
-- has paid for the sale's per_instrument_limit already does not confirm,
-- and the count is of the sale's confirmed orders paid by the instrument
-- (ApplyPaymentEvent, under an advisory lock on the sale and instrument).
-- Existing orders have none (NULL): they count for no instrument.
ALTER TABLE orders
    ADD COLUMN payment_instrument text,
    ADD CONSTRAINT orders_payment_instrument_length CHECK (length(payment_instrument) BETWEEN 1 AND 255);
CREATE INDEX orders_by_payment_instrument ON orders (payment_instrument)
    WHERE payment_instrument IS NOT NULL;

-- What a provider reported of a payment's instrument in an event of its own,
-- apart from the payment's success (Stripe: charge.succeeded carries the
-- card's fingerprint, payment_intent.succeeded does not), by the payment's
-- reference (the PaymentIntent's id): whichever of the two events arrives
-- first waits here for the other. instrument is NULL when the provider
-- reported none (a payment method without a fingerprint): the payment then
-- waits no more, and counts for no instrument. The primary key makes a
-- redelivered report a replay.
CREATE TABLE payment_instruments (
    payment_reference text        NOT NULL,
    instrument        text,
    event_id          text        NOT NULL,
    reservation_id    text        NOT NULL,
    received_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_instruments_pkey PRIMARY KEY (payment_reference),
    CONSTRAINT payment_instruments_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (reservation_id),
    CONSTRAINT payment_instruments_reference_length CHECK (length(payment_reference) BETWEEN 1 AND 255),
    CONSTRAINT payment_instruments_instrument_length CHECK (length(instrument) BETWEEN 1 AND 255),
    CONSTRAINT payment_instruments_event_id_length CHECK (length(event_id) BETWEEN 1 AND 255)
);

-- A payment refused because its instrument had paid for the sale's limit
-- already: its hold cancelled, the money to refund.
ALTER TABLE late_payments
    DROP CONSTRAINT late_payments_reason_valid,
    ADD CONSTRAINT late_payments_reason_valid
        CHECK (reason IN ('hold_expired', 'hold_cancelled', 'hold_voided', 'duplicate_payment', 'amount_mismatch',
                          'instrument_limit'));

-- A lottery registration names an instrument only when a trusted party
-- named it (the customer token's payment_instrument claim); the body's is
-- no longer taken. Without one, the registration is still one per customer
-- (the unique constraint on the instrument lets NULLs be many), and the
-- limit is enforced at payment.
ALTER TABLE lottery_registrations ALTER COLUMN payment_instrument DROP NOT NULL;
