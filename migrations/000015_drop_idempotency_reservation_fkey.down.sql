-- Undoes 000015: the key's reservation is checked again (every key names a
-- reservation, so the constraint validates).
ALTER TABLE idempotency_keys
    ADD CONSTRAINT idempotency_keys_reservation_fkey FOREIGN KEY (reservation_id) REFERENCES reservations (reservation_id);
