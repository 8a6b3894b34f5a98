package flashline

import "context"

// RoomStore is what the waiting room (package waitroom) needs of the
// database (*postgres.Store), or of an edge's origins (package edge). What
// it reads to answer tickets and polls comes from the sale cache
// (SaleFacts), not from here.
type RoomStore interface {
	// LeasePositions leases the next n positions of saleID's room to this
	// instance: the first of them, and whether they are pre-open (handed
	// out before the sale opened, by the database's clock). It also adds
	// preopenTickets to the room's count of pre-open tickets (as
	// CountTickets). No room: ErrNoWaitingRoom.
	LeasePositions(ctx context.Context, saleID string, n, preopenTickets int64) (first int64, preOpen bool, err error)
	// CountTickets adds n pre-open tickets this instance gave out to
	// saleID's count, unless the room has frozen its pre-open crowd.
	CountTickets(ctx context.Context, saleID string, n int64) error
	// AddHolders records customers as holders of pre-open tickets in
	// saleID's room (written with CountTickets' flush, one statement per
	// batch), the crowd the freeze commits (crowddraw.go), whose number is
	// the crowd's N. After the freeze: ErrCrowdCommitted, nothing written.
	AddHolders(ctx context.Context, saleID string, customers []string) error
	// RecordEdgeTickets records the edges' pre-open tickets in saleID as
	// this instance last heard them (totals by edge id), unless the room
	// has frozen its pre-open crowd; the larger total wins per edge. The
	// freeze counts them with the instances' own (the room's count of
	// tickets; a randomized_at_open crowd's N is its holders).
	RecordEdgeTickets(ctx context.Context, saleID string, totals map[string]int64) error
	// SetQueueHeld holds or releases saleID's queue, and SetBroadcast sets
	// the message its waiters see; both audited under operator. No room:
	// ErrNoWaitingRoom.
	SetQueueHeld(ctx context.Context, saleID string, held bool, operator, detail string) error
	SetBroadcast(ctx context.Context, saleID, message, operator string) error
	// LeadPacer makes this instance the pacer's leader if no instance is,
	// and runs lead while it is; led is false, at once, when another
	// instance leads. The leadership lasts as long as a session of the
	// database (lost with it, and then taken over by another instance).
	LeadPacer(ctx context.Context, lead func(ctx context.Context, db PacerStore) error) (led bool, err error)
}

// PacerStore is the database as the pacer's leader sees it, on the session
// that holds the leadership.
type PacerStore interface {
	// PaceInputs reads every waiting room that has opened and is not closed.
	PaceInputs(ctx context.Context) ([]PacerRoom, error)
	// Advance moves saleID's watermark forward to target (never back) and
	// records the pace; moved is false when it was there already (someone
	// else moved it further meanwhile). It also freezes the room's pre-open
	// count at its first advance after the open.
	Advance(ctx context.Context, saleID string, target int64, pace float64) (watermark int64, moved bool, err error)
	// Ping checks that the leader's session is alive.
	Ping(ctx context.Context) error
}

// PacerRoom is what the pacer knows of one room at one tick.
type PacerRoom struct {
	SaleID           string
	State            SaleState
	Available        int64 // units left
	NextPosition     int64
	PreopenFrozen    bool
	PreopenCount     int64 // the pre-open crowd in ranks, once frozen
	PreopenPositions int64 // and in positions
	Held             bool  // an operator holds the queue
	AdmittedThrough  int64
	Pace             float64
	AdmittedReserved int64 // reservations made with an admission token
	// Variants: the sale has variants (its shoppers choose one once
	// admitted).
	Variants bool
}
