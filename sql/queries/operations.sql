-- What operators do after the click (postgres/operations.go, repair.go,
-- incident.go): extend holds, void orders, repair a paused sale's stock, and
-- read an incident with the audit of its stock. Every change is audited in
-- operator_actions by the statement (or transaction) that makes it.

-- name: ReservationVoid :one
-- Voids a confirmed order and returns its units exactly once: the stock
-- update, the ledger row ('void', naming the operator) and the audit row
-- depend on the conditional update of the reservation (confirmed,
-- restocked_at IS NULL) having matched a row, so a repeated or concurrent
-- void, on any instance, returns nothing twice. Locks the reservation, then
-- its stock row, like cancel and the sweeper.
WITH r AS (
    UPDATE reservations
       SET state = 'voided', voided_at = now(), void_reason = @reason::text, restocked_at = now()
     WHERE reservations.reservation_id = @reservation_id
       AND state = 'confirmed' AND restocked_at IS NULL
    RETURNING reservations.reservation_id, reservations.sale_id,
              reservations.bucket, reservations.quantity
), s AS (
    UPDATE stock
       SET quantity = stock.quantity + r.quantity
      FROM r
     WHERE stock.sale_id = r.sale_id AND stock.bucket = r.bucket
    RETURNING stock.sale_id
), ledger AS (
    INSERT INTO stock_ledger (sale_id, bucket, delta, reason, reservation_id, operator, note)
    SELECT r.sale_id, r.bucket, r.quantity, 'void', r.reservation_id, @operator::text, @reason::text FROM r
), audit AS (
    INSERT INTO operator_actions (action, sale_id, reservation_id, operator, detail, affected)
    SELECT 'void', r.sale_id, r.reservation_id, @operator::text, @reason::text, r.quantity FROM r
)
SELECT count(*)::int AS voided FROM r;

-- name: SaleExtendHolds :one
-- Extends every pending hold of a sale whose time is not up by @seconds, up
-- to a day over each hold's original time (extended_seconds), and audits it
-- in the same statement. Holds already past expires_at are not revived,
-- even before the sweeper reaches them: their customer was told they
-- expired. One statement: each hold's row lock is held only until it
-- commits; a confirm or cancel of one of them waits that long, the sweeper
-- skips it. found is 0 for an unknown sale; at_cap counts the holds that
-- have now had their whole day.
WITH ext AS (
    UPDATE reservations
       SET expires_at = expires_at + make_interval(secs => least(@seconds::int, 86400 - extended_seconds)),
           extended_seconds = extended_seconds + least(@seconds::int, 86400 - extended_seconds)
     WHERE reservations.sale_id = @sale_id AND state = 'pending' AND expires_at > now()
       AND extended_seconds < 86400
    RETURNING reservations.extended_seconds
), audit AS (
    INSERT INTO operator_actions (action, sale_id, operator, detail, affected)
    SELECT 'extend_sale', s.sale_id, @operator,
           'pending holds extended by up to ' || @seconds::int || ' s',
           (SELECT count(*) FROM ext)::int
      FROM sales s
     WHERE s.sale_id = @sale_id
    RETURNING action_id
)
SELECT (SELECT count(*) FROM audit)::int AS found,
       (SELECT count(*) FROM ext)::int AS extended,
       (SELECT count(*) FROM ext WHERE ext.extended_seconds >= 86400)::int AS at_cap;

-- name: ReservationExtend :one
-- Extends one pending hold whose time is not up, as SaleExtendHolds does,
-- and audits it. Matches no row when the hold is not pending, past its
-- time, or has had its whole day of extensions.
WITH ext AS (
    UPDATE reservations
       SET expires_at = expires_at + make_interval(secs => least(@seconds::int, 86400 - extended_seconds)),
           extended_seconds = extended_seconds + least(@seconds::int, 86400 - extended_seconds)
     WHERE reservations.reservation_id = @reservation_id AND state = 'pending' AND expires_at > now()
       AND extended_seconds < 86400
    RETURNING reservations.reservation_id, reservations.sale_id
), audit AS (
    INSERT INTO operator_actions (action, sale_id, reservation_id, operator, detail, affected)
    SELECT 'extend_reservation', ext.sale_id, ext.reservation_id, @operator,
           'extended by up to ' || @seconds::int || ' s', 1
      FROM ext
)
SELECT count(*)::int AS extended FROM ext;

-- name: ReservationExtensionState :one
-- Why ReservationExtend matched nothing: the hold's state, whether its
-- time is up, and how much it has been extended.
SELECT state, (expires_at <= now())::boolean AS past_expiry, extended_seconds
  FROM reservations
 WHERE reservation_id = @reservation_id;

-- Repair (`flashline sale repair`), one transaction:
--   BEGIN; SaleLockForRepair; StockLockForRepair; RepairPlan;
--   [StockRepair; StockLedgerInsertRepair...; OperatorActionInsert]; COMMIT
-- The sale's row lock serialises the repair with the invariant job's
-- verdicts and admin actions; the stock rows' locks, taken in bucket order
-- before the plan is read, hold every restock, void and reservation of the
-- sale back until the repair commits, so the plan read afterwards cannot
-- change under it.

-- name: SaleLockForRepair :one
SELECT state FROM sales WHERE sale_id = @sale_id FOR UPDATE;

-- name: StockLockForRepair :many
SELECT bucket FROM stock WHERE sale_id = @sale_id ORDER BY bucket FOR UPDATE;

-- name: RepairPlan :many
-- Per bucket: its variant ('' for a sale without variants); what the stock
-- row says; what the reservations imply (the bucket's opening quantity,
-- split as CreateSale split it: from the sale's initial_stock over its
-- buckets, or for a sale with variants from its variant's initial_stock
-- over the variant's buckets, numbered from position * 64 (migration
-- 000026), minus the units its pending and confirmed reservations hold);
-- and what the ledger sums to. A variant's bucket is thus checked against
-- its own reservations and ledger rows (both by bucket). One index probe
-- per bucket on each table.
SELECT st.bucket,
       coalesce(v.sku, '')::text AS variant,
       st.quantity AS stock,
       (CASE WHEN v.sku IS NULL
             THEN s.initial_stock / s.buckets
                  + CASE WHEN st.bucket < s.initial_stock % s.buckets THEN 1 ELSE 0 END
             ELSE v.initial_stock / v.buckets
                  + CASE WHEN st.bucket - v.position * 64 < v.initial_stock % v.buckets THEN 1 ELSE 0 END
        END)::int AS opening,
       (SELECT coalesce(sum(r.quantity), 0) FROM reservations r
         WHERE r.sale_id = st.sale_id AND r.bucket = st.bucket
           AND r.state IN ('pending', 'confirmed'))::int AS held,
       (SELECT coalesce(sum(l.delta), 0) FROM stock_ledger l
         WHERE l.sale_id = st.sale_id AND l.bucket = st.bucket)::int AS ledger
  FROM stock st
  JOIN sales s ON s.sale_id = st.sale_id
  LEFT JOIN sale_variants v ON v.sale_id = st.sale_id AND v.sku = st.variant
 WHERE st.sale_id = @sale_id
 ORDER BY st.bucket;

-- name: StockRepair :execrows
-- Sets a bucket to what its reservations imply, only from the quantity the
-- plan read (the row is locked, so it matches; the condition is the guard).
UPDATE stock
   SET quantity = @target::int
 WHERE sale_id = @sale_id AND bucket = @bucket AND quantity = @expected::int;

-- name: StockLedgerInsertRepair :exec
-- A 'repair' ledger row naming the operator. @own_change: the row records
-- this transaction's own change to the stock row (xact_id: this
-- transaction); otherwise it records a difference between stock and ledger
-- left by an earlier change with no ledger row (xact_id NULL: it belongs to
-- no stock change of this transaction; stock_audit names the one it does).
INSERT INTO stock_ledger (sale_id, bucket, delta, reason, operator, note, xact_id)
VALUES (@sale_id, @bucket, @delta, 'repair', @operator::text, @note::text,
        CASE WHEN @own_change::boolean THEN pg_current_xact_id()::text::bigint END);

-- name: OperatorActionInsert :exec
INSERT INTO operator_actions (action, sale_id, reservation_id, operator, detail, affected)
VALUES (@action, @sale_id, sqlc.narg(reservation_id), @operator, @detail, @affected);

-- Incidents (`flashline incident show|list`).

-- name: IncidentGet :one
SELECT incident_id, sale_id, kind, detail, initial_stock, available, pending,
       confirmed, ledger_total, created_at
  FROM incidents
 WHERE incident_id = @incident_id;

-- name: IncidentList :many
-- The latest incidents, of one sale or of all.
SELECT incident_id, sale_id, kind, detail, created_at
  FROM incidents
 WHERE sqlc.narg(sale_id)::text IS NULL OR sale_id = sqlc.narg(sale_id)::text
 ORDER BY created_at DESC, incident_id DESC
 LIMIT 50;

-- name: StockAuditUnledgered :many
-- Changes to a sale's stock that no ledger row of their own transaction
-- accounts for: per transaction and bucket, the audit's net change against
-- the ledger's rows written by that transaction. Every statement of the
-- service writes its ledger rows in the same statement as its stock change,
-- so each line here is a second write path (or a ledger row changed by
-- hand). Oldest first; the first is where an incident started. Reads every
-- audit and ledger row of the sale: a tool for an incident, not a hot path.
WITH a AS (
    SELECT xact_id, bucket,
           sum(coalesce(new_quantity, 0) - coalesce(old_quantity, 0))::bigint AS delta,
           min(audit_id)::bigint AS first_audit_id,
           min(changed_at)::timestamptz AS changed_at
      FROM stock_audit
     WHERE stock_audit.sale_id = @sale_id
     GROUP BY xact_id, bucket
), l AS (
    SELECT xact_id, bucket, sum(delta)::bigint AS delta
      FROM stock_ledger
     WHERE stock_ledger.sale_id = @sale_id AND xact_id IS NOT NULL
     GROUP BY xact_id, bucket
)
SELECT a.first_audit_id, a.changed_at, a.xact_id, a.bucket, a.delta AS audit_delta,
       coalesce(l.delta, 0)::bigint AS ledger_delta
  FROM a
  LEFT JOIN l ON l.xact_id = a.xact_id AND l.bucket = a.bucket
 WHERE a.delta <> coalesce(l.delta, 0)
 ORDER BY a.first_audit_id
 LIMIT 100;

-- name: StockAuditAround :many
-- A sale's audit rows around one (@around_id): up to @before rows before it
-- and @after rows from it on, in order.
SELECT * FROM (
    (SELECT a.audit_id, a.bucket, a.old_quantity, a.new_quantity, a.xact_id,
            a.application_name, a.db_user, a.backend_pid, coalesce(host(a.client_addr), '')::text AS client_addr,
            a.statement_tag, a.query, a.changed_at
       FROM stock_audit a
      WHERE a.sale_id = @sale_id AND a.audit_id < @around_id
      ORDER BY a.audit_id DESC
      LIMIT @before::int)
    UNION ALL
    (SELECT a.audit_id, a.bucket, a.old_quantity, a.new_quantity, a.xact_id,
            a.application_name, a.db_user, a.backend_pid, coalesce(host(a.client_addr), '')::text AS client_addr,
            a.statement_tag, a.query, a.changed_at
       FROM stock_audit a
      WHERE a.sale_id = @sale_id AND a.audit_id >= @around_id
      ORDER BY a.audit_id
      LIMIT @after::int)
) around
ORDER BY audit_id;

-- name: StockAuditLatest :many
-- A sale's last audit rows up to a time (an incident's), oldest first.
SELECT * FROM (
    SELECT a.audit_id, a.bucket, a.old_quantity, a.new_quantity, a.xact_id,
           a.application_name, a.db_user, a.backend_pid, coalesce(host(a.client_addr), '')::text AS client_addr,
           a.statement_tag, a.query, a.changed_at
      FROM stock_audit a
     WHERE a.sale_id = @sale_id AND a.changed_at <= @until
     ORDER BY a.audit_id DESC
     LIMIT @max_rows::int
) latest
ORDER BY audit_id;

-- name: ReservationsSince :many
-- A sale's reservations made at or after @since (the first bad change to its
-- stock): the orders an incident may have affected. total counts them all,
-- beyond @max_rows.
SELECT r.reservation_id, r.customer_id, r.quantity, r.state, r.created_at,
       o.order_id, count(*) OVER ()::int AS total
  FROM sale_reservations r
  LEFT JOIN orders o ON o.reservation_id = r.reservation_id
 WHERE r.sale_id = @sale_id AND r.created_at >= @since
 ORDER BY r.created_at, r.reservation_id
 LIMIT @max_rows::int;

-- name: ServerConnections :one
-- The server's connection slots as a DBA reads them: max_connections, the
-- slots kept back for superusers (superuser_reserved_connections, and from
-- PostgreSQL 16 reserved_connections), the client sessions open now, and
-- the flashline instances connected (each holds exactly one LISTEN
-- connection, named flashline-listen) with the sessions flashline holds in
-- all (application_name flashline-*). pg_stat_activity shows every
-- session's application_name to every role.
SELECT current_setting('max_connections')::int AS max_connections,
       (current_setting('superuser_reserved_connections')::int
         + coalesce(nullif(current_setting('reserved_connections', true), ''), '0')::int)::int AS reserved,
       (SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend')::int AS in_use,
       (SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name = 'flashline-listen')::int AS instances,
       (SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name LIKE 'flashline-%')::int AS flashline;
