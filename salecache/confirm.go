package salecache

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// A refusal from memory stands only once the database, read after the
// request arrived, still has the sale's stock at the version memory refused
// by. Memory can be behind a commit made elsewhere: units came back (a
// cancel on another instance), a customer took one on an instance that was
// killed before it answered, and their retry is here; the list of holders
// memory has does not name them, and "sold out" from memory would lose the
// answer their retry must replay. Any reservation writes the stock, so an
// unchanged version means nobody reserved since memory read the sale and
// its holders.
//
// The read is shared: one at a time per instance, at most one per
// ConfirmEvery, covering every sale with a refusal waiting, and every
// refusal that arrived before it started waits for it. A crowd told "no",
// in one sale or in a thousand, costs the database one small read every
// ConfirmEvery per instance, and one connection of the room's pool at most.

type confirmation struct {
	done     chan struct{}
	sales    map[string]struct{} // whose refusals wait for it
	versions map[string]string
	err      error
}

type confirmer struct {
	mu sync.Mutex
	// next is the read not started yet: a refusal that joins it is
	// confirmed by a read made after it arrived.
	next *confirmation
	// current is the read under way, or the last one.
	current *confirmation
	started time.Time
}

// Unchanged reports whether the database, read after this call, has the
// stock of saleID at version, the one its list of holders was read at
// (flashline.Memory). false: it changed (and the sale is read again), or it
// could not be read in time; the purchase path asks the database.
func (c *Cache) Unchanged(ctx context.Context, saleID, version string) bool {
	if ctx.Err() != nil {
		return false
	}
	k := &c.confirms
	k.mu.Lock()
	w := k.next
	if w == nil {
		w = &confirmation{done: make(chan struct{}), sales: map[string]struct{}{}}
		k.next = w
		go c.confirm(w)
	}
	w.sales[saleID] = struct{}{}
	k.mu.Unlock()
	select {
	case <-w.done:
		if w.err != nil {
			return false
		}
		if w.versions[saleID] != version {
			c.Changed(saleID)
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

// confirm starts w once the read before it is done and ConfirmEvery has
// passed since that one started, and answers everyone who joined it.
func (c *Cache) confirm(w *confirmation) {
	k := &c.confirms
	k.mu.Lock()
	prev, started := k.current, k.started
	k.mu.Unlock()
	if prev != nil {
		<-prev.done
	}
	if wait := c.opts.ConfirmEvery - time.Since(started); wait > 0 {
		time.Sleep(wait)
	}
	k.mu.Lock()
	k.next, k.current, k.started = nil, w, time.Now()
	ids := slices.Collect(maps.Keys(w.sales)) // nobody joins w from here on
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	w.versions, w.err = c.src.StockVersions(ctx, ids)
	cancel()
	if w.err != nil {
		c.confirmReads.WithLabelValues("error").Inc()
		c.opts.Logger.Warn("salecache: confirm refusals", "sales", len(ids), "err", w.err)
	} else {
		c.confirmReads.WithLabelValues("read").Inc()
	}
	close(w.done)
}
