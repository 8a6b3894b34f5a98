-- Payment events (POST /payments/events, postgres/payments.go). Each event is
-- applied in one transaction on the admin pool:
--
--   BEGIN; ReservationLockForPayment; PaymentEventInsert;
--   [ReservationConfirmByPayment | LatePaymentInsert | ReservationCancel |
--    ReservationVoid | LatePaymentRefund]; PaymentEventSetOutcome; COMMIT
--
-- A payment.succeeded on a sale with a per_instrument_limit, with the
-- instrument its provider reported, takes InstrumentLockForPayment and
-- counts InstrumentPaidUnits before it confirms; over the limit, its hold
-- is cancelled (ReservationCancel) and the payment recorded to refund
-- (LatePaymentInsert, instrument_limit). A provider's separate report of
-- the instrument (Stripe's charge.succeeded) locks the reservation, then
-- PaymentInstrumentInsert, and applies the success that waited for it
-- (PaymentAwaitingInstrument), if any, the same way.
--
-- The reservation's row lock comes first: events about one reservation run
-- one at a time, on any instance. An unknown reservation has no row to lock,
-- and the event writes nothing. The event's row is the idempotency: a second
-- delivery of the same id waits for the first's lock (or, about another
-- reservation, for its primary key) until the first transaction ends, then
-- inserts nothing and reads the first outcome (PaymentEventGet): a replay,
-- with no effect. Locks are taken reservation first, then stock (in the
-- statements that return units), as cancel, void and the sweeper take them.

-- name: PaymentEventInsert :one
-- The event's unique row; nothing when the id was delivered before. The
-- foreign key is the backstop for an unknown reservation.
INSERT INTO payment_events (event_id, type, reservation_id, payment_reference,
                            amount, currency, request_hash)
VALUES (@event_id, @type, @reservation_id, sqlc.narg(payment_reference),
        sqlc.narg(amount), sqlc.narg(currency), @request_hash)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: PaymentEventGet :one
-- A delivered event, for a replay: what it did the first time, and the hash
-- of its body (the same id with another body is refused).
SELECT event_id, type, reservation_id, request_hash, outcome, order_id
  FROM payment_events
 WHERE event_id = @event_id;

-- name: PaymentEventSetOutcome :exec
-- What the event did, written in the transaction that did it.
UPDATE payment_events
   SET outcome = @outcome::text, order_id = sqlc.narg(order_id)
 WHERE event_id = @event_id;

-- name: ReservationLockForPayment :one
-- Locks the reservation an event is about, so that the decision below and
-- its statement see one state: a confirm, cancel, void or another event for
-- the same reservation waits; the sweeper skips it (SKIP LOCKED) until the
-- next tick. Every statement that changes the reservation afterwards is
-- still conditional on its state. FOR NO KEY UPDATE, the lock those
-- UPDATEs take: it leaves foreign-key checks of rows that reference the
-- reservation (orders, payment_events, late_payments: FOR KEY SHARE) free.
-- past_expiry uses the transaction's start time, as
-- ReservationConfirmByPayment does. The sale's price (NULL: none) and the
-- hold's quantity are what a payment must pay when the sale states one;
-- the sale's row is read, not locked (its price never changes).
-- claimed_instrument is the instrument the hold was made with (the customer
-- token's payment_instrument claim; NULL: none), compared with the one the
-- provider reports.
SELECT r.reservation_id, r.sale_id, r.state, r.quantity, r.payment_instrument AS claimed_instrument,
       (r.expires_at <= now())::boolean AS past_expiry,
       o.order_id, o.payment_reference,
       s.price_amount, s.price_currency,
       coalesce(s.per_instrument_limit, 0)::int AS per_instrument_limit
  FROM reservations r
  JOIN sales s ON s.sale_id = r.sale_id
  LEFT JOIN orders o ON o.reservation_id = r.reservation_id
 WHERE r.reservation_id = @reservation_id
   FOR NO KEY UPDATE OF r;

-- name: PaymentRefundedBefore :one
-- Whether a refund of this payment for this reservation was applied already:
-- a provider may deliver the refund before the payment's success (they are
-- separate events, retried separately). The reservation is locked, so no
-- event about it is being applied meanwhile. payment_events_reservation
-- finds the reservation's few events.
SELECT EXISTS (
    SELECT 1 FROM payment_events
     WHERE reservation_id = @reservation_id
       AND payment_reference = @payment_reference::text
       AND type = 'refund.succeeded'
)::boolean AS refunded;

-- name: ReservationConfirmByPayment :one
-- payment.succeeded on a pending hold whose time is not up: confirmed, and
-- its one order created with what paid for it. A hold past expires_at is
-- not confirmed even if the sweeper has not reached it yet (its units are
-- about to go back): the payment is late. orders_reservation_unique and
-- orders_payment_reference_unique are the backstops. payment_instrument is
-- the instrument the provider reported (NULL: none reported); it replaces
-- the hold's own (the token's claim), so that the reservations' count of an
-- instrument (reserve.sql) counts this order under the card that paid for
-- it, not the one the token named: the provider's word wins.
WITH r AS (
    UPDATE reservations
       SET state = 'confirmed', confirmed_at = now(),
           payment_instrument = coalesce(sqlc.narg(payment_instrument)::text, reservations.payment_instrument)
     WHERE reservations.reservation_id = @reservation_id
       AND state = 'pending' AND expires_at > now()
    RETURNING reservations.reservation_id
)
INSERT INTO orders (order_id, reservation_id, payment_reference, payment_event_id, amount, currency,
                    payment_instrument)
SELECT @order_id, r.reservation_id, @payment_reference::text, @event_id::text,
       sqlc.narg(amount), sqlc.narg(currency), sqlc.narg(payment_instrument)
  FROM r
RETURNING order_id;

-- name: InstrumentLockForPayment :exec
-- Serialises the payments of one instrument in one sale, on every
-- instance, until the transaction ends: taken after the reservation's lock
-- and before InstrumentPaidUnits, whose statement (READ COMMITTED: a
-- snapshot of its own, newer than the lock) then sees every order of the
-- instrument committed before it. Another key than the reservation's
-- instrument lock (reserve.sql): a payment never waits for a reservation.
SELECT pg_advisory_xact_lock(hashtextextended(
    'flashline paid instrument' || E'\n' || @sale_id::text || E'\n' || @instrument::text, 0));

-- name: InstrumentPaidUnits :one
-- The units of a sale's confirmed orders paid by an instrument (what its
-- per_instrument_limit bounds): a voided order counts no more.
-- orders_by_payment_instrument finds the instrument's orders.
SELECT coalesce(sum(r.quantity), 0)::int AS units
  FROM orders o
  JOIN reservations r ON r.reservation_id = o.reservation_id
 WHERE o.payment_instrument = @instrument::text
   AND r.sale_id = @sale_id
   AND r.state = 'confirmed';

-- name: PaymentInstrumentInsert :execrows
-- A provider's report of the instrument of a payment (by its reference),
-- once: a redelivered report, or another event naming the same payment,
-- inserts nothing. The reservation is locked (ReservationLockForPayment),
-- so the success of the payment, if it waits (PaymentAwaitingInstrument),
-- is not being applied meanwhile.
INSERT INTO payment_instruments (payment_reference, instrument, event_id, reservation_id)
VALUES (@payment_reference, sqlc.narg(instrument), @event_id, @reservation_id)
ON CONFLICT (payment_reference) DO NOTHING;

-- name: PaymentInstrumentGet :one
-- The instrument a provider reported for a payment, when its report came
-- first (NULL: it reported none).
SELECT instrument
  FROM payment_instruments
 WHERE payment_reference = @payment_reference AND reservation_id = @reservation_id;

-- name: PaymentAwaitingInstrument :one
-- The success of a payment that waits for its instrument's report
-- (outcome awaiting_instrument): applied when the report comes.
-- payment_events_reservation finds the reservation's few events.
SELECT event_id, payment_reference, amount, currency
  FROM payment_events
 WHERE reservation_id = @reservation_id
   AND payment_reference = @payment_reference::text
   AND type = 'payment.succeeded'
   AND outcome = 'awaiting_instrument';

-- name: LatePaymentInsert :execrows
-- payment.succeeded for a hold that expired, was cancelled or voided, or
-- was paid already with another payment: no stock is taken; the payment is
-- recorded to be refunded, once per payment (another event announcing the
-- same payment inserts nothing: late_payments_payment_unique).
INSERT INTO late_payments (event_id, reservation_id, sale_id, payment_reference,
                           amount, currency, reason)
SELECT @event_id, r.reservation_id, r.sale_id, @payment_reference,
       sqlc.narg(amount), sqlc.narg(currency), @reason
  FROM reservations r
 WHERE r.reservation_id = @reservation_id
ON CONFLICT (reservation_id, payment_reference) DO NOTHING;

-- name: LatePaymentRefund :execrows
-- refund.succeeded for a late payment: marks it refunded, once.
UPDATE late_payments
   SET refunded_at = now(), refund_event_id = @refund_event_id::text
 WHERE reservation_id = @reservation_id
   AND payment_reference = @payment_reference
   AND refunded_at IS NULL;

-- name: LatePaymentsList :many
-- Late payments, newest first: those still to refund, or all of them.
SELECT l.event_id, l.reservation_id, l.sale_id, l.payment_reference, l.amount,
       l.currency, l.reason, l.created_at, l.refunded_at, l.refund_event_id
  FROM late_payments l
 WHERE @include_refunded::boolean OR l.refunded_at IS NULL
 ORDER BY l.created_at DESC, l.event_id
 LIMIT @max_rows::int;

-- name: PaymentsOverdueForInstrument :one
-- How many of a sale's payment successes, other than @event_id, received
-- in the last @window_seconds, have waited for their instrument's report
-- (outcome awaiting_instrument) for more than @overdue_seconds while no
-- report for the sale came since they arrived: a provider whose reports do
-- not come (a Stripe endpoint not subscribed to charge.succeeded), not one
-- report lost among many that come. The window bounds the read (a hold that
-- expired without its report waits for ever); the two received_at indexes
-- (migration 000022) keep it to the few waiting and the reports after them.
SELECT count(*)::int AS overdue
  FROM payment_events pe
  JOIN reservations r ON r.reservation_id = pe.reservation_id
 WHERE pe.outcome = 'awaiting_instrument'
   AND pe.received_at >= now() - make_interval(secs => @window_seconds::int)
   AND pe.received_at < now() - make_interval(secs => @overdue_seconds::int)
   AND pe.event_id <> @event_id::text
   AND r.sale_id = @sale_id::text
   AND NOT EXISTS (
       SELECT 1 FROM payment_instruments pi
         JOIN reservations ri ON ri.reservation_id = pi.reservation_id
        WHERE pi.received_at >= pe.received_at
          AND ri.sale_id = @sale_id::text);
