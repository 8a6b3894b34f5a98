package chaos

import (
	"fmt"
	"maps"
	"sort"
	"time"
)

// Timeline is the sale's units by state over time, from the database's own
// record: every change of a hold leaves a row in a table that is only ever
// inserted into (stock_ledger for reserve, cancel and expire; orders for
// confirm), and the commit timestamp of that row's transaction
// (track_commit_timestamp) is when the change committed. What a client
// read, or was refused, can then be checked against the exact state at
// every moment of its request.
//
// A transaction becomes visible to others some time after its commit
// timestamp, once its commit record is flushed to the WAL (and, with
// synchronous replication, to the standby), and before its client is
// answered. Reads are checked against that window (Seen): usually a few
// milliseconds, over a second when a flush stalls (found by failover: a
// confirm on a just-promoted standby committed 1.07 s before its answer,
// and five reads in between did not see it).
type Timeline struct {
	at     []time.Time
	states []Counts // states[i] holds from at[i] (until at[i+1])
	txs    []tx     // the transactions, by commit timestamp
}

// tx is one transaction's changes: committed at at, visible to every
// session by visible at the latest (its client's answer, or VisibilityLag
// after at when that is later or there is no client).
type tx struct {
	at, visible time.Time
	d           Counts
}

// NewTimeline builds the timeline from f and the clients' operations ops
// (when each change was answered), and says what it could not place (a
// change whose commit time is not known).
func NewTimeline(f Facts, ops []*Op) (*Timeline, []string) {
	// When a client was answered for a change of a hold: the first
	// definite answer showing the hold in the state the change made.
	answered := map[string]time.Time{}
	seen := func(id, state string, at time.Time) {
		k := id + "\x00" + state
		if prev, ok := answered[k]; !ok || at.Before(prev) {
			answered[k] = at
		}
	}
	for _, op := range ops {
		switch {
		case op.Kind == Reserve && op.Outcome == OutCreated:
			seen(op.ResID, "reserve", op.Return)
		case op.Kind == Confirm || op.Kind == Cancel || op.Kind == ReadReservation:
			switch op.Outcome {
			case OutCancelled:
				seen(op.ResID, "cancel", op.Return)
			case OutExpired:
				seen(op.ResID, "expire", op.Return)
			case OutConfirmed:
				seen(op.ResID, "order", op.Return)
			}
		}
	}
	type change struct {
		at, visible time.Time
		d           Counts
	}
	visible := func(id, reason string, at time.Time) time.Time {
		v := at.Add(VisibilityLag)
		if reason == "expire" {
			v = f.expiryVisible(at)
		}
		if a, ok := answered[id+"\x00"+reason]; ok && a.After(v) {
			v = a
		}
		return v
	}
	var changes []change
	var problems []string
	qty := map[string]int{}
	for _, r := range f.Rows {
		qty[r.ID] = r.Qty
	}
	for id, rows := range f.Ledger {
		for _, l := range rows {
			if l.Committed == nil {
				problems = append(problems, fmt.Sprintf("ledger row %s of %q has no commit timestamp", l.Reason, id))
				continue
			}
			var d Counts
			d.Available = l.Delta
			switch l.Reason {
			case "reserve":
				d.Pending = -l.Delta
			case "cancel":
				d.Pending, d.Cancelled = -l.Delta, l.Delta
			case "expire":
				d.Pending, d.Expired = -l.Delta, l.Delta
			}
			changes = append(changes, change{*l.Committed, visible(id, l.Reason, *l.Committed), d})
		}
	}
	for id, orders := range f.Orders {
		for _, o := range orders {
			if o.Committed == nil {
				problems = append(problems, fmt.Sprintf("order %s has no commit timestamp", o.ID))
				continue
			}
			changes = append(changes, change{*o.Committed, visible(id, "order", *o.Committed), Counts{Pending: -qty[id], Confirmed: qty[id]}})
		}
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].at.Before(changes[j].at) })
	tl := &Timeline{}
	var cur Counts
	var t tx
	for i, c := range changes {
		cur = add(cur, c.d)
		t.d = add(t.d, c.d)
		if c.visible.After(t.visible) {
			t.visible = c.visible
		}
		if i+1 < len(changes) && changes[i+1].at.Equal(c.at) {
			continue // one transaction: its changes are seen together
		}
		tl.at = append(tl.at, c.at)
		tl.states = append(tl.states, cur)
		t.at = c.at
		tl.txs = append(tl.txs, t)
		t = tx{}
	}
	return tl, problems
}

// maxSeen bounds the states Seen considers; past it, it cannot refute a
// read and says it could have been seen.
const maxSeen = 1 << 16

// Seen reports whether a read of the sale sent at call and answered at ret
// could have seen want: every transaction visible for certain by call
// (tx.visible), plus any of those committed by ret that may or may not have
// been visible yet. (Visibility need not follow the commit timestamps'
// order: each transaction waits for its own flush.)
func (tl *Timeline) Seen(call, ret time.Time, want Counts) bool {
	var base Counts
	var maybe []Counts
	for _, t := range tl.txs {
		switch {
		case t.at.After(ret):
		case !t.visible.After(call):
			base = add(base, t.d)
		default:
			maybe = append(maybe, t.d)
		}
	}
	states := map[Counts]bool{base: true}
	for _, d := range maybe {
		for s := range maps.Clone(states) {
			states[add(s, d)] = true
		}
		if len(states) > maxSeen {
			return true
		}
	}
	return states[want]
}

func add(a, b Counts) Counts {
	return Counts{a.Available + b.Available, a.Pending + b.Pending, a.Confirmed + b.Confirmed, a.Expired + b.Expired, a.Cancelled + b.Cancelled}
}

// AnyIn reports whether ok holds of the state at some moment in [from, to].
func (tl *Timeline) AnyIn(from, to time.Time, ok func(Counts) bool) bool {
	// The state in force at from, then every state that starts by to.
	i := sort.Search(len(tl.at), func(i int) bool { return tl.at[i].After(from) }) - 1
	if i < 0 {
		if ok(Counts{}) {
			return true
		}
		i = 0
	}
	for ; i < len(tl.at) && !tl.at[i].After(to); i++ {
		if ok(tl.states[i]) {
			return true
		}
	}
	return false
}
