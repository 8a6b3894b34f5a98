-- A reserve batch's statement (ReserveBatchCommit in sql/queries/reserve.sql)
-- either takes the whole batch or fails, so that the service may send COMMIT
-- with it, in the same round trip, without reading its answer first.
-- Before, the statement skipped a row that conflicted (ON CONFLICT DO
-- NOTHING: a speculative insertion, which writes a confirmation record to
-- the WAL for every row, conflict or not) and the service compared the
-- counts before committing or rolling back. Now a conflict aborts the
-- statement (a unique violation, as any INSERT), and this function, called
-- by the statement's last SELECT, aborts it when a row was filtered out
-- (the instrument's limit, a gate unit given back) or, when the caller asks
-- for it (must_take), when the decrement missed (others took the stock since
-- the batch's read). Each is raised as a check_violation naming what failed,
-- which postgres/errors.go reads: reserve_batch_missed (nothing was written;
-- the batch allocates again under the row lock) and reserve_batch_short (the
-- batch is rolled back and run again, as a conflict is).
--
-- Rolling upgrade: the previous release does not call it; this one needs it,
-- and `serve` migrates before it starts (expand, then code).
CREATE FUNCTION reserve_batch_whole(decremented int, reserved int, keys_stored int, batch int, must_take boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF decremented = 0 AND reserved = 0 AND NOT must_take THEN
        RETURN true; -- nothing written: the caller locks the row and allocates again
    END IF;
    IF decremented = 0 THEN
        RAISE EXCEPTION 'reserve batch: the decrement missed (others took the stock since the read)'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reserve_batch_missed';
    END IF;
    IF reserved <> batch OR keys_stored <> batch THEN
        RAISE EXCEPTION 'reserve batch: % reservations and % keys written for % requests', reserved, keys_stored, batch
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reserve_batch_short';
    END IF;
    RETURN true;
END
$$;
