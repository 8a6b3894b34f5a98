package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashline/flashline"
)

// measureTries is how many times a check reads a sale for a consistent view
// before it leaves the judging to the next check.
const measureTries = 3

// view is one check's reading of a gated sale: its counter in Redis, and
// the database's ledger and settlements of the units the counter has in
// flight. Consistent (measure) when nothing committed in the database while
// it was read: then every unit the counter lacks is in exactly one of a
// reservation (not available), a movement owed and not applied to the
// counter, or a unit in flight, and the drift is real. Read Redis first and
// the database later, a movement applied before the Redis read and marked
// applied after the database's (a relay's transaction stays open across its
// Redis round trips), or a unit handed out after the one read and reserved
// or returned before the other, was counted twice: a drift measured, not
// there.
type view struct {
	st      state
	ledger  flashline.GateLedger
	settled map[int64]flashline.GateSettlement
}

// owed is what the database owes the counter and the counter has not
// applied: a movement a relay applied and has not marked yet is in the
// counter already.
func (v view) owed() (units int64, moves []flashline.GateMovement) {
	for _, m := range v.ledger.OwedMovements {
		if !v.st.applied[m.ID] {
			units += int64(m.Quantity)
			moves = append(moves, m)
		}
	}
	return units, moves
}

// inflight is what the counter handed out that no reservation holds and no
// return gives back yet, by unit number.
func (v view) inflight() (units int64, seqs []int64) {
	for seq, u := range v.st.unsettled {
		if s := v.settled[seq]; !s.Reserved && !s.Returned {
			units += int64(u.quantity)
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return units, seqs
}

// terms are one counter's terms of its drift: the sale's one counter (sku
// ""), or, in a sale with variants, one variant's (its stock rows, its
// counter, the movements owed back to it, its units in flight).
type terms struct {
	sku                                string
	available, counter, owed, inflight int64
}

func (t terms) drift() int64 { return t.available - t.counter - t.owed - t.inflight }

// terms are the view's terms per counter: one for a sale without variants,
// one per variant, in order, for a sale with variants.
func (v view) terms() []terms {
	owed, moves := v.owed()
	inflight, seqs := v.inflight()
	if len(v.ledger.Variants) == 0 {
		return []terms{{available: v.ledger.Available, counter: v.st.counter, owed: owed, inflight: inflight}}
	}
	out := make([]terms, len(v.ledger.Variants))
	at := make(map[string]int, len(out))
	for i, x := range v.ledger.Variants {
		out[i] = terms{sku: x.SKU, available: x.Units, counter: v.st.counters[x.SKU]}
		at[x.SKU] = i
	}
	for _, m := range moves {
		// A movement without a variant (the version before migration
		// 000028's, which the relay sets aside) is in no variant's terms:
		// the counter it came from shows it as drift, and detail names it.
		if i, ok := at[m.Variant]; ok {
			out[i].owed += int64(m.Quantity)
		}
	}
	for _, seq := range seqs {
		u := v.st.unsettled[seq]
		if i, ok := at[u.variant]; ok {
			out[i].inflight += int64(u.quantity)
		}
	}
	return out
}

// drift is what the view's counter disagrees with the database by:
//
//	drift = available in the stock rows − counter − units owed back and not
//	        applied − units handed out and not yet held or returned
//
// In a sale with variants each variant's counter has its own, and the
// sale's is the one furthest off: the lowest when one is negative (a
// counter above the database), else the highest (0: every one agrees).
func (v view) drift() int64 {
	var worst int64
	for _, t := range v.terms() {
		d := t.drift()
		switch {
		case d < 0 && (worst >= 0 || d < worst):
			worst = d
		case d > 0 && worst >= 0 && d > worst:
			worst = d
		}
	}
	return worst
}

// streakValue is what the gate job's checks in a row compare: the drift of
// a sale without variants (as before variants), or each variant's drift
// that is not 0, "sku:drift" joined with ",", for a sale with variants ("0":
// none), so that a streak is of the same drift of the same variants.
func (v view) streakValue() any {
	if len(v.ledger.Variants) == 0 {
		return v.drift()
	}
	var parts []string
	for _, t := range v.terms() {
		if d := t.drift(); d != 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", t.sku, d))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ",")
}

// counterName names the counter that drifted in an incident: the gate's
// one, or the variants' whose drift is negative (above) or positive.
func (v view) counterName(above bool) string {
	if len(v.ledger.Variants) == 0 {
		return "the gate's counter is"
	}
	var skus []string
	for _, t := range v.terms() {
		if d := t.drift(); (above && d < 0) || (!above && d > 0) {
			skus = append(skus, t.sku)
		}
	}
	if len(skus) == 1 {
		return "the gate's counter of variant " + skus[0] + " is"
	}
	return "the gate's counters of variants " + strings.Join(skus, ", ") + " are"
}

// detailEntries bounds the movements and units an incident lists.
const detailEntries = 20

// detail says what a drift was made of, each movement and unit counted, so
// that an incident explains itself.
func (v view) detail() string {
	owed, moves := v.owed()
	inflight, seqs := v.inflight()
	var b strings.Builder
	if len(v.ledger.Variants) == 0 {
		fmt.Fprintf(&b, "drift %d: available %d − counter %d − owed back %d − in flight %d; epoch %d (counter's %d)",
			v.drift(), v.ledger.Available, v.st.counter, owed, inflight, v.ledger.Epoch, v.st.epoch)
	} else {
		// Each variant that drifted, by its own counter's terms.
		for _, t := range v.terms() {
			if t.drift() != 0 {
				fmt.Fprintf(&b, "variant %s: drift %d: available %d − counter %d − owed back %d − in flight %d; ",
					t.sku, t.drift(), t.available, t.counter, t.owed, t.inflight)
			}
		}
		fmt.Fprintf(&b, "epoch %d (counters' %d)", v.ledger.Epoch, v.st.epoch)
	}
	b.WriteString("; owed back:")
	for i, m := range moves {
		if i == detailEntries {
			fmt.Fprintf(&b, " and %d more", len(moves)-i)
			break
		}
		fmt.Fprintf(&b, " %s ×%d", m.ID, m.Quantity)
		switch {
		case m.Variant != "":
			fmt.Fprintf(&b, " (%s)", m.Variant)
		case len(v.ledger.Variants) > 0:
			// Owed to no counter of the sale's (the relay sets it aside):
			// in no variant's terms, so the drift of the one it came from
			// shows it, and this names it.
			b.WriteString(" (no variant: set aside by the relay)")
		}
	}
	if len(moves) == 0 {
		b.WriteString(" none")
	}
	if n := len(v.ledger.OwedMovements) - len(moves); n > 0 {
		fmt.Fprintf(&b, " (and %d applied by a relay, not marked yet)", n)
	}
	b.WriteString("; in flight:")
	for i, seq := range seqs {
		if i == detailEntries {
			fmt.Fprintf(&b, " and %d more", len(seqs)-i)
			break
		}
		u := v.st.unsettled[seq]
		fmt.Fprintf(&b, " unit %d of %s ×%d (%s ago)", seq, u.customer, u.quantity, time.Since(u.at).Round(time.Second))
		if u.variant != "" {
			fmt.Fprintf(&b, " (%s)", u.variant)
		}
	}
	if len(seqs) == 0 {
		b.WriteString(" none")
	}
	return b.String()
}
