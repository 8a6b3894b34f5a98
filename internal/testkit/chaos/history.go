package chaos

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is what a logical operation does.
type Kind string

// Operation kinds. Expire is not a client's: it is the sweeper's expiry of a
// hold, read from the database after the run.
const (
	Reserve         Kind = "reserve"
	Confirm         Kind = "confirm"
	Cancel          Kind = "cancel"
	ReadReservation Kind = "read_reservation"
	ReadSale        Kind = "read_sale"
	// ReadVariants is the variants' counts of the same read of a sale with
	// variants: the service reads them in a statement of their own after
	// the sale's, so each is checked at a moment of its own in the read.
	ReadVariants Kind = "read_variants"
	Expire       Kind = "expire"
)

// Outcomes of logical operations: the definite answers a client stops at.
const (
	OutCreated = "created"  // reserve: 201 (new or replayed)
	OutSoldOut = "sold_out" // reserve: 409 sold_out
	// reserve of a variant: 409 variant_sold_out (that variant short)
	OutVariantSoldOut = "variant_sold_out"
	OutLimitReached   = "limit_reached" // reserve: 409 limit_reached
	OutNotOpen        = "sale_not_open" // reserve: 409 sale_not_open
	OutConfirmed      = "confirmed"     // confirm 200; cancel 409 reservation_confirmed; read: state
	OutExpired        = "expired"       // confirm/cancel 409 reservation_expired; read: state
	OutCancelled      = "cancelled"     // cancel 200; confirm 409 reservation_cancelled; read: state
	OutPending        = "pending"       // read: state
	OutNotFound       = "not_found"     // 404: never right for a hold a client was given
	OutRead           = "read"          // read_sale: counts
	OutUnknown        = "unknown"       // no definite answer within the deadline
)

// Counts is a sale's units by state, as GET /admin/sales/{id} shows them.
type Counts struct {
	Available, Pending, Confirmed, Expired, Cancelled int
}

// VariantCounts is one variant's units as GET /admin/sales/{id} shows
// them (its variants, in order).
type VariantCounts struct {
	SKU                           string
	Available, Pending, Confirmed int
}

// Attempt is one HTTP request of a logical operation.
type Attempt struct {
	Instance   int
	Start, End time.Time
	Status     int    // 0: no answer (transport error or timeout)
	Code       string // the contract's error code, if any
	Err        string
	Replayed   bool
}

// Label is how the attempt is counted in the figures: "201", "409
// sold_out", "503 sale_paused_fail_closed", "no answer".
func (a Attempt) Label() string {
	switch {
	case a.Status == 0:
		return "no answer"
	case a.Code != "":
		return fmt.Sprintf("%d %s", a.Status, a.Code)
	case a.Replayed:
		return fmt.Sprintf("%d replayed", a.Status)
	}
	return fmt.Sprint(a.Status)
}

// Op is one logical operation: invoked with its first attempt, complete
// with the definite answer of its last.
type Op struct {
	ID       int
	Client   int // the buyer's index; readers and sweeps after them
	Kind     Kind
	Customer string
	Key      string // reserve
	// Variant is the SKU of the variant reserved (a sale with variants:
	// reserve, and expire the hold's); "" in a sale without.
	Variant string
	Qty     int    // reserve; expire: the hold's units
	ResID   string // confirm, cancel, read_reservation, expire: the hold; reserve: the answer's
	// ExpiresAt is the hold's expiry as its 201 said (confirm, cancel,
	// read_reservation), or as the database holds it (expire).
	ExpiresAt time.Time
	Call      time.Time
	Return    time.Time
	Outcome   string
	Body      []byte // reserve: the 201's body
	// Replay (reserve): the harness's replay, after the load, of a 201 a
	// buyer was given (the same key; Body was that 201's).
	Replay  bool
	OrderID string // confirm
	Counts  Counts // read_sale
	// Variants (read_variants): each variant's units.
	Variants []VariantCounts
	Attempts []Attempt
}

// History is every operation of a run. Safe for concurrent use.
type History struct {
	mu  sync.Mutex
	ops []*Op
}

// Begin records the invocation of a new logical operation.
func (h *History) Begin(op *Op) *Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops)
	h.ops = append(h.ops, op)
	return op
}

// Ops is every operation so far, in invocation order.
func (h *History) Ops() []*Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]*Op(nil), h.ops...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call.Before(out[j].Call) })
	return out
}

// AnswerCounts is how many attempts got each answer.
func AnswerCounts(ops []*Op) map[string]int {
	m := map[string]int{}
	for _, op := range ops {
		for _, a := range op.Attempts {
			m[string(op.Kind)+" "+a.Label()]++
		}
	}
	return m
}

// FormatCounts is counts as "label n, label n", biggest first.
func FormatCounts(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool {
		if kvs[i].v != kvs[j].v {
			return kvs[i].v > kvs[j].v
		}
		return kvs[i].k < kvs[j].k
	})
	parts := make([]string, len(kvs))
	for i, e := range kvs {
		parts[i] = fmt.Sprintf("%s: %d", e.k, e.v)
	}
	return strings.Join(parts, ", ")
}
