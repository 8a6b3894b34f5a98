-- The lottery with advance registration (postgres/lottery.go). Registrations
-- are rows, unique per (sale, customer) and per (sale, payment instrument);
-- the draw is one conditional UPDATE of the lotteries row (drawn_at IS NULL)
-- followed, in its transaction, by the outcome of every registration and the
-- outbox rows that tell each customer.

-- name: LotteryCreate :exec
-- The lottery of a new lottery sale, in CreateSale's transaction.
-- The beacon's columns are NULL in a deployment without a beacon; with one,
-- beacon_round is the first round published after the close. draw_version is
-- 2, or 3 for a lottery with variants (migration 000029).
INSERT INTO lotteries (sale_id, registration_opens_at, registration_closes_at, draw_at,
                       purchase_window_seconds, waitlist, draw_version,
                       beacon_public_key, beacon_genesis, beacon_period_seconds, beacon_round)
VALUES (@sale_id, @registration_opens_at, @registration_closes_at, @draw_at,
        @purchase_window_seconds, @waitlist, @draw_version,
        sqlc.narg(beacon_public_key), sqlc.narg(beacon_genesis), sqlc.narg(beacon_period_seconds), sqlc.narg(beacon_round));

-- name: LotteryVariants :many
-- A lottery's variants in the sale's order, with their units (none: the
-- lottery has no variants).
SELECT sku, title, initial_stock FROM sale_variants WHERE sale_id = @sale_id ORDER BY position;

-- name: LotteryGet :one
-- A lottery sale's rules and what its sale asks of registrants.
SELECT l.sale_id, l.registration_opens_at, l.registration_closes_at, l.draw_at,
       l.purchase_window_seconds, l.waitlist, l.drawn_at,
       l.draw_version, l.registrants_root, l.registrants_count, l.registrants_committed_at,
       l.beacon_public_key, l.beacon_genesis, l.beacon_period_seconds, l.beacon_round,
       l.beacon_randomness, l.beacon_signature,
       s.initial_stock, s.challenge_bits, s.min_account_age_seconds, s.draw_seed,
       coalesce(s.title, s.sku)::text AS title, coalesce(s.image_url, '')::text AS image_url,
       now()::timestamptz AS now
  FROM lotteries l
  JOIN sales s ON s.sale_id = l.sale_id
 WHERE l.sale_id = @sale_id;

-- name: LotteryCounts :one
-- A lottery's registrations by state (the admin view).
SELECT count(*) FILTER (WHERE r.state = 'registered')::int AS registered,
       count(*) FILTER (WHERE r.state = 'won')::int        AS won,
       count(*) FILTER (WHERE r.state = 'lost')::int       AS lost,
       count(*) FILTER (WHERE r.state = 'waitlisted')::int AS waitlisted,
       count(*) FILTER (WHERE r.state = 'expired')::int    AS expired
  FROM lottery_registrations r
 WHERE r.sale_id = @sale_id;

-- name: LotteryLockForRegistration :one
-- Whether registration is open now, by the database's clock, holding the
-- lottery's row FOR SHARE until COMMIT: the draw's UPDATE of that row waits
-- for every registration in flight, so none is left out of the draw, and a
-- registration that comes after it sees drawn_at set.
-- A registration that waited for the close's commitment (which takes the row
-- FOR UPDATE) reads the committed row and is refused: registrants_root is
-- set.
SELECT (now() >= l.registration_opens_at AND now() < l.registration_closes_at
        AND l.drawn_at IS NULL AND l.registrants_root IS NULL)::boolean AS open
  FROM lotteries l
 WHERE l.sale_id = @sale_id
   FOR SHARE;

-- name: RegistrationInsert :one
-- ON CONFLICT DO NOTHING: a second registration of the customer, or of the
-- payment instrument, in the sale inserts nothing and returns no row (a
-- concurrent one first waits for the other transaction's outcome). variant:
-- the variant named in a lottery with variants, NULL for any (or none).
INSERT INTO lottery_registrations (registration_id, sale_id, customer_id, payment_instrument, variant)
VALUES (@registration_id, @sale_id, @customer_id, @payment_instrument, sqlc.narg(variant))
ON CONFLICT DO NOTHING
RETURNING registration_id, sale_id, customer_id, state, draw_rank, purchase_window_ends_at, created_at,
          variant, won_variant,
          coalesce((SELECT l.draw_version = 3 FROM lotteries l WHERE l.sale_id = lottery_registrations.sale_id), false)::boolean AS has_variants;

-- name: RegistrationGet :one
-- has_variants: the lottery has variants (its registrations name one, or any).
SELECT r.registration_id, r.sale_id, r.customer_id, r.state, r.draw_rank, r.purchase_window_ends_at, r.created_at,
       r.variant, r.won_variant,
       coalesce((SELECT l.draw_version = 3 FROM lotteries l WHERE l.sale_id = r.sale_id), false)::boolean AS has_variants
  FROM lottery_registrations r
 WHERE r.sale_id = @sale_id AND r.customer_id = @customer_id;

-- name: LotteryDueDraws :many
-- Lotteries whose draw is due and not yet made, but those whose sale is
-- paused (the draw waited for the beacon's round too long: an operator
-- resumes it), with the beacon round each waits for.
SELECT l.sale_id, l.draw_at, l.beacon_public_key, l.beacon_genesis, l.beacon_period_seconds,
       l.beacon_round, now()::timestamptz AS now
  FROM lotteries l
  JOIN sales s ON s.sale_id = l.sale_id
 WHERE l.drawn_at IS NULL AND l.draw_at <= now() AND s.state <> 'paused'
 ORDER BY l.draw_at;

-- name: LotteryClosesDue :many
-- Lotteries whose registration has closed and whose registrants are not
-- committed yet.
SELECT sale_id FROM lotteries
 WHERE registrants_root IS NULL AND registration_closes_at <= now() AND draw_version IN (2, 3)
 ORDER BY registration_closes_at;

-- name: LotteryLockForClose :one
-- The close's commitment: the row FOR UPDATE waits for every registration in
-- flight (they hold it FOR SHARE) and keeps new ones out until COMMIT.
SELECT (registrants_root IS NOT NULL)::boolean AS committed
  FROM lotteries
 WHERE sale_id = @sale_id AND registration_closes_at <= now()
   FOR UPDATE;

-- name: LotteryDrawVersion :one
SELECT draw_version FROM lotteries WHERE sale_id = @sale_id;

-- name: RegistrantsOfLottery :many
SELECT customer_id, coalesce(variant, '')::text AS variant FROM lottery_registrations WHERE sale_id = @sale_id;

-- name: LotteryCommitRegistrants :exec
UPDATE lotteries
   SET registrants_root = @root, registrants_count = @count, registrants_committed_at = now()
 WHERE sale_id = @sale_id AND registrants_root IS NULL;

-- name: LotteryPauseForBeacon :exec
-- The draw waited too long for the beacon's round: the sale is paused with
-- the reason (never drawn without it).
UPDATE sales SET state = 'paused', pause_reason = @reason::text, updated_at = now()
 WHERE sale_id = @sale_id AND state IN ('scheduled', 'open');

-- name: LotteryClaimDraw :one
-- The draw happens once: only the transaction whose UPDATE matches the row
-- (drawn_at IS NULL) draws. A concurrent one waits for its row lock, then
-- re-evaluates the WHERE clause on the new row version (READ COMMITTED) and
-- matches nothing. The update also waits for registrations in flight (they
-- hold the row FOR SHARE).
UPDATE lotteries l
   SET drawn_at = now()
  FROM sales s
 WHERE l.sale_id = @sale_id AND s.sale_id = l.sale_id
   AND l.drawn_at IS NULL AND l.draw_at <= now()
RETURNING l.drawn_at, l.purchase_window_seconds, l.waitlist, s.initial_stock, s.draw_seed,
          l.draw_version, l.registrants_root, l.beacon_public_key, l.beacon_round;

-- name: LotteryRecordBeacon :exec
-- The beacon round the draw used, in the draw's transaction.
UPDATE lotteries SET beacon_randomness = @randomness, beacon_signature = @signature
 WHERE sale_id = @sale_id AND beacon_round = @round;

-- name: RegistrationsForDraw :many
SELECT registration_id, customer_id, coalesce(variant, '')::text AS variant
  FROM lottery_registrations
 WHERE sale_id = @sale_id AND state = 'registered';

-- name: RegistrationsApplyDraw :one
-- Writes the draw: each registration's rank, won where @won says (the
-- first initial-stock ranks; in a lottery with variants, those awarded the
-- variant in @won_variants, '' for none) with a purchase window from now,
-- waitlisted or lost for the rest, and one outbox row per registration
-- (its data naming the variant won, in a lottery with variants), in one
-- statement.
WITH drawn AS (
    SELECT unnest(@registration_ids::text[]) AS registration_id,
           unnest(@ranks::int[])             AS draw_rank,
           unnest(@won::boolean[])           AS won,
           unnest(@won_variants::text[])     AS won_variant
), upd AS (
    UPDATE lottery_registrations r
       SET draw_rank = d.draw_rank,
           state = CASE WHEN d.won THEN 'won'
                        WHEN @waitlist::boolean THEN 'waitlisted'
                        ELSE 'lost' END,
           purchase_window_ends_at = CASE WHEN d.won
                                          THEN now() + make_interval(secs => @window_seconds::int) END,
           won_variant = nullif(d.won_variant, ''),
           updated_at = now()
      FROM drawn d
     WHERE r.registration_id = d.registration_id AND r.sale_id = @sale_id::text
       AND r.state = 'registered'
    RETURNING r.registration_id, r.sale_id, r.customer_id, r.state, r.draw_rank, r.purchase_window_ends_at,
              r.won_variant
), ntf AS (
    INSERT INTO lottery_notifications (event_id, sale_id, registration_id, customer_id, kind, payload)
    SELECT 'ntf_' || u.registration_id || '_' || u.state, u.sale_id, u.registration_id, u.customer_id, u.state,
           jsonb_build_object('id', 'ntf_' || u.registration_id || '_' || u.state,
                              'type', 'lottery.' || u.state,
                              'createdAt', now(),
                              'data', jsonb_build_object('saleId', u.sale_id, 'registrationId', u.registration_id,
                                                         'customerId', u.customer_id, 'state', u.state,
                                                         'drawRank', u.draw_rank,
                                                         'purchaseWindowEndsAt', u.purchase_window_ends_at)
                                      || CASE WHEN u.won_variant IS NULL THEN '{}'::jsonb
                                              ELSE jsonb_build_object('variant', u.won_variant) END)
      FROM upd u
    RETURNING 1
)
SELECT count(*)::int AS drawn, (SELECT count(*) FROM ntf)::int AS notified FROM upd;

-- name: LotteryWindowsDue :many
-- Lotteries with a winner whose purchase window ended more than @grace_seconds
-- ago: the waitlist job's work list.
SELECT DISTINCT r.sale_id
  FROM lottery_registrations r
 WHERE r.state = 'won' AND r.purchase_window_ends_at <= now() - make_interval(secs => @grace_seconds::int);

-- name: LotteryLock :one
-- Serialises the window expiries and promotions of one lottery: each runs in
-- a transaction that holds its row FOR UPDATE, so two instances never
-- promote the same waitlisted registration, nor skip one.
SELECT purchase_window_seconds, waitlist, draw_version FROM lotteries WHERE sale_id = @sale_id FOR UPDATE;

-- name: RegistrationsExpireWindows :one
-- Winners whose window ended (more than @grace_seconds ago: a reservation
-- checked just before the end may still be committing) with no pending or
-- confirmed reservation made with their admission (whose id is the
-- registration id) expire, once (state = 'won' is the condition), each with
-- its outbox row.
WITH upd AS (
    UPDATE lottery_registrations r
       SET state = 'expired', updated_at = now()
     WHERE r.sale_id = @sale_id AND r.state = 'won'
       AND r.purchase_window_ends_at <= now() - make_interval(secs => @grace_seconds::int)
       AND (SELECT true FROM reservations v
             WHERE v.admission_token_id = r.registration_id AND v.state IN ('pending', 'confirmed')
             LIMIT 1) IS NULL
    RETURNING r.registration_id, r.sale_id, r.customer_id, r.draw_rank, r.purchase_window_ends_at,
              r.won_variant
), ntf AS (
    INSERT INTO lottery_notifications (event_id, sale_id, registration_id, customer_id, kind, payload)
    SELECT 'ntf_' || u.registration_id || '_window_expired', u.sale_id, u.registration_id, u.customer_id, 'window_expired',
           jsonb_build_object('id', 'ntf_' || u.registration_id || '_window_expired',
                              'type', 'lottery.window_expired',
                              'createdAt', now(),
                              'data', jsonb_build_object('saleId', u.sale_id, 'registrationId', u.registration_id,
                                                         'customerId', u.customer_id, 'state', 'expired',
                                                         'drawRank', u.draw_rank,
                                                         'purchaseWindowEndsAt', u.purchase_window_ends_at)
                                      || CASE WHEN u.won_variant IS NULL THEN '{}'::jsonb
                                              ELSE jsonb_build_object('variant', u.won_variant) END)
      FROM upd u
    RETURNING 1
)
SELECT count(*)::int AS expired, (SELECT count(*) FROM ntf)::int AS notified,
       coalesce(array_agg(u.won_variant) FILTER (WHERE u.won_variant IS NOT NULL), '{}')::text[] AS variants
  FROM upd u;

-- name: RegistrationsPromote :one
-- The next @n waitlisted registrations in draw order win, with a purchase
-- window from now, each with its outbox row. Run under LotteryLock. In a
-- lottery with variants, @variant is the variant of the units passed down:
-- the next who named it or any win it (NULL: no variants).
WITH next AS (
    SELECT r.registration_id
      FROM lottery_registrations r
     WHERE r.sale_id = @sale_id::text AND r.state = 'waitlisted'
       AND (sqlc.narg(variant)::text IS NULL OR r.variant IS NULL OR r.variant = sqlc.narg(variant)::text)
     ORDER BY r.draw_rank
     LIMIT @n::int
), upd AS (
    UPDATE lottery_registrations r
       SET state = 'won', updated_at = now(), won_variant = sqlc.narg(variant)::text,
           purchase_window_ends_at = now() + make_interval(secs => @window_seconds::int)
      FROM next
     WHERE r.registration_id = next.registration_id AND r.state = 'waitlisted'
    RETURNING r.registration_id, r.sale_id, r.customer_id, r.draw_rank, r.purchase_window_ends_at,
              r.won_variant
), ntf AS (
    INSERT INTO lottery_notifications (event_id, sale_id, registration_id, customer_id, kind, payload)
    SELECT 'ntf_' || u.registration_id || '_promoted', u.sale_id, u.registration_id, u.customer_id, 'promoted',
           jsonb_build_object('id', 'ntf_' || u.registration_id || '_promoted',
                              'type', 'lottery.promoted',
                              'createdAt', now(),
                              'data', jsonb_build_object('saleId', u.sale_id, 'registrationId', u.registration_id,
                                                         'customerId', u.customer_id, 'state', 'won',
                                                         'drawRank', u.draw_rank,
                                                         'purchaseWindowEndsAt', u.purchase_window_ends_at)
                                      || CASE WHEN u.won_variant IS NULL THEN '{}'::jsonb
                                              ELSE jsonb_build_object('variant', u.won_variant) END)
      FROM upd u
    RETURNING 1
)
SELECT count(*)::int AS promoted, (SELECT count(*) FROM ntf)::int AS notified FROM upd;

-- name: NotificationsClaim :many
-- Up to @n notifications due for delivery, leased to this caller for
-- @lease_seconds (SKIP LOCKED: instances claim different ones; the lease
-- keeps another from sending one while this one is sending it). attempts
-- counts this attempt.
UPDATE lottery_notifications n
   SET attempts = n.attempts + 1,
       next_attempt_at = now() + make_interval(secs => @lease_seconds::int)
 WHERE n.event_id IN (SELECT d.event_id FROM lottery_notifications d
                       WHERE d.delivered_at IS NULL AND d.next_attempt_at <= now()
                       ORDER BY d.next_attempt_at
                       LIMIT @n::int
                         FOR UPDATE SKIP LOCKED)
RETURNING n.event_id, n.payload, n.attempts;

-- name: NotificationDelivered :exec
UPDATE lottery_notifications
   SET delivered_at = now(), last_error = NULL
 WHERE event_id = @event_id AND delivered_at IS NULL;

-- name: NotificationFailed :exec
-- The next attempt after a backoff the caller computed from attempts.
UPDATE lottery_notifications
   SET next_attempt_at = now() + make_interval(secs => @backoff_seconds::double precision),
       last_error = @last_error
 WHERE event_id = @event_id AND delivered_at IS NULL;

-- name: RegistrationsDrawn :many
-- Every registration of a lottery with its outcome, in draw order (for
-- verify-draw).
SELECT registration_id, customer_id, state, draw_rank,
       coalesce(variant, '')::text AS variant, coalesce(won_variant, '')::text AS won_variant
  FROM lottery_registrations
 WHERE sale_id = @sale_id
 ORDER BY draw_rank NULLS LAST, customer_id;
