-- The optional Redis gate (gate/): a second counter in front of the stock
-- rows, for peak sales. Redis decides who may try, PostgreSQL still decides
-- who gets a unit (the conditional UPDATE stays the backstop). Every unit the
-- gate hands out comes back to it exactly once, through gate_outbox.

-- A sale is gated or not, for its whole life. gate_epoch counts the
-- rebuilds of its counter: the gate numbers the units it hands out
-- gate_epoch × 2^40 + n, so a unit handed out before a rebuild (whose
-- counter is computed from this database, and so already counts it back)
-- can be neither reserved nor given back after it.
ALTER TABLE sales
    ADD COLUMN gate text NOT NULL DEFAULT 'none',
    ADD COLUMN gate_epoch integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT sales_gate_valid CHECK (gate IN ('none', 'redis'));

-- The gate's number for the unit it handed out for this reservation (per
-- sale, never reused). A reservation without one never took from the
-- counter.
ALTER TABLE reservations ADD COLUMN gate_seq bigint;
CREATE UNIQUE INDEX reservations_gate_seq_unique ON reservations (sale_id, gate_seq)
    WHERE gate_seq IS NOT NULL;

-- Units owed back to a sale's gate counter, written in the same transaction
-- as what frees them, and applied to Redis by the relay, which records the
-- movement_id there too: a relay that dies between the two steps, or two
-- relays at once, apply each movement once.
--  * restock:<reservation_id>  a gated reservation expired, was cancelled or
--                              voided (the trigger below, in the statement
--                              that restocks it);
--  * return:<sale_id>:<seq>    the gate handed out unit <seq> and no
--                              reservation took it (refused, replayed, or
--                              abandoned): at most one per seq, and never for
--                              a seq a reservation holds (both are decided
--                              under the customer's advisory lock).
CREATE TABLE gate_outbox (
    movement_id text        NOT NULL,
    sale_id     text        NOT NULL,
    customer_id text        NOT NULL,
    quantity    integer     NOT NULL,
    reason      text        NOT NULL,
    gate_seq    bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    applied_at  timestamptz,
    CONSTRAINT gate_outbox_pkey PRIMARY KEY (movement_id),
    CONSTRAINT gate_outbox_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id),
    CONSTRAINT gate_outbox_quantity_positive CHECK (quantity > 0),
    CONSTRAINT gate_outbox_reason_valid CHECK (reason IN ('restock', 'return'))
);
CREATE INDEX gate_outbox_unapplied ON gate_outbox (created_at) WHERE applied_at IS NULL;
CREATE UNIQUE INDEX gate_outbox_return_seq ON gate_outbox (sale_id, gate_seq) WHERE gate_seq IS NOT NULL;

-- Whatever restocks a gated reservation (cancel, the expiry sweeper, a void)
-- owes its units to the gate, in the same transaction.
CREATE FUNCTION gate_outbox_restock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gate_outbox (movement_id, sale_id, customer_id, quantity, reason)
    VALUES ('restock:' || NEW.reservation_id, NEW.sale_id, NEW.customer_id, NEW.quantity, 'restock')
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER reservations_gate_restock
    AFTER UPDATE OF restocked_at ON reservations
    FOR EACH ROW
    WHEN (OLD.restocked_at IS NULL AND NEW.restocked_at IS NOT NULL AND NEW.gate_seq IS NOT NULL)
    EXECUTE FUNCTION gate_outbox_restock();
