-- Undoes 000009. Fails (and changes nothing) while lottery sales exist: the
-- previous release cannot read them; a DBA decides what to do with them first.
DROP TABLE lottery_notifications;
DROP TABLE lottery_registrations;
DROP TABLE lotteries;
ALTER TABLE sales DROP CONSTRAINT sales_admission_valid;
ALTER TABLE sales ADD CONSTRAINT sales_admission_valid CHECK (admission IN ('direct', 'waiting_room'));
