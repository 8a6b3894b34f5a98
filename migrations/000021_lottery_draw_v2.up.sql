-- A lottery's draw that nobody, the store included, can bias or hide (issue
-- 48; the formula in lotterydraw.go and docs/lottery.md). When registration
-- closes, the registrants are committed: the Merkle root of their hashed ids
-- (registrants_root, registrants_count, registrants_committed_at), after
-- which no registration is accepted. The draw's randomness combines the
-- store's seed (sales.draw_seed, its SHA-256 published at creation) with a
-- public beacon's round, the first published after the close, fixed at the
-- sale's creation from the beacon's configuration (beacon_* columns; NULL:
-- the deployment had no beacon, said so on the policy and the transcript).
-- The round's value and signature are stored by the draw. draw_version 1:
-- drawn before this migration (the seed alone), 2: the formula above.
ALTER TABLE lotteries
    ADD COLUMN draw_version             smallint    NOT NULL DEFAULT 2,
    ADD COLUMN registrants_root         bytea,
    ADD COLUMN registrants_count        integer,
    ADD COLUMN registrants_committed_at timestamptz,
    ADD COLUMN beacon_public_key        bytea,
    ADD COLUMN beacon_genesis           timestamptz,
    ADD COLUMN beacon_period_seconds    integer,
    ADD COLUMN beacon_round             bigint,
    ADD COLUMN beacon_randomness        bytea,
    ADD COLUMN beacon_signature         bytea,
    ADD CONSTRAINT lotteries_beacon_whole CHECK (
        (beacon_round IS NULL) = (beacon_public_key IS NULL)
        AND (beacon_round IS NULL) = (beacon_genesis IS NULL)
        AND (beacon_round IS NULL) = (beacon_period_seconds IS NULL)),
    ADD CONSTRAINT lotteries_beacon_value CHECK (
        (beacon_randomness IS NULL) = (beacon_signature IS NULL)
        AND (beacon_randomness IS NULL OR beacon_round IS NOT NULL));
UPDATE lotteries SET draw_version = 1 WHERE drawn_at IS NOT NULL;
