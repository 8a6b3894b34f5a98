package flashline

import (
	"context"
	"time"
)

// What the store's console (the admin's pages, handlers/console.go) reads of
// one sale: the live page's snapshot and the report after the sale.

// SaleWatch is one snapshot of a sale for its live page: the sale with its
// counts, its waiting room's crowd, its incidents and what operators did,
// all as of one read (At, the database's clock).
type SaleWatch struct {
	Sale Sale
	// Room is the waiting room's crowd; nil for a sale without one.
	Room      *RoomCrowd
	Incidents []IncidentNote
	Actions   []OperatorAction
	At        time.Time
	// Fleet is what the serving instances reported of their reservation
	// answers in the last FleetFresh (InstanceReport), the freshest first.
	Fleet []InstanceReport
	// Queue is every instance's counts of the sale's line (queue.go), the
	// freshest first; none for a sale without a waiting room.
	Queue []QueueReport
}

// FleetFresh is how recent an instance's report must be to count in the
// fleet's rates: an instance reports at most once a second, and only while
// its answers change, so one silent longer answers nothing.
const FleetFresh = 3 * time.Second

// InstanceReport is one instance's reservation answers of its last
// Seconds, as it wrote them (handlers/fleet.go encodes and reads Counts),
// and how long ago by the database's clock.
type InstanceReport struct {
	Instance string
	Seconds  float64
	Counts   []byte
	Age      time.Duration
}

// RoomCrowd is a waiting room's crowd as the database holds it: positions
// handed out, the pre-open crowd, the watermark and the pace.
type RoomCrowd struct {
	// Positions is how many positions were handed out (arrivals placed).
	Positions int64
	// PreopenCount is the pre-open crowd as frozen at the open; nil before.
	PreopenCount *int64
	// PreopenTickets is the pre-open tickets counted so far (the edges'
	// included): the crowd before the open.
	PreopenTickets int64
	// AdmittedThrough is the watermark: every rank up to it may be admitted.
	AdmittedThrough int64
	// PacePerSecond is the ranks the pacer admits per second lately.
	PacePerSecond float64
	Held          bool
	Message       string
}

// Waiting is the crowd still in line: ranks handed out past the watermark
// (an estimate: a rank admitted may not have come back yet).
func (c RoomCrowd) Waiting() int64 {
	ranks := c.Positions
	if c.PreopenCount != nil && *c.PreopenCount > ranks {
		ranks = *c.PreopenCount
	}
	if w := ranks - c.AdmittedThrough; w > 0 {
		return w
	}
	return 0
}

// IncidentNote is one incident the invariant job recorded.
type IncidentNote struct {
	ID           int64
	Kind, Detail string
	At           time.Time
}

// OperatorAction is one row of the operators' audit (operator_actions).
type OperatorAction struct {
	ID                                      int64
	Action, ReservationID, Operator, Detail string
	Affected                                int
	At                                      time.Time
}

// SaleReport is the report after a sale: the snapshot (with the whole
// audit), when it sold out, and its reservations, late payments and voids.
type SaleReport struct {
	SaleWatch
	// SoldOut lists each moment the available units reached 0 after a
	// reservation, in order (a sale may sell out again after units came back).
	SoldOut              []time.Time
	Reservations         int64
	Customers            int64
	FirstAt, LastAt      *time.Time
	VoidedOrders         int64
	LatePayments         int64
	LatePaymentsRefunded int64
}

// operatorKey carries the operator of a state change (SetSaleState) through
// its context: the Store's method predates the audit of state changes and is
// wrapped by the sale cache and the gate, which pass the context on as it is.
type operatorKey struct{}

// WithOperator names the operator of the admin actions made with ctx
// (SetSaleState records it with the change).
func WithOperator(ctx context.Context, operator string) context.Context {
	return context.WithValue(ctx, operatorKey{}, operator)
}

// OperatorOf is the operator WithOperator named, else DefaultOperator.
func OperatorOf(ctx context.Context) string {
	if op, ok := ctx.Value(operatorKey{}).(string); ok && op != "" {
		return op
	}
	return DefaultOperator
}
