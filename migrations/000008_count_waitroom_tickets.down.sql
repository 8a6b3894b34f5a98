-- Undoes 000008. The old range of preopen_count comes back: this fails (and
-- changes nothing) while a room counted more pre-open tickets than it handed
-- out positions, which the previous release cannot rank, or while audit rows
-- of the queue controls exist; a DBA decides first.
DROP TRIGGER waiting_rooms_advanced ON waiting_rooms;
CREATE TRIGGER waiting_rooms_advanced
    AFTER UPDATE OF admitted_through, preopen_count ON waiting_rooms
    FOR EACH ROW
    WHEN (OLD.admitted_through IS DISTINCT FROM NEW.admitted_through
          OR OLD.preopen_count IS DISTINCT FROM NEW.preopen_count)
    EXECUTE FUNCTION flashline_notify_waitroom();
ALTER TABLE operator_actions
    DROP CONSTRAINT operator_actions_action_valid,
    ADD CONSTRAINT operator_actions_action_valid
        CHECK (action IN ('extend_sale', 'extend_reservation', 'void', 'repair'));
ALTER TABLE waiting_rooms
    DROP COLUMN broadcast,
    DROP COLUMN held,
    DROP CONSTRAINT waiting_rooms_preopen_count_nonneg,
    ADD CONSTRAINT waiting_rooms_preopen_count_range CHECK (preopen_count BETWEEN 0 AND next_position - 1),
    DROP COLUMN preopen_positions,
    DROP COLUMN preopen_tickets;
