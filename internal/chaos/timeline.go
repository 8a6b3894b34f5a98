package chaos

import (
	"fmt"
	"sort"
	"time"
)

// Timeline is the sale's units by state over time, from the database's own
// record: every change of a hold leaves a row in a table that is only ever
// inserted into (stock_ledger for reserve, cancel and expire; orders for
// confirm), and the commit timestamp of that row's transaction
// (track_commit_timestamp) is when the change became visible. What a client
// read, or was refused, can then be checked against the exact state at
// every moment of its request.
type Timeline struct {
	at     []time.Time
	states []Counts // states[i] holds from at[i] (until at[i+1])
}

// NewTimeline builds the timeline from f, and says what it could not place
// (a change whose commit time is not known).
func NewTimeline(f Facts) (*Timeline, []string) {
	type change struct {
		at time.Time
		d  Counts
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
			changes = append(changes, change{*l.Committed, d})
		}
	}
	for id, orders := range f.Orders {
		for _, o := range orders {
			if o.Committed == nil {
				problems = append(problems, fmt.Sprintf("order %s has no commit timestamp", o.ID))
				continue
			}
			changes = append(changes, change{*o.Committed, Counts{Pending: -qty[id], Confirmed: qty[id]}})
		}
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].at.Before(changes[j].at) })
	tl := &Timeline{}
	var cur Counts
	for i, c := range changes {
		cur = add(cur, c.d)
		if i+1 < len(changes) && changes[i+1].at.Equal(c.at) {
			continue // one transaction: its changes are seen together
		}
		tl.at = append(tl.at, c.at)
		tl.states = append(tl.states, cur)
	}
	return tl, problems
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
