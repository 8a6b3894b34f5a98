package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/flashline/flashline"
)

// Rebuild makes a paused gated sale's counter again from the database (after
// Redis lost it, or a drift), and returns it. The counter is initial −
// pending − confirmed (in a sale with variants, each variant's counter is
// its own initial − pending − confirmed, and the sum is returned); the
// buyers and attempts are the active reservations that came through the
// gate; units handed out before the rebuild can no longer be reserved or
// given back (a new epoch). The sale stays paused: an
// admin resumes it once the view shows the gate OK.
//
// While it runs the counter is marked paused in Redis, so that neither the
// gate step nor the relay touches the old one. A rebuild that fails half way
// leaves the mark: the sale cannot be resumed until a rebuild completes, and
// running it again is safe. One rebuild of a sale runs at a time, across
// instances (GateStore.LockRebuild): another asked for meanwhile fails at
// once with ErrRebuildRunning. Should two overlap all the same (the first's
// lock went with its database session while its Redis write was in
// flight), the counter in Redis carries its epoch: the one with the earlier
// epoch cannot write over the later one's counter (it fails with
// ErrInvalidTransition, and the later counter stands), and a counter whose
// epoch is not the database's does not agree with it (check).
func (g *Gate) Rebuild(ctx context.Context, saleID string) (int64, error) {
	if g.rdb == nil {
		return 0, fmt.Errorf("rebuild the gate of sale %s: %w", saleID, errors.Join(flashline.ErrUnavailable, ErrNoRedis))
	}
	sale, err := g.store.Sale(ctx, saleID)
	if err != nil {
		return 0, err
	}
	switch {
	case sale.Gate != flashline.GateRedis:
		return 0, flashline.Invalid(fmt.Sprintf("sale %s has no gate", saleID))
	case sale.State != flashline.StatePaused:
		return 0, fmt.Errorf("rebuild the gate of sale %s (%s): pause it first: %w", saleID, sale.State, flashline.ErrInvalidTransition)
	}
	// One rebuild of a sale at a time: a second one asked for meanwhile (an
	// admin's double click, a retry after a timeout, another operator) is
	// refused and says so, rather than racing the first to Redis.
	unlock, err := g.store.LockRebuild(ctx, saleID)
	if err != nil {
		return 0, err
	}
	defer unlock()
	k := keysOf(saleID)
	rctx, cancel := context.WithTimeout(ctx, g.background())
	err = g.rdb.Set(rctx, k.paused, "rebuild", 0).Err()
	cancel()
	if err != nil {
		return 0, fmt.Errorf("rebuild the gate of sale %s: redis: %w", saleID, errors.Join(flashline.ErrUnavailable, err))
	}
	rb, err := g.store.BeginRebuild(ctx, saleID)
	if err != nil {
		return 0, err
	}
	buyers := map[string]int{}
	var order []string
	for _, h := range rb.Holds {
		if _, ok := buyers[h.CustomerID]; !ok {
			order = append(order, h.CustomerID)
		}
		buyers[h.CustomerID] += h.Quantity
	}
	// The counters: the sale's one, or each variant's own.
	counters := []any{rb.Counter}
	var skus []string
	if len(rb.Variants) > 0 {
		counters = counters[:0]
		for _, v := range rb.Variants {
			skus = append(skus, v.SKU)
			counters = append(counters, v.Units)
		}
	}
	args := append([]any{rb.Epoch, seqBase(rb.Epoch)}, counters...)
	args = append(args, len(order))
	for _, c := range order {
		args = append(args, c, buyers[c])
	}
	for _, h := range rb.Holds {
		args = append(args, attemptField(h.CustomerID, h.IdempotencyKey), strconv.FormatInt(h.Seq, 10))
	}
	res, err := g.call(ctx, g.background(), rebuildScript,
		append([]string{k.seq, k.attempts, k.buyers, k.unsettled, k.applied, k.paused, k.epoch, k.checks}, k.counters(skus)...), args...)
	if err != nil {
		return 0, fmt.Errorf("rebuild the gate of sale %s: %w", saleID, errors.Join(flashline.ErrUnavailable, err))
	}
	if r := res.([]any); r[0].(int64) == 0 {
		// Another rebuild ran at the same time and reached Redis first with
		// a later epoch, the database's: its counter stands, and this one,
		// already stale, must not replace it.
		return 0, fmt.Errorf("rebuild the gate of sale %s: another rebuild ran at the same time and wrote the counter for epoch %d, after this one's %d; it stands (check it with gate show): %w",
			saleID, r[1].(int64), rb.Epoch, flashline.ErrInvalidTransition)
	}
	g.mu.Lock()
	delete(g.drifts, saleID)
	g.mu.Unlock()
	// Verified: the counter read back agrees with the database.
	st, err := g.check(ctx, saleID)
	if err != nil {
		return 0, fmt.Errorf("rebuild the gate of sale %s: read the rebuilt counter back: %w", saleID, err)
	}
	if !st.OK {
		return 0, fmt.Errorf("rebuild the gate of sale %s: the rebuilt counter %d (read back %d) does not agree with the database, drift %d: %w",
			saleID, rb.Counter, st.Counter, st.Drift, flashline.ErrInvariantBroken)
	}
	g.opts.Logger.InfoContext(ctx, "gate: counter rebuilt", "sale_id", saleID, "epoch", rb.Epoch, "counter", rb.Counter, "holds", len(rb.Holds), "settled", rb.Settled)
	return rb.Counter, nil
}
