package salecache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/flashline/flashline"
)

// Options configure a Cache. Zero values take the defaults shown.
type Options struct {
	// RefreshInterval is how often every sale is re-read, as the fallback
	// for a missed notification. Default 1s.
	RefreshInterval time.Duration
	// StaleAfter is how long an entry is trusted without a successful
	// read. Default 3s.
	StaleAfter time.Duration
	// CustomersMaxAge is how long the customer list of a refusing sale is
	// kept before the periodic refresh reloads it. Default 10s.
	CustomersMaxAge time.Duration
	// ConfirmEvery is the least time between two reads that confirm
	// refusals from memory (confirm.go). Default 10ms.
	ConfirmEvery time.Duration
	Logger       *slog.Logger
	Registry     prometheus.Registerer
	Now          func() time.Time
}

// Cache is safe for concurrent use.
type Cache struct {
	src  flashline.FactSource
	opts Options

	mu    sync.RWMutex
	sales map[string]*entry // replaced whole on every read, never changed
	// watches are closed, and forgotten, when what a waiter of their sale
	// is told changes (Watch).
	watches map[string]chan struct{}

	reads   singleflight.Group // on-demand reads under way, by sale
	reloads reloader
	// readSeq numbers the reads in the order they start. Reads run at once
	// (the reloader's, and a request's for a stale or missing sale) and
	// can land in any order; what a read that started later saw is never
	// replaced by what one that started before it saw (see put).
	readSeq atomic.Uint64
	// offset is the database's clock minus this instance's (Options.Now),
	// in nanoseconds, as of the latest-started read that returned a sale
	// (offsetSeq, under offsetMu for writers).
	offset    atomic.Int64
	offsetMu  sync.Mutex
	offsetSeq uint64

	confirms confirmer // the reads that confirm refusals (confirm.go)

	fastRejects  *prometheus.CounterVec
	confirmReads *prometheus.CounterVec
	// The two children of fastRejects, looked up once.
	rejectedSoldOut, rejectedNotOpen prometheus.Counter
}

type entry struct {
	flashline.SaleFacts
	loaded time.Time
	seq    uint64 // the read's, in the order reads started (Cache.readSeq)
	// customers who ever held a reservation; loaded while the sale refuses,
	// after a read that saw the stock at customersVersion.
	customers        map[string]struct{}
	customersLoaded  time.Time
	customersVersion string
}

// refuses reports whether the purchase path may refuse the sale (or one of
// its variants) from memory, which needs the list of customers who ever
// held a reservation in it.
func (e *entry) refuses() bool {
	if e.SoldOut || e.State != flashline.StateOpen {
		return true
	}
	for _, v := range e.Variants {
		if v.Available <= 0 {
			return true
		}
	}
	return false
}

// New returns a Cache that reads from src. Call Load to start warm and Run
// to keep it current.
func New(src flashline.FactSource, opts Options) *Cache {
	if opts.RefreshInterval == 0 {
		opts.RefreshInterval = time.Second
	}
	if opts.StaleAfter == 0 {
		opts.StaleAfter = 3 * time.Second
	}
	if opts.CustomersMaxAge == 0 {
		opts.CustomersMaxAge = 10 * time.Second
	}
	if opts.ConfirmEvery == 0 {
		opts.ConfirmEvery = 10 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Cache{
		src:   src,
		opts:  opts,
		sales: map[string]*entry{},
		confirmReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_refusal_confirmations_total",
			Help: "Reads of a sale's stock version that confirmed the refusals from memory waiting for them, by outcome (read, error).",
		}, []string{"outcome"}),
		fastRejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_fast_rejections_total",
			Help: "Reservations answered from memory, without the database, by outcome.",
		}, []string{"outcome"}),
	}
	c.rejectedSoldOut = c.fastRejects.WithLabelValues("sold_out")
	c.rejectedNotOpen = c.fastRejects.WithLabelValues("sale_not_open")
	c.reloads = reloader{load: c.reload, logger: opts.Logger}
	opts.Registry.MustRegister(c.fastRejects, c.confirmReads, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flashline_sales_sold_out",
		Help: "Sales this instance knows to be sold out.",
	}, func() float64 {
		n := 0
		for _, s := range c.Sales() {
			if s.SoldOut {
				n++
			}
		}
		return float64(n)
	}))
	return c
}

// Run keeps the cache current until ctx is done: it listens for changes and
// re-reads every sale every RefreshInterval. Call Load first to start warm.
func (c *Cache) Run(ctx context.Context) error {
	return c.reloads.run(ctx, c.opts.RefreshInterval, c.src.Listen)
}

// Load reads every sale now: the pre-warm before serving.
func (c *Cache) Load(ctx context.Context) error { return c.load(ctx, "", false) }

// reload re-reads saleID ("": every sale), and the customer list of a
// refusing sale named in a notification: its stock or state changed, and
// with it possibly its holders.
func (c *Cache) reload(ctx context.Context, saleID string) error {
	return c.load(ctx, saleID, saleID != "")
}

func (c *Cache) load(ctx context.Context, saleID string, freshCustomers bool) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	seq := c.readSeq.Add(1)
	rows, err := c.src.SaleFacts(ctx, saleID)
	if err != nil {
		return fmt.Errorf("salecache: load: %w", err)
	}
	now := c.opts.Now()
	if len(rows) > 0 && !rows[0].DBNow.IsZero() {
		// Off by at most the read's duration: the database's clock is
		// read during it, this instance's just after.
		c.setOffset(seq, rows[0].DBNow.Sub(now))
	}
	for _, s := range rows {
		e := &entry{SaleFacts: s, loaded: now, seq: seq}
		old := c.entry(s.ID)
		if old != nil && old.Room.AdmittedThrough > e.Room.AdmittedThrough {
			// A read that started before a newer one finished must not
			// move the watermark back in memory.
			e.Room.AdmittedThrough, e.Room.PreopenCount, e.Room.PreopenPositions = old.Room.AdmittedThrough, old.Room.PreopenCount, old.Room.PreopenPositions
			e.Room.FinalSeed = old.Room.FinalSeed
		}
		if e.refuses() {
			// The list of holders is kept while the stock has not moved since
			// it was read: a sale seen sold out twice may have had units come
			// back and taken in between (a notification missed), and a
			// customer who took one must reach the database, where a retry
			// replays its answer, not hear sold_out from memory.
			if old != nil && old.refuses() && old.customers != nil && !freshCustomers &&
				old.customersVersion == e.StockVersion &&
				now.Sub(old.customersLoaded) < c.opts.CustomersMaxAge {
				e.customers, e.customersLoaded, e.customersVersion = old.customers, old.customersLoaded, old.customersVersion
			} else if err := c.loadCustomers(ctx, e, now); err != nil {
				return err
			}
		}
		c.put(s.ID, e)
	}
	if saleID == "" {
		// Sales the periodic read no longer covers (closed a day ago) are
		// forgotten after a minute; asking again reads them again.
		c.mu.Lock()
		for id, e := range c.sales {
			if now.Sub(e.loaded) > time.Minute {
				delete(c.sales, id)
			}
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *Cache) loadCustomers(ctx context.Context, e *entry, now time.Time) error {
	ids, err := c.src.SaleCustomers(ctx, e.ID)
	if err != nil {
		return fmt.Errorf("salecache: customers of %s: %w", e.ID, err)
	}
	e.customers = make(map[string]struct{}, len(ids))
	for _, id := range ids {
		e.customers[id] = struct{}{}
	}
	e.customersLoaded, e.customersVersion = now, e.StockVersion
	return nil
}

func (c *Cache) entry(saleID string) *entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.sales[saleID]
}

func (c *Cache) fresh(e *entry) bool {
	return e != nil && c.opts.Now().Sub(e.loaded) <= c.opts.StaleAfter
}

// Now is the database's clock as this instance estimates it: its own clock
// (Options.Now) corrected by the offset seen at the last read (until the
// first read, its own). The opening judgment here, and the waiting room's
// tickets and admission tokens, and the reserve path's admission check (all
// wired to it by serve), compare times by it, so that instances whose clocks
// disagree still agree with each other and with the database, which decides
// openings (opens_at <= now()) and expiry.
func (c *Cache) Now() time.Time {
	return c.opts.Now().Add(time.Duration(c.offset.Load()))
}

// Sales is every sale in memory now, fresh or not.
func (c *Cache) Sales() []flashline.SaleFacts {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]flashline.SaleFacts, 0, len(c.sales))
	for _, e := range c.sales {
		out = append(out, e.SaleFacts)
	}
	return out
}

// Sale returns what the cache knows of saleID, reading it first when it is
// missing or stale (one read per sale at a time, however many ask). fresh is
// false when the read failed and only a stale entry is left. ErrNotFound:
// the database has no such sale (nothing is kept of it: ids are the client's
// to choose, and a cache of what does not exist would be theirs to fill);
// ErrUnavailable: nothing is known and the database cannot be read (or ctx's
// deadline ran out first); ctx's cancellation (flashline.ClientGone) as it is.
func (c *Cache) Sale(ctx context.Context, saleID string) (s flashline.SaleFacts, fresh bool, err error) {
	if s, ok := c.Fresh(saleID); ok {
		return s, true, nil
	}
	read := c.reads.DoChan(saleID, func() (any, error) {
		// Detached from the first caller, whom others may be waiting
		// behind; load bounds itself.
		err := c.load(context.WithoutCancel(ctx), saleID, false)
		if err != nil {
			c.opts.Logger.WarnContext(ctx, "salecache: read sale", "sale_id", saleID, "err", err)
		}
		if e := c.entry(saleID); e != nil {
			return e, nil // fresh, or stale when the read failed
		}
		if err != nil {
			return nil, errors.Join(flashline.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("sale %s: %w", saleID, flashline.ErrNotFound)
	})
	select {
	case res := <-read:
		if res.Err != nil {
			return flashline.SaleFacts{}, false, res.Err
		}
		e := res.Val.(*entry)
		return e.SaleFacts, c.fresh(e), nil
	case <-ctx.Done():
		// A caller whose client went away gets the cancellation, not "cannot
		// be read": the read goes on for the others.
		return flashline.SaleFacts{}, false, flashline.Unavailable(ctx, ctx.Err())
	}
}

// Fresh returns what memory knows of saleID when it is fresh, and never
// reads: for answers that must cost no more than memory (the front door's
// status poll). ok false: Sale decides.
func (c *Cache) Fresh(saleID string) (s flashline.SaleFacts, ok bool) {
	if e := c.entry(saleID); c.fresh(e) {
		return e.SaleFacts, true
	}
	return flashline.SaleFacts{}, false
}

// Recall is what memory knows of saleID for customerID's reservation
// (flashline.Memory): ok false when the entry is missing or stale.
func (c *Cache) Recall(saleID, customerID string) (r flashline.Recollection, ok bool) {
	e := c.entry(saleID)
	if !c.fresh(e) {
		return r, false
	}
	r = flashline.Recollection{State: e.State, OpensAt: e.OpensAt, SoldOut: e.SoldOut,
		HoldersKnown: e.customers != nil, Version: e.customersVersion, Variants: e.Variants}
	if r.HoldersKnown {
		_, r.Held = e.customers[customerID]
	}
	return r, true
}

// Refused counts a refusal from memory in flashline_fast_rejections_total
// (flashline.Memory).
func (c *Cache) Refused(err error) {
	if errors.Is(err, flashline.ErrSaleNotOpen) {
		c.rejectedNotOpen.Inc()
	} else {
		c.rejectedSoldOut.Inc()
	}
}

// Changed asks for saleID to be read again soon: the caller learned that
// memory is behind (the database said sold out or not open).
func (c *Cache) Changed(saleID string) { c.reloads.request(saleID) }

// setOffset takes the database's clock minus this instance's as the read
// numbered seq measured it, unless a read that started later has already
// set it: the clock estimated from an older read would run behind (a
// sale's open judged by it could be undone for a moment).
func (c *Cache) setOffset(seq uint64, d time.Duration) {
	c.offsetMu.Lock()
	defer c.offsetMu.Unlock()
	if seq > c.offsetSeq {
		c.offsetSeq = seq
		c.offset.Store(int64(d))
	}
}

// put makes e, the product of a read, saleID's entry, and closes the sale's
// watch when what a waiter is told changed with it, unless the entry held
// comes from a read that started after e's: a read that started before a
// change committed and lands after one that saw it would otherwise take the
// change back (a sale seen open, then scheduled again until the next read).
func (c *Cache) put(saleID string, e *entry) {
	c.mu.Lock()
	if old := c.sales[saleID]; old != nil && old.seq > e.seq {
		c.mu.Unlock()
		return
	}
	w := c.swapLocked(saleID, e)
	c.mu.Unlock()
	if w != nil {
		close(w)
	}
}

// swapLocked makes e saleID's entry and returns the sale's watch to close
// (after c.mu is released) when what a waiter is told changed with it, else
// nil. c.mu is held.
func (c *Cache) swapLocked(saleID string, e *entry) chan struct{} {
	old := c.sales[saleID]
	c.sales[saleID] = e
	if old == nil || waitersSee(old.SaleFacts) != waitersSee(e.SaleFacts) {
		w := c.watches[saleID]
		delete(c.watches, saleID)
		return w
	}
	return nil
}
