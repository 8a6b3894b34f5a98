-- Payments confirm holds; operators extend, void and repair; every change to
-- a stock row names its source (issue 14).
--
-- golang-migrate runs this file as one transaction: the ALTER TABLEs below
-- hold ACCESS EXCLUSIVE locks on sales, reservations, orders and stock_ledger
-- until it commits. What runs under them: adding columns (nullable, or with a
-- constant default: no table rewrite), re-adding two CHECK constraints (one
-- sequential scan each of reservations and stock_ledger), a partial unique
-- index on a column that is NULL everywhere (empty). Run it between sales.

-- Who confirms a sale's holds. 'payment': a signed payment event
-- (POST /payments/events); the customer's own confirm is refused.
-- 'customer': the customer confirms (POST /reservations/{id}/confirm), for
-- stores without a payment integration. The service always writes the
-- column (its API default is 'payment'); the column default is 'customer' so
-- that sales made before this migration, and any sale an instance of the
-- previous release makes during a rolling upgrade, keep the behaviour their
-- creator knew.
ALTER TABLE sales
    ADD COLUMN confirmation text NOT NULL DEFAULT 'customer',
    ADD CONSTRAINT sales_confirmation_valid CHECK (confirmation IN ('payment', 'customer'));

-- A voided order: confirmed once, then undone by an operator or a refund.
-- Its units are back in stock (restocked_at is set by the statement that
-- returns them, as for cancel and expiry: reservations_restocked_state
-- holds as it is), and it is neither pending nor confirmed. The order row
-- stays: it is the record that the order existed.
-- extended_seconds: how much operators have extended a pending hold, at
-- most a day over its original time.
ALTER TABLE reservations
    DROP CONSTRAINT reservations_state_valid,
    ADD CONSTRAINT reservations_state_valid
        CHECK (state IN ('pending', 'confirmed', 'expired', 'cancelled', 'voided')),
    ADD COLUMN voided_at timestamptz,
    ADD COLUMN void_reason text,
    ADD COLUMN extended_seconds integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT reservations_void_reason_length CHECK (length(void_reason) BETWEEN 1 AND 500),
    ADD CONSTRAINT reservations_voided_state CHECK ((voided_at IS NULL) = (state <> 'voided')),
    ADD CONSTRAINT reservations_extended_seconds_range CHECK (extended_seconds BETWEEN 0 AND 86400);

-- What paid for an order, when a payment event confirmed it (NULL for
-- orders confirmed by their customer). One payment reference confirms at
-- most one order.
ALTER TABLE orders
    ADD COLUMN payment_reference text,
    ADD COLUMN payment_event_id  text,
    ADD COLUMN amount            bigint,
    ADD COLUMN currency          text,
    ADD CONSTRAINT orders_payment_reference_length CHECK (length(payment_reference) BETWEEN 1 AND 255);
CREATE UNIQUE INDEX orders_payment_reference_unique
    ON orders (payment_reference) WHERE payment_reference IS NOT NULL;

-- The ledger's new reasons: 'void' (an order voided, its units back) and
-- 'repair' (an operator's correction after an invariant pause, `flashline
-- sale repair`), both naming the operator. xact_id is the transaction that
-- wrote the row, to match each ledger row with the stock change it records
-- (stock_audit.xact_id): a stock change with no ledger row in its own
-- transaction is a second write path. Rows written before this migration
-- have none. The column is added without a default and the default set
-- afterwards, so that existing rows are not rewritten.
ALTER TABLE stock_ledger
    DROP CONSTRAINT stock_ledger_reason_valid,
    ADD CONSTRAINT stock_ledger_reason_valid
        CHECK (reason IN ('initial', 'reserve', 'cancel', 'expire', 'void', 'repair')),
    ADD COLUMN operator text,
    ADD COLUMN note     text,
    ADD COLUMN xact_id  bigint,
    ADD CONSTRAINT stock_ledger_operator_named CHECK (reason NOT IN ('void', 'repair') OR operator IS NOT NULL);
ALTER TABLE stock_ledger ALTER COLUMN xact_id SET DEFAULT (pg_current_xact_id()::text::bigint);

-- Every payment event applied, one row per event id, written in the same
-- transaction as its effect: the primary key is what makes a redelivered
-- event (on any instance, at any time) a replay with no effect. The foreign
-- key refuses an event about an unknown reservation, so such an event
-- writes nothing. request_hash is SHA-256 of the event's body; outcome is
-- what it did (confirmed, late_payment, cancelled, voided, ...).
CREATE TABLE payment_events (
    event_id          text        NOT NULL,
    type              text        NOT NULL,
    reservation_id    text        NOT NULL,
    payment_reference text,
    amount            bigint,
    currency          text,
    request_hash      bytea       NOT NULL,
    outcome           text,
    order_id          text,
    received_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_events_pkey PRIMARY KEY (event_id),
    CONSTRAINT payment_events_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (reservation_id),
    CONSTRAINT payment_events_type_valid CHECK (type IN ('payment.succeeded', 'payment.failed', 'refund.succeeded')),
    CONSTRAINT payment_events_event_id_length CHECK (length(event_id) BETWEEN 1 AND 255),
    CONSTRAINT payment_events_reference_length CHECK (length(payment_reference) BETWEEN 1 AND 255),
    CONSTRAINT payment_events_currency_valid CHECK (currency ~ '^[A-Za-z]{3}$'),
    CONSTRAINT payment_events_amount_nonneg CHECK (amount >= 0)
);
CREATE INDEX payment_events_reservation ON payment_events (reservation_id);

-- Payments that arrived for a hold that had already expired, been
-- cancelled or voided, or that was paid already with another payment: the
-- stock is not taken again, the money must go back. Operators list the
-- open ones (GET /admin/payments/late); a refund.succeeded event for the
-- same reservation and payment reference closes one.
CREATE TABLE late_payments (
    event_id          text        NOT NULL,
    reservation_id    text        NOT NULL,
    sale_id           text        NOT NULL,
    payment_reference text        NOT NULL,
    amount            bigint,
    currency          text,
    reason            text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    refunded_at       timestamptz,
    refund_event_id   text,
    CONSTRAINT late_payments_pkey PRIMARY KEY (event_id),
    CONSTRAINT late_payments_event_fkey FOREIGN KEY (event_id) REFERENCES payment_events (event_id),
    CONSTRAINT late_payments_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (reservation_id),
    CONSTRAINT late_payments_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id),
    CONSTRAINT late_payments_reason_valid
        CHECK (reason IN ('hold_expired', 'hold_cancelled', 'hold_voided', 'duplicate_payment')),
    CONSTRAINT late_payments_refund_pair CHECK ((refunded_at IS NULL) = (refund_event_id IS NULL))
);
CREATE INDEX late_payments_to_refund ON late_payments (created_at) WHERE refunded_at IS NULL;
-- One payment is one late payment, however many events announce it.
CREATE UNIQUE INDEX late_payments_payment_unique ON late_payments (reservation_id, payment_reference);

-- What operators did to sales and reservations (extend, void, repair): who,
-- when, what, and how many units or holds it touched. Written by the
-- statement that does it.
CREATE TABLE operator_actions (
    action_id      bigint      GENERATED ALWAYS AS IDENTITY,
    action         text        NOT NULL,
    sale_id        text        NOT NULL,
    reservation_id text,
    operator       text        NOT NULL,
    detail         text        NOT NULL DEFAULT '',
    affected       integer     NOT NULL DEFAULT 0,
    xact_id        bigint      NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT operator_actions_pkey PRIMARY KEY (action_id),
    CONSTRAINT operator_actions_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id),
    CONSTRAINT operator_actions_action_valid
        CHECK (action IN ('extend_sale', 'extend_reservation', 'void', 'repair')),
    CONSTRAINT operator_actions_operator_length CHECK (length(operator) BETWEEN 1 AND 128)
);
CREATE INDEX operator_actions_sale ON operator_actions (sale_id, created_at);

-- Every change to a stock row, with who made it: the row's quantity before
-- and after (NULL before: inserted), the transaction, and the session's
-- application_name, login user, backend pid, client address, the kind of
-- statement (TG_OP) and the first 200 characters of the statement the
-- client sent. Flashline names its connections per role
-- (flashline-sale, flashline-admin, flashline-jobs, flashline-cli, ...), so a
-- change made from psql or another program says so. Written by a trigger,
-- so no write path can skip it short of disabling the trigger (which takes
-- an ACCESS EXCLUSIVE lock and is itself visible in pg_trigger). A role
-- that may change stock needs INSERT on this table (the service's does);
-- one that lacks it cannot change stock at all.
--
-- Cost: one row per changed stock row per statement, i.e. one per
-- purchase-path batch (not per reservation) and one per restock. No foreign
-- key, so the insert takes no lock beyond its own row.
CREATE TABLE stock_audit (
    audit_id         bigint      GENERATED ALWAYS AS IDENTITY,
    sale_id          text        NOT NULL,
    bucket           integer     NOT NULL,
    old_quantity     integer,
    new_quantity     integer,
    xact_id          bigint      NOT NULL,
    application_name text        NOT NULL,
    db_user          text        NOT NULL,
    backend_pid      integer     NOT NULL,
    client_addr      inet,
    statement_tag    text        NOT NULL,
    query            text        NOT NULL,
    changed_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stock_audit_pkey PRIMARY KEY (audit_id)
);
CREATE INDEX stock_audit_sale ON stock_audit (sale_id, audit_id);

CREATE FUNCTION flashline_audit_stock() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    row_sale   text;
    row_bucket integer;
    old_q      integer;
    new_q      integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        row_sale := NEW.sale_id; row_bucket := NEW.bucket; new_q := NEW.quantity;
    ELSIF TG_OP = 'DELETE' THEN
        row_sale := OLD.sale_id; row_bucket := OLD.bucket; old_q := OLD.quantity;
    ELSE
        row_sale := NEW.sale_id; row_bucket := NEW.bucket; old_q := OLD.quantity; new_q := NEW.quantity;
    END IF;
    INSERT INTO stock_audit (sale_id, bucket, old_quantity, new_quantity, xact_id,
                             application_name, db_user, backend_pid, client_addr,
                             statement_tag, query)
    VALUES (row_sale, row_bucket, old_q, new_q, pg_current_xact_id()::text::bigint,
            current_setting('application_name'), session_user, pg_backend_pid(),
            inet_client_addr(), TG_OP, left(coalesce(current_query(), ''), 200));
    RETURN NULL;
END
$$;

-- An UPDATE that changes nothing (SET quantity = quantity) is not recorded.
CREATE TRIGGER stock_audit_update
    AFTER UPDATE ON stock
    FOR EACH ROW
    WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION flashline_audit_stock();

CREATE TRIGGER stock_audit_insert_delete
    AFTER INSERT OR DELETE ON stock
    FOR EACH ROW
    EXECUTE FUNCTION flashline_audit_stock();

-- The invariant, as before, with voided units shown (last column: a view
-- can only grow at its end). A voided order's units are back in stock, so
-- it counts neither as pending nor as confirmed:
-- available + pending + confirmed = initial_stock still, and the ledger
-- ('void' rows) still equals the stock.
CREATE OR REPLACE VIEW sale_invariant AS
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
           AND l.ledger_total = st.available) AS ok,
       r.voided
  FROM sales s
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity), 0)::bigint AS available
         FROM stock WHERE stock.sale_id = s.sale_id) st
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(quantity) FILTER (WHERE state = 'pending'), 0)::bigint   AS pending,
              coalesce(sum(quantity) FILTER (WHERE state = 'confirmed'), 0)::bigint AS confirmed,
              coalesce(sum(quantity) FILTER (WHERE state = 'expired'), 0)::bigint   AS expired,
              coalesce(sum(quantity) FILTER (WHERE state = 'cancelled'), 0)::bigint AS cancelled,
              coalesce(sum(quantity) FILTER (WHERE state = 'voided'), 0)::bigint    AS voided
         FROM reservations WHERE reservations.sale_id = s.sale_id) r
 CROSS JOIN LATERAL (
       SELECT coalesce(sum(delta), 0)::bigint AS ledger_total
         FROM stock_ledger WHERE stock_ledger.sale_id = s.sale_id) l;
