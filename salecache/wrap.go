package salecache

import (
	"context"
	"errors"

	"github.com/flashline/flashline"
)

// Sees is what the cache must see of the Store it wraps: every method that
// takes stock (a reservation: refused from memory first, and what the
// database said learnt at once) or returns it (memory that saw the sale sold
// out is wrong from the commit on). Wrap's store declares each of them
// itself (flashline.StockEffectOf); a test of package stack fails when one
// would pass through unseen.
const Sees = flashline.StockTaken | flashline.StockReturned

// Wrap returns store with the cache in front: Reserve asks refusals (the
// instance's one decider, which reads this cache) before the store, and what
// returns units (Cancel, Void, a payment event that cancels or voids) clears
// a sold-out sale in memory at once.
func (c *Cache) Wrap(store flashline.Store, refusals *flashline.Refusals) flashline.Store {
	return guarded{Store: store, c: c, refusals: refusals}
}

type guarded struct {
	flashline.Store
	c        *Cache
	refusals *flashline.Refusals
}

// Reserve asks the refusals again (a request may have waited for the
// admission limiter since the HTTP layer asked: a crowd queued there when
// the sale sells out is refused here, without the database), then the store.
func (g guarded) Reserve(ctx context.Context, req flashline.ReserveRequest) (flashline.ReserveResult, error) {
	if err := g.refusals.FromMemoryOf(ctx, req.SaleID, req.Variant, req.CustomerID); err != nil {
		return flashline.ReserveResult{}, err
	}
	res, err := g.Store.Reserve(ctx, req)
	if errors.Is(err, flashline.ErrSoldOut) || errors.Is(err, flashline.ErrSaleNotOpen) {
		// The database knew better than memory: learn it now rather than at
		// the notification.
		g.c.Changed(req.SaleID)
	}
	return res, err
}

// Cancel returns the units of a pending hold: memory that saw the sale sold
// out is wrong from the commit on, and the next buyer on this instance must
// reach the database rather than hear sold_out until the notification.
func (g guarded) Cancel(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	r, err := g.Store.Cancel(ctx, reservationID, by)
	if err == nil && r.State == flashline.ReservationCancelled {
		g.c.unitsBack(r.SaleID)
	}
	return r, err
}

// Void returns the units of a confirmed order; as Cancel.
func (g guarded) Void(ctx context.Context, reservationID, reason, operator string) (flashline.Reservation, error) {
	r, err := g.Store.Void(ctx, reservationID, reason, operator)
	if err == nil {
		g.c.unitsBack(r.SaleID)
	}
	return r, err
}

// ApplyPaymentEvent applies the event; one that returned units (a failed
// payment's cancel, a refund's void) clears the sale in memory, as Cancel.
func (g guarded) ApplyPaymentEvent(ctx context.Context, e flashline.PaymentEvent) (flashline.PaymentResult, error) {
	res, err := g.Store.ApplyPaymentEvent(ctx, e)
	if err == nil && res.ReturnedUnits() {
		g.c.unitsBack(res.SaleID)
	}
	return res, err
}

// unitsBack forgets that saleID is sold out, as of a commit this instance
// made that returned units to it, and reads it again. The read may race a
// read that started before the commit and lands after it; the one
// requested here follows and settles it.
func (c *Cache) unitsBack(saleID string) {
	c.mu.Lock()
	var w chan struct{}
	if e := c.sales[saleID]; e != nil && e.SoldOut {
		// Under the one lock: an entry a reload puts meanwhile is not
		// overwritten by this older one.
		back := *e
		back.SoldOut = false
		w = c.swapLocked(saleID, &back)
	}
	c.mu.Unlock()
	if w != nil {
		close(w)
	}
	c.Changed(saleID)
}
