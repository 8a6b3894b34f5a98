ALTER TABLE lotteries
    DROP CONSTRAINT IF EXISTS lotteries_beacon_value,
    DROP CONSTRAINT IF EXISTS lotteries_beacon_whole,
    DROP COLUMN IF EXISTS beacon_signature,
    DROP COLUMN IF EXISTS beacon_randomness,
    DROP COLUMN IF EXISTS beacon_round,
    DROP COLUMN IF EXISTS beacon_period_seconds,
    DROP COLUMN IF EXISTS beacon_genesis,
    DROP COLUMN IF EXISTS beacon_public_key,
    DROP COLUMN IF EXISTS registrants_committed_at,
    DROP COLUMN IF EXISTS registrants_count,
    DROP COLUMN IF EXISTS registrants_root,
    DROP COLUMN IF EXISTS draw_version;
