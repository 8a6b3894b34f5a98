-- Flashline's schema. Every constraint is named: the name is part of the error
-- contract (postgres/errors.go maps names to domain errors).

CREATE TABLE sales (
    sale_id                 text        NOT NULL,
    sku                     text        NOT NULL,
    state                   text        NOT NULL,
    initial_stock           integer     NOT NULL,
    per_customer_limit      integer     NOT NULL,
    reservation_ttl_seconds integer     NOT NULL,
    opens_at                timestamptz,
    admission               text        NOT NULL DEFAULT 'direct',
    buckets                 integer     NOT NULL DEFAULT 1,
    pause_reason            text,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sales_pkey PRIMARY KEY (sale_id),
    -- sold_out is not stored: it is "open with nothing available", derived on read,
    -- so the purchase path never writes the sales row.
    CONSTRAINT sales_state_valid CHECK (state IN ('scheduled', 'open', 'paused', 'closed')),
    CONSTRAINT sales_sku_length CHECK (length(sku) BETWEEN 1 AND 128),
    CONSTRAINT sales_initial_stock_positive CHECK (initial_stock > 0),
    CONSTRAINT sales_per_customer_limit_positive CHECK (per_customer_limit > 0),
    CONSTRAINT sales_reservation_ttl_positive CHECK (reservation_ttl_seconds > 0),
    CONSTRAINT sales_admission_valid CHECK (admission IN ('direct', 'waiting_room')),
    CONSTRAINT sales_buckets_range CHECK (buckets BETWEEN 1 AND 64)
);

-- One row per sale and bucket. quantity is the number of units still available.
-- It changes only through conditional updates (reserve) and restocks guarded by
-- reservations.restocked_at; every change has a stock_ledger row.
CREATE TABLE stock (
    sale_id  text    NOT NULL,
    bucket   integer NOT NULL,
    quantity integer NOT NULL,
    CONSTRAINT stock_pkey PRIMARY KEY (sale_id, bucket),
    CONSTRAINT stock_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id),
    CONSTRAINT stock_quantity_nonneg CHECK (quantity >= 0)
);

CREATE TABLE reservations (
    reservation_id     text        NOT NULL,
    sale_id            text        NOT NULL,
    customer_id        text        NOT NULL,
    bucket             integer     NOT NULL,
    quantity           integer     NOT NULL,
    state              text        NOT NULL DEFAULT 'pending',
    idempotency_key    text        NOT NULL,
    admission_token_id text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    expires_at         timestamptz NOT NULL,
    confirmed_at       timestamptz,
    cancelled_at       timestamptz,
    expired_at         timestamptz,
    -- Set exactly once, by the statement that returns the units to stock. The
    -- restock happens only when that conditional update affected a row.
    restocked_at       timestamptz,
    CONSTRAINT reservations_pkey PRIMARY KEY (reservation_id),
    CONSTRAINT reservations_stock_fkey FOREIGN KEY (sale_id, bucket) REFERENCES stock (sale_id, bucket),
    CONSTRAINT reservations_quantity_positive CHECK (quantity > 0),
    CONSTRAINT reservations_state_valid CHECK (state IN ('pending', 'confirmed', 'expired', 'cancelled')),
    CONSTRAINT reservations_restocked_state CHECK ((restocked_at IS NULL) = (state IN ('pending', 'confirmed'))),
    CONSTRAINT reservations_admission_token_unique UNIQUE (admission_token_id)
);

-- The per-customer limit, where it cannot be bypassed: one active (pending or
-- confirmed) reservation per customer per sale.
CREATE UNIQUE INDEX reservations_one_active_per_customer
    ON reservations (sale_id, customer_id) WHERE state IN ('pending', 'confirmed');

-- The expiry sweeper's work list.
CREATE INDEX reservations_pending_expiry ON reservations (expires_at) WHERE state = 'pending';
CREATE INDEX reservations_sale_state ON reservations (sale_id, state);

-- Idempotency keys are scoped per customer and written in the same transaction
-- as the reservation they produced, with the response to replay.
CREATE TABLE idempotency_keys (
    customer_id     text        NOT NULL,
    key             text        NOT NULL,
    sale_id         text        NOT NULL,
    request_hash    bytea       NOT NULL,
    status_code     integer     NOT NULL,
    response_body   bytea       NOT NULL,
    reservation_id  text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (customer_id, key),
    CONSTRAINT idempotency_keys_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (reservation_id)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

CREATE TABLE orders (
    order_id       text        NOT NULL,
    reservation_id text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT orders_pkey PRIMARY KEY (order_id),
    CONSTRAINT orders_reservation_unique UNIQUE (reservation_id),
    CONSTRAINT orders_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (reservation_id)
);

-- Every change to stock.quantity, with its source. sum(delta) per sale equals
-- the sale's available units.
CREATE TABLE stock_ledger (
    entry_id       bigint      GENERATED ALWAYS AS IDENTITY,
    sale_id        text        NOT NULL,
    bucket         integer     NOT NULL,
    delta          integer     NOT NULL,
    reason         text        NOT NULL,
    reservation_id text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stock_ledger_pkey PRIMARY KEY (entry_id),
    CONSTRAINT stock_ledger_stock_fkey FOREIGN KEY (sale_id, bucket) REFERENCES stock (sale_id, bucket),
    CONSTRAINT stock_ledger_reason_valid CHECK (reason IN ('initial', 'reserve', 'cancel', 'expire')),
    CONSTRAINT stock_ledger_delta_nonzero CHECK (delta <> 0)
);
CREATE INDEX stock_ledger_sale ON stock_ledger (sale_id);
CREATE INDEX stock_ledger_reservation ON stock_ledger (reservation_id) WHERE reservation_id IS NOT NULL;

-- Results of the invariant job, one row per sale, and the incidents it found.
CREATE TABLE invariant_status (
    sale_id    text        NOT NULL,
    ok         boolean     NOT NULL,
    checked_at timestamptz NOT NULL,
    detail     text        NOT NULL DEFAULT '',
    CONSTRAINT invariant_status_pkey PRIMARY KEY (sale_id),
    CONSTRAINT invariant_status_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id)
);

CREATE TABLE incidents (
    incident_id   bigint      GENERATED ALWAYS AS IDENTITY,
    sale_id       text        NOT NULL,
    kind          text        NOT NULL,
    detail        text        NOT NULL,
    initial_stock integer     NOT NULL,
    available     bigint      NOT NULL,
    pending       bigint      NOT NULL,
    confirmed     bigint      NOT NULL,
    ledger_total  bigint      NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT incidents_pkey PRIMARY KEY (incident_id),
    CONSTRAINT incidents_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id)
);
CREATE INDEX incidents_sale ON incidents (sale_id, created_at);

-- The invariant, for people: SELECT * FROM sale_invariant;
-- available + pending + confirmed must equal initial_stock, and the ledger must
-- agree with the stock rows. Quantities are units, not reservation counts.
CREATE VIEW sale_invariant AS
SELECT s.sale_id,
       s.sku,
       s.state,
       s.initial_stock,
       st.available,
       r.pending,
       r.confirmed,
       r.expired,
       r.cancelled,
       l.ledger_total,
       (st.available + r.pending + r.confirmed)::bigint AS accounted,
       (st.available + r.pending + r.confirmed = s.initial_stock
           AND l.ledger_total = st.available) AS ok
  FROM sales s
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity), 0)::bigint AS available
         FROM stock WHERE stock.sale_id = s.sale_id) st
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity) FILTER (WHERE state = 'pending'), 0)::bigint   AS pending,
              coalesce(sum(quantity) FILTER (WHERE state = 'confirmed'), 0)::bigint AS confirmed,
              coalesce(sum(quantity) FILTER (WHERE state = 'expired'), 0)::bigint   AS expired,
              coalesce(sum(quantity) FILTER (WHERE state = 'cancelled'), 0)::bigint AS cancelled
         FROM reservations WHERE reservations.sale_id = s.sale_id) r
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(delta), 0)::bigint AS ledger_total
         FROM stock_ledger WHERE stock_ledger.sale_id = s.sale_id) l;
