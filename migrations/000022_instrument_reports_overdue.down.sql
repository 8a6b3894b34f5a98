DROP INDEX IF EXISTS payment_instruments_received;
DROP INDEX IF EXISTS payment_events_awaiting_instrument;
