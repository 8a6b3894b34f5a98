-- The console's view of the fleet (handlers/fleet.go): each serving instance
-- writes its reservation answers of its last second (counts by outcome, the
-- purchase path's batches, the route's latency buckets, as its own metrics
-- hold them) here, at most once a second and only while they change, and
-- a sale's live snapshot reads every instance's row in its one transaction.
-- Nothing is written per request or per viewer. An instance silent for an
-- hour is forgotten by the next write.
CREATE TABLE console_instances (
    instance   text        NOT NULL,
    seconds    double precision NOT NULL,
    counts     bytea       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT console_instances_pkey PRIMARY KEY (instance),
    CONSTRAINT console_instances_instance_valid CHECK (length(instance) BETWEEN 1 AND 128),
    CONSTRAINT console_instances_counts_small CHECK (length(counts) <= 65536),
    CONSTRAINT console_instances_seconds_positive CHECK (seconds > 0)
);
