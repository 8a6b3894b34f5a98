ALTER TABLE idempotency_keys ALTER COLUMN status_code DROP DEFAULT;
