-- The console (handlers/console.go, postgres/console.go): what an operator's
-- page of one sale shows, read once a second per watched sale per instance
-- whatever the number of pages open (one read-only transaction: SaleGet and
-- these), and the report after the sale. All are reads of one sale's rows
-- through their sale_id indexes.

-- name: ConsoleRoom :one
-- A waiting-room sale's crowd: positions handed out (next_position - 1),
-- the pre-open crowd (frozen count, else the tickets counted so far, the
-- edges' included), the watermark and the pacer's pace, the queue's hold and
-- message. No row: the sale has no waiting room.
SELECT w.next_position, w.preopen_count, w.preopen_tickets,
       coalesce((SELECT sum(e.tickets) FROM waitroom_edge_tickets e WHERE e.sale_id = w.sale_id), 0)::bigint AS edge_tickets,
       w.admitted_through, w.pace_per_second, w.held, w.broadcast
  FROM waiting_rooms w
 WHERE w.sale_id = @sale_id;

-- name: ConsoleActions :many
-- The sale's operator actions, newest first (operator_actions_sale).
SELECT action_id, action, reservation_id, operator, detail, affected, created_at
  FROM operator_actions
 WHERE sale_id = @sale_id
 ORDER BY created_at DESC, action_id DESC
 LIMIT @max_rows::int;

-- name: ConsoleIncidents :many
-- The sale's incidents, newest first (incidents_sale).
SELECT incident_id, kind, detail, created_at
  FROM incidents
 WHERE sale_id = @sale_id
 ORDER BY created_at DESC, incident_id DESC
 LIMIT @max_rows::int;

-- name: ReportFacts :one
-- The report's figures of one sale: its reservations (how many, by how many
-- customers, the first and last, the voided orders), its late payments and
-- how many were refunded. One scan of the sale's reservations. first_at and
-- last_at are now() when there are none (reservations = 0 says so).
SELECT r.reservations, r.customers, r.first_at, r.last_at, r.voided_orders,
       (SELECT count(*) FROM late_payments lp WHERE lp.sale_id = @sale_id)::bigint AS late_payments,
       (SELECT count(*) FROM late_payments lp WHERE lp.sale_id = @sale_id AND lp.refunded_at IS NOT NULL)::bigint AS late_refunded
  FROM (SELECT count(*)::bigint AS reservations,
               count(DISTINCT customer_id)::bigint AS customers,
               coalesce(min(created_at), now())::timestamptz AS first_at,
               coalesce(max(created_at), now())::timestamptz AS last_at,
               count(*) FILTER (WHERE state = 'voided')::bigint AS voided_orders
          FROM sale_reservations WHERE sale_id = @sale_id) r;

-- name: ReportSoldOuts :many
-- Every moment the sale's available units reached 0 after a reservation
-- (a sale that sold out, got units back from expiries or cancels and sold
-- out again has several), in order, at most @max_rows.
SELECT l.created_at
  FROM (SELECT created_at, entry_id, reason, sum(delta) OVER (ORDER BY entry_id) AS left_after
          FROM stock_ledger WHERE sale_id = @sale_id) l
 WHERE l.left_after = 0 AND l.reason = 'reserve'
 ORDER BY l.entry_id
 LIMIT @max_rows::int;

-- name: ConsoleInstancePublish :exec
-- One instance's reservation answers of its last @seconds (the console's
-- fleet view), replacing its previous ones; instances silent for an hour go.
WITH gone AS (
    DELETE FROM console_instances WHERE updated_at < now() - interval '1 hour'
)
INSERT INTO console_instances (instance, seconds, counts, updated_at)
VALUES (@instance, @seconds, @counts, now())
ON CONFLICT (instance) DO UPDATE
   SET seconds = excluded.seconds, counts = excluded.counts, updated_at = excluded.updated_at;

-- name: ConsoleInstances :many
-- The instances that reported in the last @within_seconds, with how long ago
-- (by the database's clock), at most 64 (the freshest).
SELECT instance, seconds, counts,
       extract(epoch FROM now() - updated_at)::double precision AS age_seconds
  FROM console_instances
 WHERE updated_at > now() - make_interval(secs => @within_seconds::double precision)
 ORDER BY updated_at DESC
 LIMIT 64;

-- name: ConsoleQueuePublish :exec
-- One instance's counts of the lines of several sales (the waiting room's
-- analytics), replacing its previous ones: one statement a second at most
-- per instance. A sale no longer there is skipped.
INSERT INTO console_queues (sale_id, instance, counts, updated_at)
SELECT q.sale_id, @instance, q.counts, now()
  FROM (SELECT unnest(@sale_ids::text[]) AS sale_id, unnest(@counts::bytea[]) AS counts) q
  JOIN sales s ON s.sale_id = q.sale_id
ON CONFLICT (sale_id, instance) DO UPDATE
   SET counts = excluded.counts, updated_at = excluded.updated_at;

-- name: ConsoleQueuePublishEdges :exec
-- The edges' counts of the lines an origin heard in their reports, each
-- row (an edge's run, edge/id/run) as of the report it came in: every
-- origin hears every report and writes it, the first one's write stands,
-- and an older report's never replaces a newer one's. One statement a
-- second at most per origin. A sale no longer there is skipped.
INSERT INTO console_queues (sale_id, instance, counts, updated_at)
SELECT q.sale_id, q.instance, q.counts, q.at
  FROM (SELECT unnest(@sale_ids::text[]) AS sale_id, unnest(@instances::text[]) AS instance,
               unnest(@counts::bytea[]) AS counts, unnest(@ats::timestamptz[]) AS at) q
  JOIN sales s ON s.sale_id = q.sale_id
ON CONFLICT (sale_id, instance) DO UPDATE
   SET counts = excluded.counts, updated_at = excluded.updated_at
 WHERE console_queues.updated_at < excluded.updated_at;

-- name: ConsoleQueues :many
-- Every instance's counts of a sale's line, with how long ago they were
-- written (by the database's clock), at most 256 (the freshest): an
-- instance writes one row per sale it served.
SELECT instance, counts,
       extract(epoch FROM now() - updated_at)::double precision AS age_seconds
  FROM console_queues
 WHERE sale_id = @sale_id
 ORDER BY updated_at DESC
 LIMIT 256;
