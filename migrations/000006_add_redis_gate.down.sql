DROP TRIGGER reservations_gate_restock ON reservations;
DROP FUNCTION gate_outbox_restock();
DROP TABLE gate_outbox;
DROP INDEX reservations_gate_seq_unique;
ALTER TABLE reservations DROP COLUMN gate_seq;
ALTER TABLE sales DROP CONSTRAINT sales_gate_valid, DROP COLUMN gate_epoch, DROP COLUMN gate;
