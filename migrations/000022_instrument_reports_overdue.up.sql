-- A Stripe endpoint not subscribed to charge.succeeded (issue 48): a
-- PaymentIntent's success in a sale with a per_instrument_limit waits for
-- the charge's report of the card (outcome awaiting_instrument); successes
-- that wait long while no report for the sale comes say that the reports do
-- not come. Each success that waits asks (PaymentsOverdueForInstrument);
-- these indexes keep that to the few waiting and the recent reports.
CREATE INDEX payment_events_awaiting_instrument ON payment_events (received_at)
    WHERE outcome = 'awaiting_instrument';
CREATE INDEX payment_instruments_received ON payment_instruments (received_at);
