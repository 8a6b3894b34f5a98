-- Honest places in a waiting room (waitroom/place.go). Positions are leased to
-- instances in blocks, and a block dropped half used leaves positions nobody
-- holds: counting positions overstated the crowd (60 tickets used 112
-- positions). The pre-open crowd of a randomized_at_open room is now counted
-- in tickets: every instance adds the pre-open tickets it gave out, a few
-- times a second (one UPDATE per instance and sale, not per waiter), and the
-- freeze at the open takes that count. Such tickets take no position (the
-- draw places them). Positions still order arrivals;
-- post-open ranks continue right after the pre-open crowd:
-- rank = preopen_count + (position - preopen_positions).
ALTER TABLE waiting_rooms
    -- Pre-open tickets given out so far, as instances have reported them.
    ADD COLUMN preopen_tickets   bigint NOT NULL DEFAULT 0,
    -- Positions handed out before the open (next_position - 1 at the
    -- freeze); NULL until then, set together with preopen_count.
    ADD COLUMN preopen_positions bigint;

-- Rooms frozen before this migration counted positions: their ranks stay.
UPDATE waiting_rooms SET preopen_positions = preopen_count WHERE preopen_count IS NOT NULL;

-- preopen_count is a count of tickets now, not of positions: it may exceed
-- the positions handed out.
ALTER TABLE waiting_rooms
    DROP CONSTRAINT waiting_rooms_preopen_count_range,
    ADD CONSTRAINT waiting_rooms_preopen_count_nonneg CHECK (preopen_count >= 0),
    ADD CONSTRAINT waiting_rooms_preopen_tickets_nonneg CHECK (preopen_tickets >= 0),
    ADD CONSTRAINT waiting_rooms_preopen_positions_set CHECK ((preopen_positions IS NULL) = (preopen_count IS NULL)),
    ADD CONSTRAINT waiting_rooms_preopen_positions_range CHECK (preopen_positions BETWEEN 0 AND next_position - 1);

-- Operators' controls of a waiting room (POST /admin/sales/{id}/queue/...):
-- hold the queue (nobody is admitted, e.g. during an incident; the sale itself
-- stays as it is) and a short message shown to everyone waiting. Both are
-- audited in operator_actions, by the statement that changes them.
ALTER TABLE waiting_rooms
    ADD COLUMN held      boolean NOT NULL DEFAULT false,
    ADD COLUMN broadcast text    NOT NULL DEFAULT '',
    ADD CONSTRAINT waiting_rooms_broadcast_length CHECK (length(broadcast) <= 280);

ALTER TABLE operator_actions
    DROP CONSTRAINT operator_actions_action_valid,
    ADD CONSTRAINT operator_actions_action_valid
        CHECK (action IN ('extend_sale', 'extend_reservation', 'void', 'repair',
                          'hold_queue', 'release_queue', 'broadcast'));

-- Every instance hears at once when a room is held, released or given a
-- message, as when its watermark moves.
DROP TRIGGER waiting_rooms_advanced ON waiting_rooms;
CREATE TRIGGER waiting_rooms_advanced
    AFTER UPDATE OF admitted_through, preopen_count, held, broadcast ON waiting_rooms
    FOR EACH ROW
    WHEN (OLD.admitted_through IS DISTINCT FROM NEW.admitted_through
          OR OLD.preopen_count IS DISTINCT FROM NEW.preopen_count
          OR OLD.held IS DISTINCT FROM NEW.held
          OR OLD.broadcast IS DISTINCT FROM NEW.broadcast)
    EXECUTE FUNCTION flashline_notify_waitroom();
