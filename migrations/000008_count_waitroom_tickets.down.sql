-- Undoes 000008. The old range of preopen_count comes back: this fails (and
-- changes nothing) while a room counted more pre-open tickets than it handed
-- out positions, which the previous release cannot rank; a DBA decides first.
ALTER TABLE waiting_rooms
    DROP CONSTRAINT waiting_rooms_preopen_count_nonneg,
    ADD CONSTRAINT waiting_rooms_preopen_count_range CHECK (preopen_count BETWEEN 0 AND next_position - 1),
    DROP COLUMN preopen_positions,
    DROP COLUMN preopen_tickets;
