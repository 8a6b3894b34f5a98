-- Only answers that took stock are stored under an idempotency key, so the
-- stored status was always 201 and the service no longer writes it: the HTTP
-- layer knows what a stored receipt answers. The column stays, with that
-- value as its default, for instances of the previous release that still
-- read it during a rolling upgrade; a later migration drops it.
ALTER TABLE idempotency_keys ALTER COLUMN status_code SET DEFAULT 201;
