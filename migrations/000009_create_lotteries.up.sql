-- The lottery with advance registration ("admission": "lottery"): customers
-- register during a window, a draw at draw_at picks the winners (the first
-- initial_stock registrations in the keyed draw order), and each winner gets
-- a purchase window with a single-use admission token. With a waitlist, a
-- winner whose window ends without a purchase passes the unit to the next in
-- draw order. Every state change a customer hears of is written to
-- lottery_notifications in the same transaction (the outbox).

ALTER TABLE sales DROP CONSTRAINT sales_admission_valid;
ALTER TABLE sales ADD CONSTRAINT sales_admission_valid CHECK (admission IN ('direct', 'waiting_room', 'lottery'));

-- One row per lottery sale, created with the sale.
CREATE TABLE lotteries (
    sale_id                 text        NOT NULL,
    registration_opens_at   timestamptz NOT NULL,
    registration_closes_at  timestamptz NOT NULL,
    draw_at                 timestamptz NOT NULL,
    purchase_window_seconds integer     NOT NULL,
    waitlist                boolean     NOT NULL DEFAULT false,
    -- Set once, by the draw: the conditional UPDATE ... WHERE drawn_at IS
    -- NULL that makes the draw happen exactly once however many instances
    -- try it. Registrations take this row FOR SHARE, so a registration in
    -- flight finishes before the draw reads the registrations, and none is
    -- accepted after.
    drawn_at                timestamptz,
    CONSTRAINT lotteries_pkey PRIMARY KEY (sale_id),
    CONSTRAINT lotteries_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id),
    CONSTRAINT lotteries_registration_window CHECK (registration_opens_at < registration_closes_at),
    CONSTRAINT lotteries_draw_after_registration CHECK (registration_closes_at <= draw_at),
    CONSTRAINT lotteries_purchase_window_range CHECK (purchase_window_seconds BETWEEN 1 AND 604800)
);

-- One registration per customer and sale, and per payment instrument and sale.
CREATE TABLE lottery_registrations (
    registration_id         text        NOT NULL,
    sale_id                 text        NOT NULL,
    customer_id             text        NOT NULL,
    payment_instrument      text        NOT NULL,
    -- registered -> won | lost | waitlisted (the draw);
    -- won -> expired (the purchase window ended without a purchase);
    -- waitlisted -> won (promoted when a winner's window expired).
    state                   text        NOT NULL DEFAULT 'registered',
    -- 1-based place in the draw order, set by the draw.
    draw_rank               integer,
    -- When the winner's window to buy ends (won, expired).
    purchase_window_ends_at timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT lottery_registrations_pkey PRIMARY KEY (registration_id),
    CONSTRAINT lottery_registrations_lottery_fkey FOREIGN KEY (sale_id) REFERENCES lotteries (sale_id),
    CONSTRAINT lottery_registrations_one_per_customer UNIQUE (sale_id, customer_id),
    CONSTRAINT lottery_registrations_one_per_instrument UNIQUE (sale_id, payment_instrument),
    CONSTRAINT lottery_registrations_state_valid CHECK (state IN ('registered', 'won', 'lost', 'waitlisted', 'expired')),
    CONSTRAINT lottery_registrations_drawn CHECK ((state = 'registered') = (draw_rank IS NULL)),
    CONSTRAINT lottery_registrations_window CHECK ((state IN ('won', 'expired')) = (purchase_window_ends_at IS NOT NULL))
);
-- The waitlist job's work lists: winners whose window ended, and the next
-- in draw order.
CREATE INDEX lottery_registrations_sale_state_rank ON lottery_registrations (sale_id, state, draw_rank);

-- The outbox: one row per thing a customer should hear of, written in the
-- transaction that made it true, delivered (signed, retried with backoff) to
-- the store's webhook by the notification job. event_id is deterministic
-- (registration id and kind: each happens at most once), so the outbox
-- cannot hold one event twice, and the receiver deduplicates by it.
CREATE TABLE lottery_notifications (
    event_id        text        NOT NULL,
    sale_id         text        NOT NULL,
    registration_id text        NOT NULL,
    customer_id     text        NOT NULL,
    kind            text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    -- When the next attempt may be made; a delivery in progress holds it a
    -- lease ahead, so another instance does not send it meanwhile.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    delivered_at    timestamptz,
    CONSTRAINT lottery_notifications_pkey PRIMARY KEY (event_id),
    CONSTRAINT lottery_notifications_registration_fkey FOREIGN KEY (registration_id) REFERENCES lottery_registrations (registration_id),
    CONSTRAINT lottery_notifications_kind_valid CHECK (kind IN ('won', 'lost', 'waitlisted', 'window_expired', 'promoted')),
    CONSTRAINT lottery_notifications_attempts_nonneg CHECK (attempts >= 0)
);
CREATE INDEX lottery_notifications_undelivered ON lottery_notifications (next_attempt_at) WHERE delivered_at IS NULL;
