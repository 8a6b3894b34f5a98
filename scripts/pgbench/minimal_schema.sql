-- The least a reservation must write, as a mark for what Flashline's cost:
-- three tables with primary keys only (no other index, no trigger, no
-- foreign key, no stored answer, no ledger), 10,000 SKUs. scripts/bench.sh
-- loads it into a database of its own (flashline_bench_min) and runs
-- minimal.sql against it.
CREATE TABLE stock (
    sku      integer NOT NULL PRIMARY KEY,
    quantity integer NOT NULL
);
CREATE TABLE reservations (
    reservation_id text        NOT NULL PRIMARY KEY,
    sku            integer     NOT NULL,
    customer_id    text        NOT NULL,
    quantity       integer     NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE idempotency_keys (
    customer_id    text NOT NULL,
    key            text NOT NULL,
    reservation_id text NOT NULL,
    PRIMARY KEY (customer_id, key)
);
INSERT INTO stock (sku, quantity) SELECT i, 100000000 FROM generate_series(1, 10000) i;
ANALYZE;
