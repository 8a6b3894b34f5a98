-- The waiting room (waitroom/) and rate limits that hold across instances.
--
-- A waiting room keeps no row per waiter: a waiter's place is in a signed
-- ticket the client holds. The database keeps, per sale, only where the next
-- position starts, how many positions were handed out before the sale opened,
-- and the watermark: every rank up to admitted_through may be admitted.

-- What a sale's waiting room and purchase rules are.
ALTER TABLE sales
    -- How the waiting room orders people: 'randomized_at_open' (everyone who
    -- arrived before the open is placed by a draw fixed per customer and sale,
    -- later arrivals after them in arrival order) or 'arrival_order'.
    ADD COLUMN fairness text NOT NULL DEFAULT 'randomized_at_open',
    -- Leading zero bits of the proof-of-work asked before admission; 0 = none.
    ADD COLUMN challenge_bits integer NOT NULL DEFAULT 0,
    -- Units one payment instrument may hold in the sale; NULL = no limit.
    ADD COLUMN per_instrument_limit integer,
    -- Accounts younger than this (the acct_created claim) are refused.
    ADD COLUMN min_account_age_seconds integer NOT NULL DEFAULT 0,
    -- 16 random bytes made when the sale is created (crypto/rand); the
    -- secret seed of the pre-open draw. Sales made before this migration get
    -- 122 random bits from gen_random_uuid(); the default is dropped below,
    -- so every new sale must bring its own.
    ADD COLUMN draw_seed bytea NOT NULL DEFAULT decode(replace(gen_random_uuid()::text, '-', ''), 'hex'),
    ADD CONSTRAINT sales_fairness_valid CHECK (fairness IN ('randomized_at_open', 'arrival_order')),
    ADD CONSTRAINT sales_challenge_bits_range CHECK (challenge_bits BETWEEN 0 AND 32),
    ADD CONSTRAINT sales_per_instrument_limit_positive CHECK (per_instrument_limit > 0),
    ADD CONSTRAINT sales_min_account_age_nonneg CHECK (min_account_age_seconds >= 0),
    ADD CONSTRAINT sales_draw_seed_length CHECK (length(draw_seed) = 16);
ALTER TABLE sales ALTER COLUMN draw_seed DROP DEFAULT;

-- One row per waiting_room sale, created with the sale.
CREATE TABLE waiting_rooms (
    sale_id          text             NOT NULL,
    -- The next position to hand out. Instances lease positions from here in
    -- small blocks (one UPDATE per block, not per waiter).
    next_position    bigint           NOT NULL DEFAULT 1,
    -- Positions handed out before the sale opened (next_position - 1 at the
    -- open); NULL until then. Frozen once, by the first lease or pacer tick
    -- that sees the sale open; later leases start after it.
    preopen_count    bigint,
    -- The watermark, in rank units: every ticket whose rank is at most this
    -- may be admitted. Only ever increases (the pacer's UPDATE says so in its
    -- WHERE clause, and greatest() in its SET).
    admitted_through bigint           NOT NULL DEFAULT 0,
    -- Ranks admitted per second lately, for the wait estimates.
    pace_per_second  double precision NOT NULL DEFAULT 0,
    updated_at       timestamptz      NOT NULL DEFAULT now(),
    CONSTRAINT waiting_rooms_pkey PRIMARY KEY (sale_id),
    CONSTRAINT waiting_rooms_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id),
    CONSTRAINT waiting_rooms_next_position_positive CHECK (next_position >= 1),
    CONSTRAINT waiting_rooms_preopen_count_range CHECK (preopen_count BETWEEN 0 AND next_position - 1),
    CONSTRAINT waiting_rooms_admitted_through_nonneg CHECK (admitted_through >= 0),
    CONSTRAINT waiting_rooms_pace_nonneg CHECK (pace_per_second >= 0)
);

-- Waiting-room sales made before this migration get their room.
INSERT INTO waiting_rooms (sale_id)
SELECT sale_id FROM sales WHERE admission = 'waiting_room';

-- Tells every instance (LISTEN flashline_waitroom, payload: the sale id) when
-- what its waiters see changes: the watermark moves, the pre-open count is
-- frozen, or a waiting room is created. Leasing positions sends nothing,
-- except the one lease that freezes the pre-open count.
CREATE FUNCTION flashline_notify_waitroom() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('flashline_waitroom', NEW.sale_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER waiting_rooms_created
    AFTER INSERT ON waiting_rooms
    FOR EACH ROW
    EXECUTE FUNCTION flashline_notify_waitroom();

CREATE TRIGGER waiting_rooms_advanced
    AFTER UPDATE OF admitted_through, preopen_count ON waiting_rooms
    FOR EACH ROW
    WHEN (OLD.admitted_through IS DISTINCT FROM NEW.admitted_through
          OR OLD.preopen_count IS DISTINCT FROM NEW.preopen_count)
    EXECUTE FUNCTION flashline_notify_waitroom();

-- The pacer counts, every tick, the reservations made with an admission
-- token in each open waiting-room sale.
CREATE INDEX reservations_admitted ON reservations (sale_id) WHERE admission_token_id IS NOT NULL;

-- Fixed-window counters shared by every instance: one row per scope (what is
-- limited, e.g. 'ticket'), subject (whose: a customer, a payment instrument)
-- and window. Old windows are deleted by the pruning job.
CREATE TABLE rate_limits (
    scope        text        NOT NULL,
    subject      text        NOT NULL,
    window_start timestamptz NOT NULL,
    hits         integer     NOT NULL DEFAULT 1,
    CONSTRAINT rate_limits_pkey PRIMARY KEY (scope, subject, window_start),
    CONSTRAINT rate_limits_hits_positive CHECK (hits > 0)
);
CREATE INDEX rate_limits_window_start ON rate_limits (window_start);
