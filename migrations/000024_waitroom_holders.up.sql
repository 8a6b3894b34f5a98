-- The pre-open crowd of a randomized_at_open waiting room, committed at the
-- open (issue 48; the formula in crowddraw.go and docs/waiting-room.md).
-- Each instance writes the customers it gave a pre-open ticket, in batches
-- (one INSERT per instance, sale and flush, never a row per arrival), into
-- waitroom_holders, refused once the room has frozen its crowd. The freeze
-- (the first lease or pacer tick after the open) computes the Merkle root of
-- their hashed ids in its transaction and stores it (holders_root,
-- holders_count, holders_committed_at) with the final seed the crowd's ranks
-- are drawn by (final_seed: the root and the sale's draw seed together).
CREATE TABLE waitroom_holders (
    sale_id     text NOT NULL,
    customer_id text NOT NULL,
    CONSTRAINT waitroom_holders_pkey PRIMARY KEY (sale_id, customer_id),
    CONSTRAINT waitroom_holders_room_fkey FOREIGN KEY (sale_id) REFERENCES waiting_rooms (sale_id) ON DELETE CASCADE
);

ALTER TABLE waiting_rooms
    ADD COLUMN holders_root         bytea,
    ADD COLUMN holders_count        bigint,
    ADD COLUMN holders_committed_at timestamptz,
    ADD COLUMN final_seed           bytea,
    ADD CONSTRAINT waiting_rooms_holders_whole CHECK (
        (holders_root IS NULL) = (holders_count IS NULL)
        AND (holders_root IS NULL) = (holders_committed_at IS NULL)
        AND (final_seed IS NULL OR holders_root IS NOT NULL));
