-- The public randomness beacon of a randomized_at_open room's pre-open crowd
-- (issue 48; crowddraw.go and docs/waiting-room.md). The chain and the round
-- are fixed when the sale is created, from the beacon's configuration: the
-- first round published CrowdBeaconDelay after the opening time (a sale
-- without one, opened early, or frozen after that round was out fixes it
-- at the freeze, in the same way from the freeze's time). NULL: the deployment had no beacon, said so on the policy and the
-- transcript. The freeze commits the holders' root as before but, with a
-- beacon, leaves final_seed NULL; the lottery's job stores the round's value
-- and signature and the final seed once the round is published and
-- verified, and no rank is admitted before (WaitroomAdvance).
ALTER TABLE waiting_rooms
    ADD COLUMN beacon_public_key     bytea,
    ADD COLUMN beacon_genesis        timestamptz,
    ADD COLUMN beacon_period_seconds integer,
    ADD COLUMN beacon_round          bigint,
    ADD COLUMN beacon_randomness     bytea,
    ADD COLUMN beacon_signature      bytea,
    ADD CONSTRAINT waiting_rooms_beacon_chain CHECK (
        (beacon_public_key IS NULL) = (beacon_genesis IS NULL)
        AND (beacon_public_key IS NULL) = (beacon_period_seconds IS NULL)
        AND (beacon_round IS NULL OR beacon_public_key IS NOT NULL)),
    ADD CONSTRAINT waiting_rooms_beacon_value CHECK (
        (beacon_randomness IS NULL) = (beacon_signature IS NULL)
        AND (beacon_randomness IS NULL OR beacon_round IS NOT NULL));
