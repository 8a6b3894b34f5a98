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
