-- A batch's reservations share one 'reserve' ledger row (issue 26): the
-- batch takes their units with one decrement, and its ledger row records
-- that decrement (delta: minus the units of every reservation it took them
-- for) with the reservations it served in reservation_ids, in place of a
-- row and two index entries per reservation. Sums are unchanged: the
-- invariant, the repair and the audit's unledgered changes read sum(delta)
-- per sale, bucket or transaction. A reservation's 'reserve' entry is the
-- row whose reservation_ids holds its id (rows written before this
-- migration, and by instances of the version before it, name one
-- reservation in reservation_id, as 'cancel', 'expire' and 'void' rows
-- still do):
--
--   SELECT * FROM stock_ledger
--    WHERE sale_id = 'sale_…' AND (reservation_id = 'res_…' OR 'res_…' = ANY (reservation_ids));
--
-- A nullable column: no rewrite. The constraint is NOT VALID (rows already
-- there are not scanned, every new row is checked): an instant lock.
ALTER TABLE stock_ledger
    ADD COLUMN reservation_ids text[],
    ADD CONSTRAINT stock_ledger_batch CHECK (reservation_ids IS NULL OR
        (reason = 'reserve' AND reservation_id IS NULL AND cardinality(reservation_ids) > 0)) NOT VALID;
