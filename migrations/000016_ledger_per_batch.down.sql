-- Each batch's 'reserve' row becomes one row per reservation again, as the
-- version before 000016 writes and reads them: minus the reservation's units,
-- its id in reservation_id, the batch's bucket, time and transaction (xact_id,
-- which the audit's unledgered changes group by). The new rows take new
-- entry ids, after every row already there: the sold-out moments the report
-- finds (console.sql, ReportSoldOuts, in entry order) of a sale that sold
-- under 000016 are then only as good as the rows' created_at. A batch row
-- whose delta is not its reservations' units (a row changed by hand) stops
-- the migration before anything is written.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM stock_ledger l
                WHERE l.reservation_ids IS NOT NULL
                  AND l.delta <> -(SELECT coalesce(sum(r.quantity), 0) FROM reservations r
                                    WHERE r.reservation_id = ANY (l.reservation_ids))) THEN
        RAISE EXCEPTION 'a batch ledger row''s delta is not its reservations'' units: not split, the ledger stays as it is';
    END IF;
END $$;
INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id, created_at, xact_id)
SELECT l.sale_id, l.bucket, -r.quantity, 'reserve', r.reservation_id, l.created_at, l.xact_id
  FROM stock_ledger l
 CROSS JOIN LATERAL unnest(l.reservation_ids) WITH ORDINALITY AS u(reservation_id, ord)
  JOIN reservations r ON r.reservation_id = u.reservation_id
 WHERE l.reservation_ids IS NOT NULL
 ORDER BY l.entry_id, u.ord;
DELETE FROM stock_ledger WHERE reservation_ids IS NOT NULL;

ALTER TABLE stock_ledger
    DROP CONSTRAINT stock_ledger_batch,
    DROP COLUMN reservation_ids;
