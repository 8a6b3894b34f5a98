-- The waiting room (waitroom/). No row per waiter: a waiter's place is a
-- signed ticket. Per sale, waiting_rooms holds where the next position starts,
-- how many positions were handed out before the open, and the watermark.

-- name: WaitroomCreate :exec
-- The waiting room of a new waiting_room sale, in CreateSale's transaction,
-- with the beacon its pre-open crowd waits for (randomized_at_open with a
-- beacon configured: the chain, and the round when the opening time is
-- known; NULL otherwise, see the 000027 migration).
INSERT INTO waiting_rooms (sale_id, beacon_public_key, beacon_genesis, beacon_period_seconds, beacon_round)
VALUES (@sale_id, sqlc.narg(beacon_public_key), sqlc.narg(beacon_genesis), sqlc.narg(beacon_period_seconds), sqlc.narg(beacon_round));

-- name: WaitroomLease :one
-- Leases the next @block positions to one instance, for exactly the @block
-- tickets (its own, and its edges') that arrived in its gather window
-- (waitroom/positions.go): one UPDATE per instance and window, not per
-- ticket. The row lock serialises leases, so no two leases overlap. It also adds the @preopen_tickets pre-open tickets the instance
-- gave out since it last said (while the room is pre-open). The first lease
-- taken a quarter second after the open (by the database's clock: opens_at
-- set and passed by 250 ms, time for every instance to count the tickets it
-- gave out just before) freezes the pre-open crowd (see WaitroomAdvance), so
-- every later lease starts after it; preopen_count IS NULL in the answer
-- means this lease is pre-open: its tickets are placed by the draw. (A
-- randomized_at_open room's count is then replaced, in the same
-- transaction, by the holders the freeze commits: WaitroomCommitCrowd.)
UPDATE waiting_rooms w
   SET next_position = w.next_position + @block::bigint,
       preopen_tickets = w.preopen_tickets + CASE WHEN w.preopen_count IS NULL THEN @preopen_tickets::bigint ELSE 0 END,
       preopen_count = CASE WHEN w.preopen_count IS NULL AND s.opens_at <= now() - interval '250 milliseconds'
                            THEN CASE WHEN s.fairness = 'randomized_at_open'
                                      THEN w.preopen_tickets + (@preopen_tickets::bigint)
                                           + coalesce((SELECT sum(e.tickets) FROM waitroom_edge_tickets e WHERE e.sale_id = w.sale_id), 0)
                                      ELSE w.next_position - 1 END
                            ELSE w.preopen_count END,
       preopen_positions = CASE WHEN w.preopen_count IS NULL AND s.opens_at <= now() - interval '250 milliseconds'
                                THEN w.next_position - 1 ELSE w.preopen_positions END,
       updated_at = now()
  FROM sales s,
       -- The row as it was (locked by WaitroomLockRoom, so it cannot have
       -- changed): froze says this lease froze the crowd, and must commit it
       -- (WaitroomCommitCrowd) in its transaction.
       (SELECT o.preopen_count IS NULL AS unfrozen FROM waiting_rooms o WHERE o.sale_id = @sale_id::text) before
 WHERE w.sale_id = @sale_id::text AND s.sale_id = w.sale_id
RETURNING (w.next_position - @block::bigint)::bigint AS first_position, w.preopen_count,
          (before.unfrozen AND w.preopen_count IS NOT NULL AND s.fairness = 'randomized_at_open')::boolean AS froze,
          s.draw_seed;

-- name: WaitroomCountTickets :exec
-- Adds the @n pre-open tickets one instance gave out since it last said, while
-- the room has not frozen its pre-open crowd (later ones are not counted:
-- they share the ranks of the crowd as frozen).
UPDATE waiting_rooms
   SET preopen_tickets = preopen_tickets + @n::bigint
 WHERE sale_id = @sale_id::text AND preopen_count IS NULL;

-- name: WaitroomEdgeTickets :exec
-- Records the edges' pre-open tickets as one origin last heard them (@edges
-- and @tickets, in step), while the room's crowd is not frozen: the larger
-- total wins per edge, so origins that each heard some of the reports (a
-- load balancer in front of them) agree on the freshest. Origins write it at
-- the open, not per report (waitroom/origin.go).
--
-- It takes the room's row FOR SHARE first, until it commits: the freeze
-- (WaitroomLockRoom, then WaitroomLease or WaitroomAdvance) locks the row
-- FOR UPDATE before it sums these rows, so it waits for a write under way
-- and, in its next statement's snapshot, counts it; a write that comes after
-- the freeze finds preopen_count set on the row it waited for (READ
-- COMMITTED re-checks a locked row's WHERE) and writes nothing. Without the
-- lock, a write under way when the freeze read the table was neither
-- counted nor refused (found by the rehearsal: a crowd frozen at 0 while
-- 2,379 edge tickets were recorded).
WITH room AS MATERIALIZED (
    SELECT w.sale_id FROM waiting_rooms w
     WHERE w.sale_id = @sale_id::text AND w.preopen_count IS NULL
       FOR SHARE
)
INSERT INTO waitroom_edge_tickets (sale_id, edge, tickets)
SELECT room.sale_id, u.edge, (@tickets::bigint[])[u.i]
  FROM room, unnest(@edges::text[]) WITH ORDINALITY AS u(edge, i)
 WHERE (@tickets::bigint[])[u.i] > 0
ON CONFLICT (sale_id, edge) DO UPDATE SET tickets = greatest(waitroom_edge_tickets.tickets, excluded.tickets);

-- name: WaitroomAddHolders :one
-- Adds the customers one instance gave a pre-open ticket since it last said
-- (@customers, one INSERT per instance, sale and flush), while the room has
-- not frozen its crowd; open is false when it has (nothing is written: the
-- crowd is committed) and there is no row without a room. It takes the
-- room's row FOR SHARE first, until it commits, as WaitroomEdgeTickets does
-- and for the same reason: the freeze locks the row FOR UPDATE before it
-- reads the holders, so a write under way is committed and read, and one
-- after it finds the crowd frozen.
WITH room AS MATERIALIZED (
    SELECT w.sale_id, w.preopen_count IS NULL AS open FROM waiting_rooms w
     WHERE w.sale_id = @sale_id::text
       FOR SHARE
), added AS (
    INSERT INTO waitroom_holders (sale_id, customer_id)
    SELECT room.sale_id, c FROM room, unnest(@customers::text[]) AS c
     WHERE room.open
    ON CONFLICT (sale_id, customer_id) DO NOTHING
)
SELECT room.open::boolean AS open FROM room;

-- name: WaitroomHolders :many
-- The pre-open holders of a room, read by the freeze that commits them (the
-- row locked) and by the crowd's transcript, in no order: both sort the
-- holders' hashes themselves (the root, the ranks), and an ORDER BY sorted a
-- million ids on disk, 2.3 of the freeze's 3 seconds in the database while
-- the room's row was locked (issue 48, docs/measured.md).
SELECT customer_id FROM waitroom_holders WHERE sale_id = @sale_id::text;

-- name: WaitroomCommitCrowd :exec
-- Commits the crowd the freeze fixed, in the freeze's transaction: the
-- holders' Merkle root and count, and the final seed their ranks are drawn
-- by (NULL while the crowd waits for its beacon round: WaitroomDrawCrowd
-- sets it), and the round it waits for (postgres.crowdRound; NULL without
-- a beacon). Once only.
--
-- The crowd's N (preopen_count, the ranks' scale) is the holders it
-- commits, not the tickets counted (which the freeze's statement set a
-- moment before, in the same transaction): the counts and the holders
-- reach the room by separate paths (an edge's report carries its whole
-- count but a batch of its holders; a lease carries its instance's count,
-- its holders follow at the next flush), so a holder could be counted in N
-- and miss the list. N is then the list's length, which anyone can count
-- in the transcript (docs/waiting-room.md, issue 48).
UPDATE waiting_rooms
   SET holders_root = @root::bytea, holders_count = @holders_count::bigint,
       preopen_count = @holders_count::bigint,
       holders_committed_at = now(), final_seed = sqlc.narg(final_seed),
       beacon_round = sqlc.narg(round)
 WHERE sale_id = @sale_id::text AND holders_root IS NULL;

-- name: WaitroomCrowdBeacon :one
-- The beacon a room's crowd waits for (NULLs: none), read by the freeze in
-- its transaction, with the database's clock.
SELECT beacon_public_key, beacon_genesis, beacon_period_seconds, beacon_round, now()::timestamptz AS now
  FROM waiting_rooms WHERE sale_id = @sale_id::text;

-- name: WaitroomDueCrowds :many
-- The committed crowds that wait for their beacon round (final_seed NULL),
-- but those whose sale is paused or closed.
SELECT w.sale_id, w.holders_committed_at, w.beacon_public_key, w.beacon_genesis, w.beacon_period_seconds,
       w.beacon_round, now()::timestamptz AS now
  FROM waiting_rooms w
  JOIN sales s ON s.sale_id = w.sale_id
 WHERE w.holders_root IS NOT NULL AND w.final_seed IS NULL AND w.beacon_round IS NOT NULL
   AND s.state NOT IN ('paused', 'closed')
 ORDER BY w.sale_id;

-- name: WaitroomDrawCrowd :execrows
-- Ranks a committed crowd: the beacon round's value and signature, and the
-- final seed computed with it. Once only (the same inputs give the same
-- seed, so a concurrent caller would write the same).
UPDATE waiting_rooms
   SET final_seed = @final_seed::bytea, beacon_randomness = @randomness::bytea, beacon_signature = @signature::bytea
 WHERE sale_id = @sale_id::text AND holders_root IS NOT NULL AND final_seed IS NULL AND beacon_round = @round::bigint;

-- name: WaitroomCrowd :one
-- A room's committed crowd, for its transcript (GET /sales/{id}/draw).
SELECT s.fairness, s.draw_seed, s.opens_at, w.preopen_count, w.holders_root, w.holders_count,
       w.holders_committed_at, w.final_seed, w.beacon_public_key, w.beacon_genesis, w.beacon_period_seconds,
       w.beacon_round, w.beacon_randomness, w.beacon_signature
  FROM sales s
  JOIN waiting_rooms w ON w.sale_id = s.sale_id
 WHERE s.sale_id = @sale_id::text;

-- name: WaitroomLockRoom :exec
-- Locks a room's row until the transaction ends, before a statement that
-- may freeze its pre-open crowd (WaitroomLease, WaitroomAdvance): that
-- statement then starts after every edge-ticket write under way has
-- committed (they hold the row FOR SHARE), and its snapshot counts them. In
-- one statement it could not: READ COMMITTED re-reads the row an UPDATE
-- waited for, but not the other tables it reads.
SELECT 1 FROM waiting_rooms WHERE sale_id = @sale_id::text FOR UPDATE;

-- name: WaitroomLeaderTryLock :one
-- The pacer's leadership: a session-level advisory lock held on one
-- connection for as long as the instance leads. It never waits; it goes with
-- the session if the connection or the process dies.
SELECT pg_try_advisory_lock(x'666c77616974726d'::bigint) AS locked;

-- name: WaitroomLeaderUnlock :exec
SELECT pg_advisory_unlock(x'666c77616974726d'::bigint);

-- name: WaitroomPaceInputs :many
-- What the pacer needs each tick, for every waiting-room sale that has opened
-- (opens_at passed by the quarter second the pre-open count is given, by the
-- database's clock; see WaitroomLease) and is not closed: its state,
-- units left, the room's counters, and how many reservations were made with
-- an admission token (reservations_admitted makes that count an index scan);
-- variant_count: a sale with variants gives its admissions longer to be used
-- (the shopper chooses first: waitroom's Options.VariantUseWindow).
SELECT s.sale_id, s.state, s.variant_count,
       coalesce((SELECT sum(st.quantity) FROM stock st WHERE st.sale_id = s.sale_id), 0)::bigint AS available,
       w.next_position, w.preopen_count, w.preopen_positions, w.admitted_through, w.pace_per_second, w.held,
       (SELECT count(*) FROM reservations r
         WHERE r.sale_id = s.sale_id AND r.admission_token_id IS NOT NULL)::bigint AS admitted_reserved
  FROM sales s
  JOIN waiting_rooms w ON w.sale_id = s.sale_id
 WHERE s.admission = 'waiting_room' AND s.state <> 'closed' AND s.opens_at <= now() - interval '250 milliseconds'
 ORDER BY s.sale_id;

-- name: WaitroomAdvance :one
-- Moves the watermark forward to @target (never back: greatest() and the
-- WHERE clause both say so, so even two pacers by accident cannot lower it),
-- freezes the pre-open crowd at the first tick after the open if no lease
-- did, and records the pace. Returns no row when there was nothing to change.
-- The freeze: preopen_positions is the positions handed out so far;
-- preopen_count the pre-open tickets counted under randomized_at_open (the
-- instances' own and the edges', as the origins wrote them at the open: see
-- WaitroomEdgeTickets; the commit, in the same transaction, replaces it with
-- the holders it commits: WaitroomCommitCrowd), the positions under
-- arrival_order (whose ranks are positions). The watermark stays at 0 while a randomized_at_open crowd
-- waits for its beacon round (a beacon configured, final_seed not yet): no
-- rank is admitted before the crowd's ranks are known.
UPDATE waiting_rooms w
   SET admitted_through = CASE WHEN s.fairness = 'randomized_at_open' AND w.beacon_public_key IS NOT NULL AND w.final_seed IS NULL
                               THEN w.admitted_through
                               ELSE greatest(w.admitted_through, @target::bigint) END,
       preopen_count = coalesce(w.preopen_count,
                                CASE WHEN s.fairness = 'randomized_at_open'
                                     THEN w.preopen_tickets
                                          + coalesce((SELECT sum(e.tickets) FROM waitroom_edge_tickets e WHERE e.sale_id = w.sale_id), 0)
                                     ELSE w.next_position - 1 END),
       preopen_positions = coalesce(w.preopen_positions, w.next_position - 1),
       pace_per_second = CASE WHEN w.admitted_through < @target::bigint
                              THEN @pace_per_second::float8 ELSE w.pace_per_second END,
       updated_at = now()
  FROM sales s,
       (SELECT o.preopen_count IS NULL AS unfrozen FROM waiting_rooms o WHERE o.sale_id = @sale_id::text) before
 WHERE w.sale_id = @sale_id::text AND s.sale_id = w.sale_id
   AND (w.admitted_through < @target::bigint OR w.preopen_count IS NULL)
RETURNING w.admitted_through,
          (before.unfrozen AND s.fairness = 'randomized_at_open')::boolean AS froze,
          s.draw_seed;

-- name: WaitroomDrawRecord :one
-- What an audit of the draw reads of a waiting-room sale: its order and the
-- room's counters (flashline sale verify-draw).
SELECT s.fairness, w.preopen_count, w.admitted_through, w.final_seed
  FROM sales s
  JOIN waiting_rooms w ON w.sale_id = s.sale_id
 WHERE s.sale_id = @sale_id::text;

-- name: WaitroomAdmissions :many
-- Every reservation made with an admission token in a sale, in the order
-- they were made (reservations_admitted makes it an index scan).
SELECT customer_id, admission_token_id::text AS admission_id, created_at
  FROM reservations
 WHERE sale_id = @sale_id::text AND admission_token_id IS NOT NULL
 ORDER BY created_at, reservation_id;

-- name: WaitroomSetHeld :one
-- Holds (@held) or releases a room's queue and writes the audit row, in one
-- statement. found is 0 when the sale has no waiting room.
WITH changed AS (
    UPDATE waiting_rooms SET held = @held::boolean, updated_at = now()
     WHERE sale_id = @sale_id::text
    RETURNING sale_id
), audit AS (
    INSERT INTO operator_actions (action, sale_id, operator, detail)
    SELECT CASE WHEN @held::boolean THEN 'hold_queue' ELSE 'release_queue' END, sale_id, @operator::text, @detail::text
      FROM changed
)
SELECT count(*)::int AS found FROM changed;

-- name: WaitroomSetBroadcast :one
-- Sets the message shown to a room's waiters ('' clears it) and writes the
-- audit row, in one statement. found is 0 when the sale has no waiting room.
WITH changed AS (
    UPDATE waiting_rooms SET broadcast = @message::text, updated_at = now()
     WHERE sale_id = @sale_id::text
    RETURNING sale_id
), audit AS (
    INSERT INTO operator_actions (action, sale_id, operator, detail)
    SELECT 'broadcast', sale_id, @operator::text, @message::text
      FROM changed
)
SELECT count(*)::int AS found FROM changed;
