-- Index entries a reservation wrote for nothing (docs/design.md, "What one
-- reservation costs"): every reservation wrote one into each of these, and
-- no statement of the service needs it.
--
--  * reservations_admission_token_unique was a UNIQUE constraint, whose index
--    holds an entry for every row, NULL included: a reservation made without
--    an admission token (a direct sale: most of them) wrote an entry there.
--    It becomes a unique index of the same name over the rows that have a
--    token only. Uniqueness among those is what it ever enforced (NULLs never
--    conflict), every query that reads it asks for one token
--    (admission_token_id = $1, which implies IS NOT NULL), a violation still
--    names reservations_admission_token_unique (postgres/errors.go), and a
--    reserve's ON CONFLICT DO NOTHING (no target) still covers it. The new
--    index is built before the constraint goes, in this one transaction.
--  * stock_ledger_reservation (the ledger's rows of one reservation) is
--    read by no statement: the invariant, the repair and the audit read a
--    sale's ledger by sale (stock_ledger_sale). A DBA looking for one
--    reservation's rows filters a sale's.
--
-- Rolling upgrade: safe with the previous release running (it reads and
-- writes nothing these change). The index build holds a SHARE lock on
-- reservations (writes wait) for as long as it takes: about a second per
-- million reservations; on a large table, run it between sales.
CREATE UNIQUE INDEX reservations_admission_token_unique_partial
    ON reservations (admission_token_id) WHERE admission_token_id IS NOT NULL;
ALTER TABLE reservations DROP CONSTRAINT reservations_admission_token_unique;
ALTER INDEX reservations_admission_token_unique_partial RENAME TO reservations_admission_token_unique;

DROP INDEX stock_ledger_reservation;
