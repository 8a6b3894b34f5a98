package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is what the checker found.
type Verdict struct {
	Violations []string
	// Losses are the checks that failed the way lost acknowledged writes
	// make them fail, in a lossy check (CheckLossy); in Check they are
	// violations.
	Losses []string
	// Porcupine is porcupine's verdict on the history: Ok, Illegal or
	// Unknown (it ran out of time; not a violation, but said).
	Porcupine string
	// ReadsLeftOut are the reads of the sale left out of porcupine's
	// history (LongOperation).
	ReadsLeftOut int
	// Visualize writes porcupine's visualisation of the history to a file.
	Visualize func(path string) error
}

// LongOperation is how long a client's operation may take before the reads
// of the sale made during it are left out of porcupine's history (they are
// still checked against the database's timeline, as every read is). Such
// an operation was retried across an outage (a restart, a failover), and
// may have taken effect anywhere in its span; a read made meanwhile has
// porcupine try every subset of the operations pending with it, and after
// a failover (twenty operations pending across the 1.5 s from the crash to
// the promotion, four reads just after it) the search ran out of its
// minute; without those reads it takes milliseconds.
const LongOperation = time.Second

// overlapsLong reports whether read overlaps a client operation of ops that
// took longer than LongOperation.
func overlapsLong(read *Op, ops []*Op) bool {
	for _, op := range ops {
		if op.Kind != ReadSale && op.Kind != ReadVariants && op.Return.Sub(op.Call) > LongOperation && op.Call.Before(read.Return) && op.Return.After(read.Call) {
			return true
		}
	}
	return false
}

// VisibilityLag is how long after its commit timestamp a transaction may
// still be invisible to others: PostgreSQL takes the timestamp before it
// flushes the commit to the WAL (an fsync) and only then makes the
// transaction visible. A read of the sale may miss a transaction committed
// up to this long before it was sent, or longer when the transaction's
// client was answered later still (Timeline.Seen). (Porcupine checks the
// same reads against the clients' own times, without it.)
const VisibilityLag = 250 * time.Millisecond

// CheckTimeout bounds porcupine's search.
var CheckTimeout = time.Minute

// Check checks a run's history against the model and the database's facts.
func Check(ctx context.Context, initial int, opensAt time.Time, customers []string, ops []*Op, f Facts) Verdict {
	return check(ctx, initial, opensAt, customers, ops, f, false)
}

// CheckLossy is Check for a run that may lose acknowledged writes (a
// failover with asynchronous replication: the new primary is a consistent
// copy of the old one, but an older one). What a loss explains is reported
// in Verdict.Losses: porcupine's verdict, reads and refusals of the sale
// that the new primary's timeline does not show, 201s, confirms and replays
// it does not know of, and the invariant job's incidents. What no loss
// explains is still a violation: the new primary's own accounting (more
// units sold than its stock, a ledger that does not add up, one customer
// holding two), clocks, answers outside the contract, operations without a
// definite answer.
func CheckLossy(ctx context.Context, initial int, opensAt time.Time, customers []string, ops []*Op, f Facts) Verdict {
	return check(ctx, initial, opensAt, customers, ops, f, true)
}

func check(ctx context.Context, initial int, opensAt time.Time, customers []string, ops []*Op, f Facts, lossy bool) Verdict {
	var v Verdict
	bad := func(format string, args ...any) {
		v.Violations = append(v.Violations, fmt.Sprintf(format, args...))
	}
	lost := bad
	if lossy {
		lost = func(format string, args ...any) {
			v.Losses = append(v.Losses, fmt.Sprintf(format, args...))
		}
	}

	// The sweeper's expirations, timed by the database: from the sweep's
	// start (expired_at, its transaction's now()) to its commit.
	all := append([]*Op(nil), ops...)
	sweeps := map[time.Time]int{}
	for _, row := range f.Rows {
		if row.State != OutExpired || row.ExpiredAt == nil {
			continue
		}
		id, ok := sweeps[*row.ExpiredAt]
		if !ok {
			id = len(customers) + 1 + len(sweeps)
			sweeps[*row.ExpiredAt] = id
		}
		// Visible to others up to VisibilityLag after its commit
		// timestamp: a read sent in between may still see the hold
		// pending (found by redis-reset: a read 0.3 ms after the sweep's
		// commit timestamp saw it pending, and porcupine had the sweep
		// done before the read).
		ret := time.Now()
		if row.Committed != nil {
			ret = f.expiryVisible(*row.Committed)
		}
		all = append(all, &Op{Client: id, Kind: Expire, Customer: row.Customer, ResID: row.ID, Qty: row.Qty,
			ExpiresAt: row.ExpiresAt, Call: *row.ExpiredAt, Return: ret, Outcome: OutExpired})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Call.Before(all[j].Call) })

	// A sale_not_open while the sale was paused (a gated sale, by the gate
	// job or the operator) changed nothing: it is checked against the
	// pauses below, not by the model, which knows only the opening.
	all = slices.DeleteFunc(all, func(op *Op) bool {
		return op.Kind == Reserve && op.Outcome == OutNotOpen && f.Gate.paused(op.Call, op.Return)
	})
	// Reads of the sale during a long operation are left to the timeline
	// check below (LongOperation).
	all = slices.DeleteFunc(all, func(op *Op) bool {
		if (op.Kind == ReadSale || op.Kind == ReadVariants) && overlapsLong(op, ops) {
			v.ReadsLeftOut++
			return true
		}
		return false
	})
	model := Model(initial, opensAt, customers)
	if len(f.Variants) > 0 {
		skus, units := make([]string, len(f.Variants)), make([]int, len(f.Variants))
		for i, fv := range f.Variants {
			skus[i], units[i] = fv.SKU, fv.Initial
		}
		model = VariantsModel(skus, units, opensAt, customers)
	}
	history := Operations(all)
	res, info := porcupine.CheckOperationsVerbose(model, history, CheckTimeout)
	v.Porcupine = string(res)
	v.Visualize = func(path string) error { return porcupine.VisualizePath(model, info, path) }
	if res == porcupine.Illegal {
		lost("porcupine: the history is not linearizable against the model of the sale (see the visualisation)")
	}

	// Refusals and reads against the database's own timeline.
	tl, problems := NewTimeline(f, ops)
	for _, p := range problems {
		bad("timeline: %s", p)
	}
	var held []heldBack
	if f.Gate.On {
		held = gateHeldBack(f, ops)
	}
	// Each variant's own timeline, for its variant_sold_out answers, and
	// in a gated sale what its own counter may have been without.
	variantTL := map[string]*Timeline{}
	variantHeld := map[string][]heldBack{}
	for _, fv := range f.Variants {
		of := f.ofVariant(fv.SKU)
		vtl, problems := NewTimeline(of, ops)
		for _, p := range problems {
			bad("timeline of variant %s: %s", fv.SKU, p)
		}
		variantTL[fv.SKU] = vtl
		if f.Gate.On {
			variantHeld[fv.SKU] = gateHeldBack(of, ops)
		}
	}
	for _, op := range ops {
		switch {
		case op.Kind == Reserve && op.Outcome == OutSoldOut:
			from := op.Call.Add(-SoldOutStaleness)
			if !tl.AnyIn(from, op.Return, func(c Counts) bool { return c.Available < op.Qty }) &&
				!(f.Gate.On && tl.gateShortIn(from, op.Return, held, op.Qty)) {
				less := ""
				if f.Gate.On {
					less = ", less those the gate's counter may have been without,"
				}
				lost("sold_out while %d units were available%s throughout (and for %s before): %s", op.Qty, less, SoldOutStaleness, describe(op))
			}
		case op.Kind == Reserve && op.Outcome == OutVariantSoldOut:
			from := op.Call.Add(-SoldOutStaleness)
			vtl, ok := variantTL[op.Variant]
			if !ok {
				bad("variant_sold_out for a variant the sale does not have: %s", describe(op))
			} else if !vtl.AnyIn(from, op.Return, func(c Counts) bool { return c.Available < op.Qty }) &&
				!(f.Gate.On && vtl.gateShortIn(from, op.Return, variantHeld[op.Variant], op.Qty)) {
				less := ""
				if f.Gate.On {
					less = ", less those its counter may have been without,"
				}
				lost("variant_sold_out while %d units of %s were available%s throughout (and for %s before): %s", op.Qty, op.Variant, less, SoldOutStaleness, describe(op))
			}
		case op.Kind == ReadSale:
			if !tl.Seen(op.Call, op.Return, op.Counts) {
				lost("a read of the sale saw %+v, a state the database never had during the read (%s to %s)", op.Counts, op.Call.Format("15:04:05.000"), op.Return.Format("15:04:05.000"))
			}
		}
	}

	rows := map[string]Row{}
	for _, row := range f.Rows {
		rows[row.ID] = row
	}
	seen := map[string]bool{}
	keyRes := map[string]string{}
	for _, op := range ops {
		switch {
		case op.Outcome == OutUnknown:
			bad("no definite answer within the deadline: %s", describe(op))
		case op.Replay && op.Outcome != OutCreated && op.Outcome != "replay_differs":
			lost("a replay of a 201 was answered %s: %s", op.Outcome, describe(op))
		case op.Outcome == "replay_differs":
			lost("a replay differs from the first 201: %s", describe(op))
		case op.Outcome == OutNotFound:
			lost("404 for a hold the client was given: %s", describe(op))
		case op.Kind == Reserve && op.Outcome == OutCreated && op.Return.Before(opensAt):
			bad("sold before the opening (%s): %s", opensAt.Format(time.RFC3339), describe(op))
		case op.Kind == Reserve && op.Outcome == OutNotOpen && !op.Call.Before(opensAt) && !f.Gate.paused(op.Call, op.Return):
			bad("sale_not_open after the opening (%s): %s at %s", opensAt.Format(time.RFC3339), describe(op), op.Call.Format("15:04:05.000"))
		}
		for _, a := range op.Attempts {
			if a.Status >= 500 && a.Status != 503 {
				bad("%d %s answered (the contract has no such answer): %s at %s on instance %d", a.Status, a.Code, describe(op), a.Start.Format("15:04:05.000"), a.Instance)
			}
		}
		if op.Kind == Reserve && (op.Outcome == OutCreated || op.Outcome == "replay_differs") {
			seen[op.ResID] = true
			k := op.Customer + "\x00" + op.Key
			if prev, ok := keyRes[k]; ok && prev != op.ResID {
				lost("key %s of %s answered two holds: %s and %s", op.Key, op.Customer, prev, op.ResID)
			}
			keyRes[k] = op.ResID
			row, ok := rows[op.ResID]
			switch {
			case !ok:
				lost("201 without a reservation row: %s", describe(op))
			case row.Customer != op.Customer || row.Qty != op.Qty || row.Key != op.Key:
				bad("201 %s does not match its row (%s, %d units, key %s)", describe(op), row.Customer, row.Qty, row.Key)
			case !row.ExpiresAt.Equal(op.ExpiresAt):
				bad("201 %s says expiresAt %s, the row %s", op.ResID, op.ExpiresAt, row.ExpiresAt)
			case row.Variant != op.Variant:
				bad("201 %s: the variant asked for is %q, the row's (its bucket's) %q", describe(op), op.Variant, row.Variant)
			}
			var receipt struct{ Variant string }
			if err := json.Unmarshal(op.Body, &receipt); len(op.Body) > 0 && (err != nil || receipt.Variant != op.Variant) {
				bad("201 %s: its receipt names the variant %q, not the one asked for (%v)", describe(op), receipt.Variant, err)
			}
		}
		// Holds never expire early, nor confirm late, as the clients saw it.
		switch {
		case op.Kind == Confirm && op.Outcome == OutExpired && op.Return.Before(op.ExpiresAt):
			bad("expired early: confirm answered reservation_expired at %s, before expiresAt %s: %s", op.Return.Format(time.RFC3339Nano), op.ExpiresAt.Format(time.RFC3339), describe(op))
		case op.Kind == ReadReservation && op.Outcome == OutExpired && op.Return.Before(op.ExpiresAt):
			bad("expired early: read expired at %s, before expiresAt %s: %s", op.Return.Format(time.RFC3339Nano), op.ExpiresAt.Format(time.RFC3339), describe(op))
		}
	}

	units := map[string]int{}
	active := map[string][]Row{}
	for _, row := range f.Rows {
		units[row.State] += row.Qty
		if !seen[row.ID] {
			lost("answer lost: reservation %s of %s (key %s, %s) was never answered 201 to its client", row.ID, row.Customer, row.Key, row.State)
		}
		active[row.Customer] = append(active[row.Customer], row)
		// The database's own clock.
		switch row.State {
		case OutConfirmed:
			if row.ConfirmedAt == nil || !row.ConfirmedAt.Before(row.ExpiresAt) {
				bad("confirmed late: %s confirmed at %v, expiresAt %s", row.ID, row.ConfirmedAt, row.ExpiresAt)
			}
			if n := len(f.Orders[row.ID]); n != 1 {
				bad("confirmed hold %s has %d orders", row.ID, n)
			}
		case OutExpired:
			if row.ExpiredAt == nil || row.ExpiredAt.Before(row.ExpiresAt) {
				bad("expired early: %s swept at %v, expiresAt %s", row.ID, row.ExpiredAt, row.ExpiresAt)
			}
		}
		restocks, reserves := 0, 0
		for _, l := range f.Ledger[row.ID] {
			switch {
			case l.Reason == "reserve" && l.Delta == -row.Qty:
				reserves++
			case (l.Reason == "cancel" || l.Reason == "expire") && l.Delta == row.Qty:
				restocks++
			default:
				bad("ledger row %s %+d for %s (%d units)", l.Reason, l.Delta, row.ID, row.Qty)
			}
		}
		returned := row.State == OutCancelled || row.State == OutExpired
		want := 0
		if returned {
			want = 1
		}
		if reserves != 1 || restocks != want || (row.RestockedAt != nil) != returned {
			bad("hold %s (%s): %d reserve and %d restock ledger rows, restocked_at %v; want 1 and %d", row.ID, row.State, reserves, restocks, row.RestockedAt, want)
		}
		if row.State != OutConfirmed && len(f.Orders[row.ID]) > 0 {
			bad("hold %s is %s but has an order", row.ID, row.State)
		}
	}
	for _, op := range ops {
		if op.Kind == Confirm && op.Outcome == OutConfirmed && op.OrderID != "" {
			if os := f.Orders[op.ResID]; len(os) != 1 || os[0].ID != op.OrderID {
				lost("confirm answered order %s, the database has %v: %s", op.OrderID, os, describe(op))
			}
		}
	}
	// One active hold per customer at any moment.
	for c, holds := range active {
		sort.Slice(holds, func(i, j int) bool { return holds[i].CreatedAt.Before(holds[j].CreatedAt) })
		for i := 1; i < len(holds); i++ {
			prev := holds[i-1]
			end := prev.CancelledAt
			if prev.State == OutExpired {
				end = prev.ExpiredAt
			}
			if end == nil || end.After(holds[i].CreatedAt) {
				bad("customer %s held two: %s (%s) and %s from %s", c, prev.ID, prev.State, holds[i].ID, holds[i].CreatedAt)
			}
		}
	}
	if got := f.Stock + units[OutPending] + units[OutConfirmed]; got != f.Initial || f.Initial != initial {
		bad("stock %d + pending %d + confirmed %d = %d, initial %d", f.Stock, units[OutPending], units[OutConfirmed], got, f.Initial)
	}
	if f.LedgerSum != f.Stock {
		bad("the ledger sums to %d, the stock is %d", f.LedgerSum, f.Stock)
	}
	checkVariants(f, bad, lost)
	if f.Stock < 0 {
		bad("stock %d below zero", f.Stock)
	}
	if f.Incidents > 0 || !f.InvariantOK {
		lost("the invariant job recorded %d incidents (last verdict ok=%v); sale %s", f.Incidents, f.InvariantOK, f.SaleState)
	} else if f.SaleState == "paused" && !f.Gate.On {
		// (A gated sale's pauses and resumes are checked by checkGate.)
		bad("the sale was left paused, with no incident to say why")
	}
	return v
}

// Loss is what the database lacked, after the run, of what the clients had
// been told: all zero when nothing acknowledged was lost.
type Loss struct {
	// Acknowledged is the reservations the buyers were answered 201 for;
	// Missing those of them the database has no row of.
	Acknowledged, Missing int
	// Replays are the harness's replays, after the load, of those 201s
	// (the same key again); ReplaysNew those answered with another
	// reservation (the first one was lost, so the key was free), and
	// ReplaysRefused those answered no 201 at all (sold_out,
	// limit_reached: the customer holds another).
	Replays, ReplaysNew, ReplaysRefused int
	// ConfirmsLost are confirms answered 200 whose hold the database does
	// not show confirmed with that order; CancelsLost cancels answered 200
	// whose hold it does not show cancelled.
	ConfirmsLost, CancelsLost int
	// Promised is the units of the distinct orders the clients were told
	// were confirmed; beyond the sale's stock when Promised > Initial.
	Promised, Initial int
	// InvariantOK: the invariant job recorded no incident.
	InvariantOK bool
}

// Lost is whether anything acknowledged was lost.
func (l Loss) Lost() bool {
	return l.Missing+l.ReplaysNew+l.ReplaysRefused+l.ConfirmsLost+l.CancelsLost > 0 || l.Promised > l.Initial || !l.InvariantOK
}

func (l Loss) String() string {
	return fmt.Sprintf("%d reservations acknowledged, %d missing on the new primary; %d replayed after the load: %d answered another reservation, %d refused; %d confirms and %d cancels lost; %d units promised in orders of %d; invariant ok %v",
		l.Acknowledged, l.Missing, l.Replays, l.ReplaysNew, l.ReplaysRefused, l.ConfirmsLost, l.CancelsLost, l.Promised, l.Initial, l.InvariantOK)
}

// Losses counts what the database lacks of what the clients were told.
func Losses(initial int, ops []*Op, f Facts) Loss {
	l := Loss{Initial: initial, InvariantOK: f.Incidents == 0 && f.InvariantOK}
	rows := map[string]Row{}
	for _, row := range f.Rows {
		rows[row.ID] = row
	}
	acked := map[string]bool{}
	orders := map[string]int{} // order id → units
	for _, op := range ops {
		row, ok := rows[op.ResID]
		switch {
		case op.Kind == Reserve && op.Replay:
			l.Replays++
			switch op.Outcome {
			case OutCreated:
			case "replay_differs":
				l.ReplaysNew++
			default:
				l.ReplaysRefused++
			}
		case op.Kind == Reserve && (op.Outcome == OutCreated || op.Outcome == "replay_differs"):
			if !acked[op.ResID] {
				acked[op.ResID] = true
				l.Acknowledged++
				if !ok {
					l.Missing++
				}
			}
		case op.Kind == Confirm && op.Outcome == OutConfirmed && op.OrderID != "":
			if o := f.Orders[op.ResID]; !ok || row.State != OutConfirmed || len(o) != 1 || o[0].ID != op.OrderID {
				l.ConfirmsLost++
			}
			if _, seen := orders[op.OrderID]; !seen {
				orders[op.OrderID] = qtyOf(ops, op.ResID)
			}
		case op.Kind == Cancel && op.Outcome == OutCancelled:
			if !ok || row.State != OutCancelled {
				l.CancelsLost++
			}
		}
	}
	for _, q := range orders {
		l.Promised += q
	}
	return l
}

// qtyOf is the units of the hold id as its 201 said.
func qtyOf(ops []*Op, id string) int {
	for _, op := range ops {
		if op.Kind == Reserve && op.ResID == id {
			return op.Qty
		}
	}
	return 0
}
