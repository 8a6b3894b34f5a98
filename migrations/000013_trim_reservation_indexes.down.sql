-- Undoes 000013: the admission token's uniqueness is a constraint again
-- (its index holds every row), and the ledger is indexed by reservation.
ALTER INDEX reservations_admission_token_unique RENAME TO reservations_admission_token_unique_partial;
ALTER TABLE reservations ADD CONSTRAINT reservations_admission_token_unique UNIQUE (admission_token_id);
DROP INDEX reservations_admission_token_unique_partial;

CREATE INDEX stock_ledger_reservation ON stock_ledger (reservation_id) WHERE reservation_id IS NOT NULL;
