package chaos

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model is one sale as the contract describes it, one step per
// operation, for porcupine: the units available (of each variant, in a sale
// with variants: a hold takes its variant's and gives them back), and for
// each customer the
// holds it was given (id, units, state, order) and the idempotency keys
// that took stock (key → hold). An operation is legal in a state when the
// answer the client saw is the one the contract gives there:
//
//   - reserve with a key that took stock: the same hold again (a replay);
//     otherwise limit_reached exactly when the customer has an active
//     (pending or confirmed) hold, a new hold when it has none and the
//     units are there (of its variant; no earlier than the sale's
//     opening), sold_out when they are not (the sale's),
//     variant_sold_out when its variant's are not, sale_not_open only
//     before the opening;
//   - confirm: the order of a pending hold invoked before its expiresAt (and
//     the same order again once confirmed), reservation_expired once expired
//     or when pending past its expiresAt (not swept yet), cancelled once
//     cancelled;
//   - cancel: a pending hold becomes cancelled and its units come back, once;
//     reservation_confirmed / reservation_expired otherwise;
//   - a read of the hold shows its state; a read of the sale shows exactly
//     the model's units by state, and a read of its variants (the same
//     request's, a statement of its own) each variant's;
//   - the sweeper's expiry (from the database) takes a pending hold to
//     expired and returns its units: a hold that no client was ever given is
//     illegal here, which is how an answer lost with an instance shows up.
//
// sold_out (and variant_sold_out) answers are not in porcupine's history: the sale cache answers
// them from memory, which may be behind the database by the cache's
// staleness bound (its StaleAfter, 3 s, plus the read it came from, at most
// 3 s), and such a window made the search explode. They are checked instead
// against the database's own timeline of the stock (timeline.go): a sold_out
// is legal when the units were short at some moment between
// SoldOutStaleness before the request and its answer. The model still knows
// sold_out, for a history that includes them.

// SoldOutStaleness is how far behind the database a sold_out answered from
// a sale cache may be (salecache: StaleAfter 3 s + its 3 s read timeout).
const SoldOutStaleness = 6 * time.Second

type hold struct {
	id        string
	qty       int
	variant   int    // its variant's index (0 in a sale without variants)
	state     string // pending, confirmed, cancelled, expired
	order     string
	expiresAt time.Time
}

type custState struct {
	holds []hold
	keys  []keyHold
}

type keyHold struct{ key, id string }

func (c custState) key(k string) string {
	for _, kh := range c.keys {
		if kh.key == k {
			return kh.id
		}
	}
	return ""
}

func (c custState) hold(id string) int {
	for i, h := range c.holds {
		if h.id == id {
			return i
		}
	}
	return -1
}

func (c custState) active() bool {
	for _, h := range c.holds {
		if h.state == OutPending || h.state == OutConfirmed {
			return true
		}
	}
	return false
}

// saleState is immutable: a step copies what it changes. available is by
// variant (one entry for a sale without variants).
type saleState struct {
	available []int
	customers []custState
}

// with is s with customer ci's state c, and delta units more available of
// variant v.
func (s *saleState) with(ci int, c custState, v, delta int) *saleState {
	n := &saleState{available: s.available, customers: append([]custState(nil), s.customers...)}
	if delta != 0 {
		n.available = append([]int(nil), s.available...)
		n.available[v] += delta
	}
	n.customers[ci] = c
	return n
}

func (s *saleState) total() int {
	n := 0
	for _, a := range s.available {
		n += a
	}
	return n
}

func (s *saleState) counts() Counts {
	out := Counts{Available: s.total()}
	for _, c := range s.customers {
		for _, h := range c.holds {
			switch h.state {
			case OutPending:
				out.Pending += h.qty
			case OutConfirmed:
				out.Confirmed += h.qty
			case OutExpired:
				out.Expired += h.qty
			case OutCancelled:
				out.Cancelled += h.qty
			}
		}
	}
	return out
}

// variantCounts is each variant's units as the admin API shows them.
func (s *saleState) variantCounts(skus []string) []VariantCounts {
	out := make([]VariantCounts, len(skus))
	for v, sku := range skus {
		out[v] = VariantCounts{SKU: sku, Available: s.available[v]}
	}
	for _, c := range s.customers {
		for _, h := range c.holds {
			switch h.state {
			case OutPending:
				out[h.variant].Pending += h.qty
			case OutConfirmed:
				out[h.variant].Confirmed += h.qty
			}
		}
	}
	return out
}

// Model is the porcupine model of a sale of initial units that opens at
// opensAt, bought by customers.
func Model(initial int, opensAt time.Time, customers []string) porcupine.Model {
	return VariantsModel(nil, []int{initial}, opensAt, customers)
}

// VariantsModel is Model for a sale with variants: skus and each one's
// initial units, in order (skus nil: a sale without variants, initial its
// one stock).
func VariantsModel(skus []string, initial []int, opensAt time.Time, customers []string) porcupine.Model {
	variant := make(map[string]int, len(skus))
	for v, sku := range skus {
		variant[sku] = v
	}
	index := make(map[string]int, len(customers))
	for i, c := range customers {
		index[c] = i
	}
	step := func(state, input, _ interface{}) (bool, interface{}) {
		s := state.(*saleState)
		op := input.(*Op)
		switch op.Kind {
		case ReadSale:
			return op.Counts == s.counts(), s
		case ReadVariants:
			return skus != nil && slices.Equal(op.Variants, s.variantCounts(skus)), s
		}
		ci, ok := index[op.Customer]
		if !ok {
			return false, s
		}
		c := s.customers[ci]
		if op.Kind == Reserve {
			v, ok := 0, skus == nil && op.Variant == ""
			if skus != nil {
				v, ok = variant[op.Variant]
			}
			if !ok {
				return false, s // a variant the sale does not have
			}
			return stepReserve(s, ci, c, op, v, opensAt)
		}
		hi := c.hold(op.ResID)
		if hi < 0 {
			return false, s // a hold this customer was never given
		}
		h := c.holds[hi]
		change := func(h hold, returned int) *saleState {
			n := custState{holds: append([]hold(nil), c.holds...), keys: c.keys}
			n.holds[hi] = h
			return s.with(ci, n, h.variant, returned)
		}
		switch op.Kind {
		case Confirm:
			switch {
			case op.Outcome == OutConfirmed && h.state == OutConfirmed:
				return op.OrderID == "" || h.order == "" || op.OrderID == h.order, s
			case op.Outcome == OutConfirmed && h.state == OutPending && op.Call.Before(h.expiresAt):
				h.state, h.order = OutConfirmed, op.OrderID
				return true, change(h, 0)
			case op.Outcome == OutExpired:
				return h.state == OutExpired || (h.state == OutPending && !op.Return.Before(h.expiresAt)), s
			case op.Outcome == OutCancelled:
				return h.state == OutCancelled, s
			}
		case Cancel:
			switch {
			case op.Outcome == OutCancelled && h.state == OutCancelled:
				return true, s
			case op.Outcome == OutCancelled && h.state == OutPending:
				h.state = OutCancelled
				return true, change(h, h.qty)
			case op.Outcome == OutConfirmed || op.Outcome == OutExpired:
				return h.state == op.Outcome, s
			}
		case ReadReservation:
			return op.Outcome == h.state, s
		case Expire:
			if h.state != OutPending {
				return false, s
			}
			h.state = OutExpired
			return true, change(h, h.qty)
		}
		return false, s
	}
	return porcupine.Model{
		Init: func() interface{} {
			return &saleState{available: initial, customers: make([]custState, len(customers))}
		},
		Step: step,
		Equal: func(a, b interface{}) bool {
			x, y := a.(*saleState), b.(*saleState)
			if x == y {
				return true
			}
			if !slices.Equal(x.available, y.available) || len(x.customers) != len(y.customers) {
				return false
			}
			for i := range x.customers {
				if !custEqual(x.customers[i], y.customers[i]) {
					return false
				}
			}
			return true
		},
		Hash: func(state interface{}) uint64 {
			s := state.(*saleState)
			h := fnv.New64a()
			fmt.Fprint(h, s.available)
			for i, c := range s.customers {
				for _, hd := range c.holds {
					fmt.Fprint(h, i, hd.id, hd.state)
				}
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, _ interface{}) string { return describe(input.(*Op)) },
		DescribeState: func(state interface{}) string {
			s := state.(*saleState)
			c := s.counts()
			d := fmt.Sprintf("available %d, pending %d, confirmed %d, expired %d, cancelled %d",
				c.Available, c.Pending, c.Confirmed, c.Expired, c.Cancelled)
			if skus != nil {
				d += fmt.Sprintf("; variants %+v", s.variantCounts(skus))
			}
			return d
		},
	}
}

// stepReserve is a reserve of variant v (0 in a sale without variants).
func stepReserve(s *saleState, ci int, c custState, op *Op, v int, opensAt time.Time) (bool, interface{}) {
	if id := c.key(op.Key); id != "" {
		return op.Outcome == OutCreated && op.ResID == id, s
	}
	switch op.Outcome {
	case OutCreated:
		if c.active() || s.available[v] < op.Qty || c.hold(op.ResID) >= 0 || op.Return.Before(opensAt) {
			return false, s
		}
		n := custState{
			holds: append(append([]hold(nil), c.holds...), hold{id: op.ResID, qty: op.Qty, variant: v, state: OutPending, expiresAt: op.ExpiresAt}),
			keys:  append(append([]keyHold(nil), c.keys...), keyHold{op.Key, op.ResID}),
		}
		return true, s.with(ci, n, v, -op.Qty)
	case OutLimitReached:
		return c.active(), s
	case OutSoldOut:
		// The database says limit_reached first to a customer with an
		// active hold; a sale cache whose list of holders is behind says
		// sold_out. Both are refusals.
		return s.total() < op.Qty, s
	case OutVariantSoldOut:
		return op.Variant != "" && s.available[v] < op.Qty, s
	case OutNotOpen:
		return op.Call.Before(opensAt), s
	}
	return false, s
}

func custEqual(a, b custState) bool {
	if len(a.holds) != len(b.holds) || len(a.keys) != len(b.keys) {
		return false
	}
	for i := range a.holds {
		if a.holds[i] != b.holds[i] {
			return false
		}
	}
	for i := range a.keys {
		if a.keys[i] != b.keys[i] {
			return false
		}
	}
	return true
}

func describe(op *Op) string {
	switch op.Kind {
	case Reserve:
		of := ""
		if op.Variant != "" {
			of = " of " + op.Variant
		}
		s := fmt.Sprintf("%s reserve(key %s, %d%s) → %s", op.Customer, op.Key, op.Qty, of, op.Outcome)
		if op.Outcome == OutCreated {
			s += " " + op.ResID
		}
		return s + fmt.Sprintf(" [%d attempts]", len(op.Attempts))
	case ReadSale:
		return fmt.Sprintf("read sale → %+v", op.Counts)
	case ReadVariants:
		return fmt.Sprintf("read sale's variants → %+v", op.Variants)
	case Expire:
		return fmt.Sprintf("sweeper expires %s (%s, %d units, expiresAt %s)", op.ResID, op.Customer, op.Qty, op.ExpiresAt.Format("15:04:05"))
	}
	return fmt.Sprintf("%s %s(%s) → %s [%d attempts]", op.Customer, op.Kind, op.ResID, op.Outcome, len(op.Attempts))
}

// Operations is the history as porcupine's operations.
func Operations(ops []*Op) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Outcome == OutUnknown || op.Return.IsZero() {
			continue
		}
		if op.Kind == Reserve && (op.Outcome == OutSoldOut || op.Outcome == OutVariantSoldOut) {
			continue // checked against the database's timeline (check.go)
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    op,
			Call:     op.Call.UnixNano(),
			Output:   nil,
			Return:   op.Return.UnixNano(),
		})
	}
	return out
}
