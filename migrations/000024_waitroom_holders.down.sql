ALTER TABLE waiting_rooms
    DROP CONSTRAINT waiting_rooms_holders_whole,
    DROP COLUMN final_seed,
    DROP COLUMN holders_committed_at,
    DROP COLUMN holders_count,
    DROP COLUMN holders_root;
DROP TABLE waitroom_holders;
