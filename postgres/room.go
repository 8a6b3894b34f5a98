package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// What the waiting room needs of the database (flashline.RoomStore), on its
// own pool: a crowd taking tickets never waits behind buyers, and never
// delays an admin or a confirm.

var _ flashline.RoomStore = (*Store)(nil)

// LeasePositions leases the next n positions of saleID's room (see
// WaitroomLease for why that keeps every instance's positions apart).
func (s *Store) LeasePositions(ctx context.Context, saleID string, n, preopenTickets int64) (first int64, preOpen bool, err error) {
	// The room's row is locked first (WaitroomLockRoom): this lease may be
	// the one that freezes the pre-open crowd, and must then count every
	// edge ticket written before it.
	var row dbsqlc.WaitroomLeaseRow
	err = withTx(ctx, s.room, func(q *dbsqlc.Queries) error {
		if err := q.WaitroomLockRoom(ctx, dbsqlc.WaitroomLockRoomParams{SaleID: saleID}); err != nil {
			return err
		}
		var err error
		row, err = q.WaitroomLease(ctx, dbsqlc.WaitroomLeaseParams{Block: n, PreopenTickets: preopenTickets, SaleID: saleID})
		if err != nil || !row.Froze {
			return err
		}
		return commitCrowd(ctx, q, saleID, row.DrawSeed)
	})
	if notFound(err) {
		return 0, false, fmt.Errorf("lease positions of sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	}
	if err != nil {
		return 0, false, fmt.Errorf("lease positions of sale %s: %w", saleID, translate(err))
	}
	return row.FirstPosition, row.PreopenCount == nil, nil
}

// CountTickets adds n pre-open tickets given out by this instance to
// saleID's count, while the room has not frozen its pre-open crowd.
func (s *Store) CountTickets(ctx context.Context, saleID string, n int64) error {
	if err := dbsqlc.New(s.room).WaitroomCountTickets(ctx, dbsqlc.WaitroomCountTicketsParams{N: n, SaleID: saleID}); err != nil {
		return fmt.Errorf("count tickets of sale %s: %w", saleID, translate(err))
	}
	return nil
}

// RecordEdgeTickets records the edges' pre-open tickets in saleID as this
// instance last heard them, the larger total winning per edge, unless the
// crowd is frozen.
func (s *Store) RecordEdgeTickets(ctx context.Context, saleID string, totals map[string]int64) error {
	p := dbsqlc.WaitroomEdgeTicketsParams{SaleID: saleID}
	for edge, n := range totals {
		p.Edges = append(p.Edges, edge)
		p.Tickets = append(p.Tickets, n)
	}
	if err := dbsqlc.New(s.room).WaitroomEdgeTickets(ctx, p); err != nil {
		return fmt.Errorf("record edge tickets of sale %s: %w", saleID, translate(err))
	}
	return nil
}

// SetQueueHeld holds (held) or releases saleID's queue, audited under
// operator with detail. No waiting room: flashline.ErrNoWaitingRoom.
func (s *Store) SetQueueHeld(ctx context.Context, saleID string, held bool, operator, detail string) error {
	found, err := dbsqlc.New(s.admin).WaitroomSetHeld(ctx, dbsqlc.WaitroomSetHeldParams{Held: held, SaleID: saleID, Operator: operator, Detail: detail})
	if err != nil {
		return fmt.Errorf("hold queue of sale %s: %w", saleID, translate(err))
	}
	if found == 0 {
		return fmt.Errorf("hold queue of sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	}
	return nil
}

// SetBroadcast sets the message shown to saleID's waiters ("" clears it),
// audited under operator. No waiting room: flashline.ErrNoWaitingRoom.
func (s *Store) SetBroadcast(ctx context.Context, saleID, message, operator string) error {
	found, err := dbsqlc.New(s.admin).WaitroomSetBroadcast(ctx, dbsqlc.WaitroomSetBroadcastParams{Message: message, SaleID: saleID, Operator: operator})
	if err != nil {
		return fmt.Errorf("broadcast to sale %s: %w", saleID, translate(err))
	}
	if found == 0 {
		return fmt.Errorf("broadcast to sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	}
	return nil
}

// LeadPacer leads the pacer on one connection of the session pool
// (Pools.Session: a session of its own, never through a transaction
// pooler) that it keeps for as long as it leads: the leadership is a session advisory lock
// (WaitroomLeaderTryLock), which goes with the session if the connection or
// the process dies, and another instance takes over.
func (s *Store) LeadPacer(ctx context.Context, lead func(ctx context.Context, db flashline.PacerStore) error) (bool, error) {
	conn, err := s.session.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("pacer: acquire: %w", translate(err))
	}
	lockCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	locked, err := dbsqlc.New(conn).WaitroomLeaderTryLock(lockCtx)
	cancel()
	switch {
	case err != nil:
		destroy(conn)
		return false, fmt.Errorf("pacer: leader lock: %w", translate(err))
	case !locked:
		conn.Release()
		return false, nil
	}
	err = lead(ctx, pacerDB{conn: conn})
	if err == nil {
		// Shutting down: hand the lock over now rather than when the
		// connection is closed.
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err = dbsqlc.New(conn).WaitroomLeaderUnlock(unlockCtx)
		cancel()
		if err == nil {
			conn.Release()
			return true, nil
		}
	}
	// The session may still hold the lock: end it.
	destroy(conn)
	return true, fmt.Errorf("pacer stopped leading: %w", translate(err))
}

// destroy closes a pooled connection instead of returning it, ending its
// session (and any advisory lock it holds).
func destroy(conn *pgxpool.Conn) {
	c := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// pacerDB is the leader's session.
type pacerDB struct{ conn *pgxpool.Conn }

func (p pacerDB) PaceInputs(ctx context.Context) ([]flashline.PacerRoom, error) {
	rows, err := dbsqlc.New(p.conn).WaitroomPaceInputs(ctx)
	if err != nil {
		return nil, fmt.Errorf("pace inputs: %w", translate(err))
	}
	out := make([]flashline.PacerRoom, len(rows))
	for i, r := range rows {
		out[i] = flashline.PacerRoom{
			SaleID:           r.SaleID,
			State:            flashline.SaleState(r.State),
			Available:        r.Available,
			NextPosition:     r.NextPosition,
			PreopenFrozen:    r.PreopenCount != nil,
			PreopenCount:     orZero(r.PreopenCount),
			PreopenPositions: orZero(r.PreopenPositions),
			Held:             r.Held,
			AdmittedThrough:  r.AdmittedThrough,
			Pace:             r.PacePerSecond,
			AdmittedReserved: r.AdmittedReserved,
			Variants:         r.VariantCount > 0,
		}
	}
	return out, nil
}

func (p pacerDB) Advance(ctx context.Context, saleID string, target int64, pace float64) (int64, bool, error) {
	// Locked first, as a lease is: the advance may freeze the crowd.
	var watermark int64
	err := withTx(ctx, p.conn, func(q *dbsqlc.Queries) error {
		if err := q.WaitroomLockRoom(ctx, dbsqlc.WaitroomLockRoomParams{SaleID: saleID}); err != nil {
			return err
		}
		row, err := q.WaitroomAdvance(ctx, dbsqlc.WaitroomAdvanceParams{Target: target, PacePerSecond: pace, SaleID: saleID})
		if err != nil {
			return err
		}
		watermark = row.AdmittedThrough
		if !row.Froze {
			return nil
		}
		return commitCrowd(ctx, q, saleID, row.DrawSeed)
	})
	switch {
	case notFound(err):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("advance sale %s: %w", saleID, translate(err))
	}
	return watermark, true, nil
}

func (p pacerDB) Ping(ctx context.Context) error { return translate(p.conn.Ping(ctx)) }

// DrawRecord reads what the database records of saleID's admissions, for an
// audit of its draw (flashline.AuditDraw): the room's counters and every
// reservation made with an admission token. A sale without a waiting room:
// flashline.ErrNoWaitingRoom.
func (s *Store) DrawRecord(ctx context.Context, saleID string) (flashline.DrawRecord, error) {
	q := dbsqlc.New(s.admin)
	row, err := q.WaitroomDrawRecord(ctx, dbsqlc.WaitroomDrawRecordParams{SaleID: saleID})
	if notFound(err) {
		if _, err := s.Sale(ctx, saleID); err != nil {
			return flashline.DrawRecord{}, fmt.Errorf("draw record of sale %s: %w", saleID, err)
		}
		return flashline.DrawRecord{}, fmt.Errorf("draw record of sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	}
	if err != nil {
		return flashline.DrawRecord{}, fmt.Errorf("draw record of sale %s: %w", saleID, translate(err))
	}
	rec := flashline.DrawRecord{SaleID: saleID, Fairness: flashline.Fairness(row.Fairness), PreopenCount: -1, AdmittedThrough: row.AdmittedThrough}
	if row.PreopenCount != nil {
		rec.PreopenCount = *row.PreopenCount
	}
	rec.FinalSeed = row.FinalSeed
	rows, err := q.WaitroomAdmissions(ctx, dbsqlc.WaitroomAdmissionsParams{SaleID: saleID})
	if err != nil {
		return flashline.DrawRecord{}, fmt.Errorf("admissions of sale %s: %w", saleID, translate(err))
	}
	for _, r := range rows {
		rec.Admitted = append(rec.Admitted, flashline.AdmittedCustomer{CustomerID: r.CustomerID, AdmissionID: r.AdmissionID, ReservedAt: r.CreatedAt})
	}
	return rec, nil
}

// orZero is *p, or 0 when p is nil.
func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
