DROP TABLE IF EXISTS rate_limits;
DROP INDEX IF EXISTS reservations_admitted;
DROP TRIGGER IF EXISTS waiting_rooms_advanced ON waiting_rooms;
DROP TRIGGER IF EXISTS waiting_rooms_created ON waiting_rooms;
DROP FUNCTION IF EXISTS flashline_notify_waitroom();
DROP TABLE IF EXISTS waiting_rooms;
ALTER TABLE sales
    DROP CONSTRAINT IF EXISTS sales_draw_seed_length,
    DROP CONSTRAINT IF EXISTS sales_min_account_age_nonneg,
    DROP CONSTRAINT IF EXISTS sales_per_instrument_limit_positive,
    DROP CONSTRAINT IF EXISTS sales_challenge_bits_range,
    DROP CONSTRAINT IF EXISTS sales_fairness_valid,
    DROP COLUMN IF EXISTS draw_seed,
    DROP COLUMN IF EXISTS min_account_age_seconds,
    DROP COLUMN IF EXISTS per_instrument_limit,
    DROP COLUMN IF EXISTS challenge_bits,
    DROP COLUMN IF EXISTS fairness;
