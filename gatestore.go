package flashline

import (
	"context"
	"time"
)

// GateStore is what the Redis gate of peak sales (package gate) needs of the
// database (*postgres.Store). The database stays the authority: it decides,
// under the customer's lock, whether a unit the gate handed out is held by a
// reservation or given back, and it keeps what is owed back to the gate
// until the relay applies it.
type GateStore interface {
	Store
	// ReturnUnit gives unit seq of the sale back to the gate (an outbox row
	// for the relay), unless a reservation holds it, it was returned
	// already, or it was handed out before the counter's last rebuild.
	ReturnUnit(ctx context.Context, u GateUnit) (returned bool, err error)
	// Settlements says, for units handed out, which a reservation holds and
	// which were returned.
	Settlements(ctx context.Context, saleID string, seqs []int64) (map[int64]GateSettlement, error)
	// RelayOwed takes up to n movements owed to gates, oldest first, but for
	// the sales in skip and the movements in setAside, and marks applied, in
	// the same transaction, those apply says it applied. It reports how many
	// it took.
	RelayOwed(ctx context.Context, n int, skip, setAside []string, apply func(context.Context, []GateMovement) (applied []string, err error)) (int, error)
	// GateLedger is what the database says a gated sale's counter should
	// account for.
	GateLedger(ctx context.Context, saleID string) (GateLedger, error)
	// StoredAnswer is the stored answer to the request's idempotency key, to
	// replay (stored false: none), without reserving anything.
	StoredAnswer(ctx context.Context, req ReserveRequest) (res ReserveResult, stored bool, err error)
	// OwedToCustomer is how many units of the customer are owed back to the
	// sale's gate and not applied yet (the gate's count of their units is
	// above the database's by as many until the relay applies them), and
	// whether the customer holds an active reservation of the sale (what
	// the database refuses limit_reached for), in one read.
	OwedToCustomer(ctx context.Context, saleID, customerID string) (owed int64, holds bool, err error)
	// GatedSales lists the gated sales to look after.
	GatedSales(ctx context.Context) ([]GatedSale, error)
	// Incident records an incident of the sale's gate and, with pause,
	// pauses the sale (reporting whether this call paused it).
	Incident(ctx context.Context, saleID, kind, detail string, pause bool) (paused bool, err error)
	// BeginRebuild starts a rebuild of a paused gated sale's counter: a new
	// epoch, the units owed to the old counter settled, and what the new
	// counter holds (ErrInvalidTransition: not paused; ErrNotFound: no such
	// gated sale).
	BeginRebuild(ctx context.Context, saleID string) (GateRebuild, error)
	// LockRebuild makes a rebuild of the sale's counter the only one
	// running, across instances, until unlock (ErrRebuildRunning: another
	// runs). A process that dies holding it lets go of it.
	LockRebuild(ctx context.Context, saleID string) (unlock func(), err error)
}

// GateUnit is one unit handed out by a sale's gate.
type GateUnit struct {
	SaleID, CustomerID string
	Seq                int64
	Quantity           int
	// Variant is the SKU of the variant whose counter it came from, in a
	// sale with variants ("": the sale's one counter).
	Variant string
}

// GateSettlement is where a unit the gate handed out ended.
type GateSettlement struct{ Reserved, Returned bool }

// GateMovement is units owed back to a sale's gate.
type GateMovement struct {
	ID, SaleID, CustomerID string
	Quantity               int
	// Seq is the unit a return gives back (0 for a restock).
	Seq int64
	// Variant is the SKU of the variant whose counter it goes back to, in
	// a sale with variants ("": the sale's one counter).
	Variant string
	// HasVariants says the movement's sale has variants: one of them that
	// names no variant (written by an instance of the version before
	// migration 000028, its variant not resolved) has no counter to go to.
	HasVariants bool
}

// GateLedger is what the database says a gated sale's counter should account
// for.
type GateLedger struct {
	Available int64 // units in the stock rows
	Owed      int64 // units owed back to the gate, not applied yet
	// OwedMovements are those units, one movement each (ID and Quantity).
	OwedMovements []GateMovement
	// OwedAge is how long ago the oldest of them was written: the relay's
	// lag (0: none owed).
	OwedAge time.Duration
	// Epoch is the rebuilds of the counter so far: a counter in Redis
	// written for another epoch hands out units the database refuses.
	Epoch int64
	// Version changes whenever a reservation, a restock, a return, a
	// relay's marking or a rebuild commits: two reads of the ledger with
	// the same Version saw the same sale.
	Version string
	// Variants are, in a sale with variants, each variant's units in its
	// stock rows, in order (none: a sale without variants, one counter).
	// Its gate has a counter per variant, each accounted for on its own.
	Variants []GateVariantUnits
}

// VariantSKUs are the SKUs of the ledger's variants, in order (none: a sale
// without variants).
func (l GateLedger) VariantSKUs() []string {
	var out []string
	for _, v := range l.Variants {
		out = append(out, v.SKU)
	}
	return out
}

// GateVariantUnits is a count of units of one variant of a gated sale.
type GateVariantUnits struct {
	SKU   string
	Units int64
}

// GatedSale is one gated sale the gate job looks after.
type GatedSale struct {
	ID        string
	State     SaleState
	CreatedAt time.Time
}

// GateRebuild is a gated sale's counter rebuilt from the database.
type GateRebuild struct {
	Epoch   int64
	Counter int64 // initial − pending − confirmed
	Holds   []GateHold
	// Settled is how many movements owed to the old counter the rebuild
	// marked applied (the new counter counts them).
	Settled int
	// Variants are, in a sale with variants, each variant's counter (its
	// initial − pending − confirmed), in order; Counter is then their sum.
	Variants []GateVariantUnits
}

// GateHold is an active reservation that came through the gate.
type GateHold struct {
	CustomerID, IdempotencyKey string
	Quantity                   int
	Seq                        int64
}
