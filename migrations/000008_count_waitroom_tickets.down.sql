ALTER TABLE waiting_rooms
    DROP COLUMN preopen_positions,
    DROP COLUMN preopen_tickets;
