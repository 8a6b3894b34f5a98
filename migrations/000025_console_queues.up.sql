-- The waiting room's analytics (flashline.QueueCounts): each serving
-- instance writes its own counts of each sale's line (places handed out,
-- admissions by their wait, reservations by the time since admission,
-- waiters gone quiet), cumulative since it started, here: at most once a
-- second and only while they change, one row per instance and sale. The
-- console and the report add the rows of a sale together. Nothing is
-- written per arrival or per poll. A row goes with its sale.
CREATE TABLE console_queues (
    sale_id    text        NOT NULL,
    instance   text        NOT NULL,
    counts     bytea       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT console_queues_pkey PRIMARY KEY (sale_id, instance),
    CONSTRAINT console_queues_sale_fkey FOREIGN KEY (sale_id) REFERENCES sales (sale_id) ON DELETE CASCADE,
    CONSTRAINT console_queues_instance_valid CHECK (length(instance) BETWEEN 1 AND 128),
    CONSTRAINT console_queues_counts_small CHECK (length(counts) <= 65536)
);
