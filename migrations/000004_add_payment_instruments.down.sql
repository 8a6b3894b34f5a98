DROP INDEX reservations_active_by_instrument;
ALTER TABLE reservations DROP COLUMN payment_instrument;
