package flashline

import (
	"context"
	"time"
)

// SaleFacts is what an instance knows of one sale without asking the
// database: kept in memory by the sale cache (package salecache), read from
// a FactSource. The purchase path answers the 99% "no" (sold out, not open)
// from it, the gate reads which sales it counts, and the waiting room
// answers every status poll from it.
type SaleFacts struct {
	ID string
	// Title and ImageURL are what the waiting-room page shows of the
	// product (Title is the SKU when the sale was given none).
	Title     string
	ImageURL  string
	State     SaleState // as stored: never sold_out
	OpensAt   *time.Time
	Admission Admission
	// Gate counts the sale's units in front of the database (package gate).
	Gate             Gate
	PerCustomerLimit int
	// PerInstrumentLimit is the units one payment instrument may hold (0:
	// no limit). A reservation counts the instrument its customer token
	// names, if any; the payment counts the one its provider reports.
	PerInstrumentLimit int
	// SoldOut: no bucket holds a unit.
	SoldOut bool
	// Available is the units left in every bucket, as last read (the
	// waiting room paces its polls by it; the purchase path never trusts
	// it). PendingHolds, known only of a sold-out sale, is whether a
	// pending hold could still give a unit back (cancelled or expired):
	// sold out for now, not for good.
	Available    int64
	PendingHolds bool
	// Variants are the sale's variants in order, each with the units it
	// has left as last read (none: a sale without variants). SoldOut is
	// then every variant sold out.
	Variants []VariantFacts
	// Room is the sale's waiting room (what a waiting_room sale's room and
	// an edge read).
	Room RoomFacts
	// DBNow is the database's clock when this was read (the sale cache's
	// Now is corrected by it).
	DBNow time.Time
	// StockVersion changes whenever the stock of any bucket changes: two
	// reads that saw the sale sold out with different versions had units
	// come back and taken in between, perhaps by a new holder. It changes
	// with the sale's own row too (an open, a pause), so that a refusal
	// "not open" is never confirmed by a read of an opened sale.
	StockVersion string
}

// VariantFacts is what an instance knows of one variant of a sale.
type VariantFacts struct {
	SKU, Title   string
	InitialStock int64
	Available    int64
}

// Availability is what shoppers are told of the variant.
func (v VariantFacts) Availability() Availability {
	return AvailabilityOf(v.Available, v.InitialStock)
}

// Variant is the variant of s named sku; ok false when s has none by that
// SKU.
func (s SaleFacts) Variant(sku string) (v VariantFacts, ok bool) {
	for _, v := range s.Variants {
		if v.SKU == sku {
			return v, true
		}
	}
	return VariantFacts{}, false
}

// RoomFacts is what an instance knows of a sale's waiting room: its rules
// (Fairness, ChallengeBits, MinAccountAgeSeconds, the pre-open draw's seed)
// and where its line stands.
type RoomFacts struct {
	Fairness             Fairness
	ChallengeBits        int
	MinAccountAgeSeconds int
	// DrawSeed is the secret seed of the room's pre-open draw.
	DrawSeed []byte
	// The line: the next position to hand out, the pre-open crowd as
	// frozen at the open (-1: not frozen yet) in ranks (PreopenCount: the
	// pre-open tickets under randomized_at_open) and in positions, the
	// pre-open tickets counted so far, the watermark (ranks up to it may be
	// admitted) and the pace it moves at (ranks per second).
	NextPosition     int64
	PreopenCount     int64
	PreopenPositions int64
	PreopenTickets   int64
	// Held: an operator holds the queue (nobody is admitted); Broadcast: the
	// operator's message to everyone waiting ("" none).
	Held            bool
	Broadcast       string
	AdmittedThrough int64
	Pace            float64
	// FinalSeed is the seed the committed pre-open crowd is ranked by
	// (crowddraw.go), nil until the freeze commits it (and in a room frozen
	// before commitments existed, whose tickets rank by their own draw).
	FinalSeed []byte
	// Beacon: the pre-open crowd's ranks wait for a public randomness
	// beacon's round (crowddraw.go), BeaconRound (0: fixed at the freeze,
	// the sale having no opening time when it was created).
	Beacon      bool
	BeaconRound uint64
}

// Opened reports whether the sale has opened by now's clock (it may be
// paused or closed since): its opening time has passed (opening a sale sets
// it), or it was created open, without one. The database's clock decides
// what is stored; this only shapes answers given from memory.
func (s SaleFacts) Opened(now time.Time) bool {
	if s.OpensAt == nil {
		return s.State != StateScheduled
	}
	return !s.OpensAt.After(now)
}

// FactSource is where the sale cache reads SaleFacts: the database
// (*postgres.Store) or, on an edge, its origins (package edge).
type FactSource interface {
	// SaleFacts reads saleID, or with "" every sale worth keeping (not
	// closed, or closed for less than a day). An unknown id reads nothing.
	SaleFacts(ctx context.Context, saleID string) ([]SaleFacts, error)
	// SaleCustomers lists the customers who ever held a reservation in the
	// sale.
	SaleCustomers(ctx context.Context, saleID string) ([]string, error)
	// StockVersions reads the SaleFacts.StockVersion of each of saleIDs
	// alone, now, by sale id (an unknown id is left out).
	StockVersions(ctx context.Context, saleIDs []string) (map[string]string, error)
	// Listen calls changed with the id of every sale the database says
	// changed, and with "" (every sale) whenever it had to (re)connect, until
	// ctx is done.
	Listen(ctx context.Context, changed func(saleID string)) error
}
