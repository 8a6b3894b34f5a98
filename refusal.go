package flashline

import (
	"context"
	"time"
)

// Refusals decides, from what this instance knows without the database,
// which reservations are refused before the purchase path runs: the one
// place the rules of a cheap refusal are written. The HTTP layer's front
// door and its reservation route ask it, and write its answer the same
// way; the sale cache's wrapper of the Store asks it again before a
// reservation reaches the database (a request may have waited for the
// admission limiter since). What it reads are facts: the purchase queues of
// the database adapter (Queues) and the sale cache's memory (Memory).
//
// A nil *Refusals refuses nothing.
type Refusals struct {
	queues Queues
	memory Memory
}

// Queues is what the refusals read of the database adapter's purchase
// queues on this instance (package postgres's coalescer).
type Queues interface {
	// QueueFull reports whether saleID's purchase queue is full: a
	// reservation would be refused at once (ErrOverloaded). A peek, without
	// queueing.
	QueueFull(saleID string) bool
}

// Memory is what the refusals read of the sale cache (package salecache):
// facts, never decisions.
type Memory interface {
	// Recall is what memory knows of saleID now, for customerID; ok false
	// when memory has no fresh entry of the sale.
	Recall(saleID, customerID string) (r Recollection, ok bool)
	// Now is the database's clock as this instance estimates it.
	Now() time.Time
	// Unchanged reports whether the database, read after this call (a read
	// shared by every refusal waiting), has saleID's stock at version: memory
	// is not behind. ctx bounds the wait.
	Unchanged(ctx context.Context, saleID, version string) bool
	// Refused counts a refusal given from memory (ErrSoldOut,
	// ErrSaleNotOpen).
	Refused(err error)
}

// Recollection is what memory knows of a sale for one customer's
// reservation.
type Recollection struct {
	State   SaleState
	OpensAt *time.Time
	SoldOut bool
	// HoldersKnown: memory has the list of the customers who ever held a
	// reservation in the sale (kept while the sale refuses), read at the
	// stock's Version; Held: the customer is one of them.
	HoldersKnown, Held bool
	Version            string
	// Variants are the sale's variants with their units left as memory
	// read them (none: a sale without variants). Shared: read, never
	// changed.
	Variants []VariantFacts
}

// NewRefusals decides from queues and memory (either may be nil: nothing
// refused by it).
func NewRefusals(queues Queues, memory Memory) *Refusals {
	return &Refusals{queues: queues, memory: memory}
}

// Overloaded reports whether a reservation of saleID is refused at once
// (ErrOverloaded) because the sale's purchase queue is full: the cheapest
// "no", asked before the caller's token is verified or its body read. The
// refusal holds nothing and is the answer it would have had later.
func (r *Refusals) Overloaded(saleID string) bool {
	return r != nil && r.queues != nil && r.queues.QueueFull(saleID)
}

// FromMemory answers a reservation of saleID by customerID from memory:
// ErrSoldOut or ErrSaleNotOpen, or nil when the purchase path must decide.
// A sale that refuses still lets through the customers who ever held a
// reservation in it (their retry must replay the stored answer, which only
// the database knows), and a refusal stands only once the database, read
// after it arrived, confirms that memory is not behind (Memory.Unchanged);
// a request whose ctx is done meanwhile is refused (nobody hears the
// answer, and the purchase path would only drop it). customerID may be a
// view of a buffer the caller reuses: it is compared, never kept.
func (r *Refusals) FromMemory(ctx context.Context, saleID, customerID string) error {
	return r.FromMemoryOf(ctx, saleID, "", customerID)
}

// FromMemoryOf is FromMemory for a reservation of one variant of a sale
// with variants ("": the sale as a whole, what the doors that have not read
// the body ask): a variant memory saw with nothing left is refused
// ErrVariantSoldOut by the same rules as a sold-out sale (the holders let
// through, the refusal confirmed by the stock's version, which covers every
// variant's rows).
func (r *Refusals) FromMemoryOf(ctx context.Context, saleID, variant, customerID string) error {
	if r == nil || r.memory == nil {
		return nil
	}
	m := r.memory
	e, ok := m.Recall(saleID, customerID)
	if !ok {
		return nil
	}
	var refusal error
	switch {
	case e.State == StatePaused || e.State == StateClosed:
		refusal = ErrSaleNotOpen
	case e.State == StateScheduled:
		// The database's clock decides the opening; only refuse when even a
		// generous skew between the two clocks could not make it open.
		if e.OpensAt == nil || e.OpensAt.After(m.Now().Add(time.Second)) {
			refusal = ErrSaleNotOpen
		}
	case e.SoldOut:
		refusal = ErrSoldOut
	case variant != "":
		for _, v := range e.Variants {
			if v.SKU == variant && v.Available <= 0 {
				refusal = ErrVariantSoldOut
			}
		}
	}
	if refusal == nil || !e.HoldersKnown || e.Held {
		// Nothing to refuse, or the customer's retry must replay the stored
		// answer.
		return nil
	}
	if m.Unchanged(ctx, saleID, e.Version) || ctx.Err() != nil {
		m.Refused(refusal)
		return refusal
	}
	return nil
}
