package gate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/flashline/flashline"
)

// relayBatch is how many movements one relay transaction takes.
const relayBatch = 200

// Relay applies every movement owed to gate counters (returns and
// restocks, gate_outbox), until none is left but those of counters that
// cannot take them now (missing or being rebuilt: they stay owed, and a
// rebuild settles them). The gate job runs it every second, and Kick runs it
// at once after this instance wrote one. It reports how many it applied.
func (g *Gate) Relay(ctx context.Context) (int, error) {
	r := relayRun{g: g, skip: map[string]bool{}, aside: map[string]bool{}}
	for {
		skip := make([]string, 0, len(r.skip))
		for id := range r.skip {
			skip = append(skip, id)
		}
		aside := make([]string, 0, len(r.aside))
		for id := range r.aside {
			aside = append(aside, id)
		}
		taken, err := g.store.RelayOwed(ctx, relayBatch, skip, aside, r.apply)
		if err != nil || taken < relayBatch {
			return r.applied, err
		}
	}
}

// relayRun is one Relay: the sales whose counter could not take a movement
// are skipped for the rest of it, and the movements set aside (aside) are
// not taken again.
type relayRun struct {
	g       *Gate
	skip    map[string]bool
	aside   map[string]bool
	applied int
}

// apply applies movements to their counters, each once, and returns the ids
// applied (now or before).
func (r *relayRun) apply(ctx context.Context, moves []flashline.GateMovement) ([]string, error) {
	var applied []string
	for _, m := range moves {
		if r.skip[m.SaleID] {
			continue
		}
		if m.HasVariants && m.Variant == "" {
			// Owed to no counter the sale has (written without a variant by
			// the version before migration 000028, and not resolved when
			// read): set aside, stays owed and is reported, and the sale's
			// other movements go on.
			r.aside[m.ID] = true
			r.g.setAside(ctx, m)
			continue
		}
		k := keysOf(m.SaleID)
		// To the counter the unit came from: its variant's, in a sale with
		// variants.
		res, err := r.g.call(ctx, r.g.background(), applyScript, []string{k.counter(m.Variant), k.buyers, k.unsettled, k.applied, k.paused},
			m.ID, m.CustomerID, m.Quantity, strconv.FormatInt(m.Seq, 10))
		if err != nil {
			return applied, err
		}
		switch res.(int64) {
		case 1:
			r.g.m.relayed.Inc()
			r.applied++
			applied = append(applied, m.ID)
		case 0: // applied before: the relay that did died before marking it
			applied = append(applied, m.ID)
		default:
			r.skip[m.SaleID] = true
		}
	}
	return applied, nil
}

// setAside reports a movement the relay cannot apply, once per instance
// (the relay takes it again every run until an operator settles it: a
// rebuild of the sale's counters does). It pauses nothing: the sale's
// other movements are relayed, and the drift names it (view.detail).
func (g *Gate) setAside(ctx context.Context, m flashline.GateMovement) {
	if _, seen := g.asideReported.LoadOrStore(m.ID, true); seen {
		return
	}
	g.incident(ctx, m.SaleID, "gate_movement_set_aside", fmt.Sprintf(
		"movement %s ×%d is owed to no counter: the sale has variants and it names none (written by an instance of the version before migration 000028); the relay sets it aside, and a rebuild of the sale's counters settles it",
		m.ID, m.Quantity), false)
}

// Kick asks Run to relay now.
func (g *Gate) Kick() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Run relays whenever Kick asks, until ctx is done.
func (g *Gate) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.kick:
		}
		if g.rdb == nil {
			continue
		}
		if _, err := g.Relay(ctx); err != nil && ctx.Err() == nil {
			g.opts.Logger.WarnContext(ctx, "gate: relay", "err", err)
		}
	}
}
