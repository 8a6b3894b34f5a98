// Package salecache is what each flashline instance knows about its sales
// without asking the database: which are sold out, paused, closed or not yet
// open. It lets the purchase path answer the 99% "no" — sold out, not open —
// with no database round trip (see Cache.Wrap).
//
// The database stays the authority. Triggers (migration 000002) send a
// flashline_sale_changed notification whenever a bucket runs out or gets stock
// back and whenever a sale's state changes; every instance LISTENs and re-reads
// that sale, and re-reads every sale once a second in case a notification was
// missed. A stale "available" costs one round trip (the conditional UPDATE
// then says sold out); a stale "sold out" lasts until the notification or the
// next refresh; and an entry not refreshed for StaleAfter (database
// unreachable) is not trusted at all, so the purchase path fails closed.
//
// A sale that is sold out, paused or closed still sends to the database the
// requests of customers who ever held a reservation in it: their retry must
// replay the stored answer (or say "limit reached"), which only the database
// knows.
package salecache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/reload"
	"github.com/flashline/flashline/sql/dbsqlc"
)

// Channel is the notification channel the triggers send to.
const Channel = "flashline_sale_changed"

// Options configure a Cache. Zero values take the defaults shown.
type Options struct {
	// RefreshInterval is how often every sale is re-read, as the fallback
	// for a missed notification. Default 1s.
	RefreshInterval time.Duration
	// StaleAfter is how long an entry is trusted without a successful
	// refresh. Default 5s.
	StaleAfter time.Duration
	// CustomersMaxAge is how long the customer list of a sold-out sale is
	// kept before the periodic refresh reloads it. Default 10s.
	CustomersMaxAge time.Duration
	Logger          *slog.Logger
	Registry        prometheus.Registerer
	Now             func() time.Time
}

// Cache is safe for concurrent use.
type Cache struct {
	pool *pgxpool.Pool
	opts Options

	mu    sync.RWMutex
	sales map[string]*entry

	reloader *reload.Reloader

	fastRejects *prometheus.CounterVec
}

type entry struct {
	state     string
	opensAt   *time.Time
	soldOut   bool
	refreshed time.Time
	// customers who ever held a reservation; loaded while the sale refuses.
	customers       map[string]struct{}
	customersLoaded time.Time
}

// New returns a Cache that reads through pool. Call Run to keep it current.
func New(pool *pgxpool.Pool, opts Options) *Cache {
	if opts.RefreshInterval == 0 {
		opts.RefreshInterval = time.Second
	}
	if opts.StaleAfter == 0 {
		opts.StaleAfter = 5 * time.Second
	}
	if opts.CustomersMaxAge == 0 {
		opts.CustomersMaxAge = 10 * time.Second
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
		pool:  pool,
		opts:  opts,
		sales: map[string]*entry{},
		fastRejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_fast_rejections_total",
			Help: "Reservations answered from memory, without the database, by outcome.",
		}, []string{"outcome"}),
	}
	c.reloader = &reload.Reloader{
		Name: "salecache", Pool: pool, Channels: []string{Channel}, Interval: opts.RefreshInterval, Logger: opts.Logger,
		Load: func(ctx context.Context, saleID string) error {
			if saleID == reload.All {
				return c.Load(ctx)
			}
			return c.reloadSale(ctx, saleID)
		},
	}
	opts.Registry.MustRegister(c.fastRejects, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flashline_sales_sold_out",
		Help: "Sales this instance knows to be sold out.",
	}, func() float64 {
		c.mu.RLock()
		defer c.mu.RUnlock()
		n := 0
		for _, e := range c.sales {
			if e.soldOut {
				n++
			}
		}
		return float64(n)
	}))
	return c
}

// Run keeps the cache current until ctx is done: it listens for
// notifications and refreshes periodically. Call Load first to start warm.
func (c *Cache) Run(ctx context.Context) error { return c.reloader.Run(ctx) }

// request asks for saleID (reload.All: every sale) to be read again soon.
func (c *Cache) request(saleID string) { c.reloader.Request(saleID) }

// Load reads every sale now: the pre-warm before serving.
func (c *Cache) Load(ctx context.Context) error {
	return c.load(ctx, nil, false)
}

func (c *Cache) reloadSale(ctx context.Context, saleID string) error {
	return c.load(ctx, &saleID, true)
}

// load re-reads the flags of one sale (saleID) or of all. freshCustomers forces
// the customer list of a refusing sale to be re-read: a notification means
// its stock or state changed, and with it possibly its holders.
func (c *Cache) load(ctx context.Context, saleID *string, freshCustomers bool) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	q := dbsqlc.New(c.pool)
	rows, err := q.SaleFlags(ctx, saleID)
	if err != nil {
		return fmt.Errorf("salecache: load: %w", err)
	}
	now := c.opts.Now()
	for _, r := range rows {
		e := &entry{state: r.State, opensAt: r.OpensAt, soldOut: r.MaxBucket <= 0, refreshed: now}
		c.mu.RLock()
		old := c.sales[r.SaleID]
		c.mu.RUnlock()
		if e.refuses() {
			keep := old != nil && old.refuses() && old.customers != nil &&
				!freshCustomers && now.Sub(old.customersLoaded) < c.opts.CustomersMaxAge
			if keep {
				e.customers, e.customersLoaded = old.customers, old.customersLoaded
			} else {
				ids, err := q.SaleCustomers(ctx, r.SaleID)
				if err != nil {
					return fmt.Errorf("salecache: customers of %s: %w", r.SaleID, err)
				}
				e.customers = make(map[string]struct{}, len(ids))
				for _, id := range ids {
					e.customers[id] = struct{}{}
				}
				e.customersLoaded = now
			}
		}
		c.mu.Lock()
		c.sales[r.SaleID] = e
		c.mu.Unlock()
	}
	return nil
}

// Decide answers a reservation attempt from memory when it can: ErrSoldOut or
// ErrSaleNotOpen, or nil when the database must decide.
func (c *Cache) Decide(saleID, customerID string) error {
	now := c.opts.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.sales[saleID]
	if e == nil || now.Sub(e.refreshed) > c.opts.StaleAfter {
		return nil
	}
	var refusal error
	switch {
	case e.state == flashline.StatePaused || e.state == flashline.StateClosed:
		refusal = flashline.ErrSaleNotOpen
	case e.state == flashline.StateScheduled:
		// The database's clock decides the opening; only refuse when even a
		// generous skew between the two clocks could not make it open.
		if e.opensAt == nil || e.opensAt.After(now.Add(time.Second)) {
			refusal = flashline.ErrSaleNotOpen
		}
	case e.soldOut:
		refusal = flashline.ErrSoldOut
	}
	if refusal == nil || e.customers == nil {
		return nil
	}
	if _, held := e.customers[customerID]; held {
		// A retry of theirs must replay the stored answer.
		return nil
	}
	return refusal
}

// refuses reports whether Decide may answer for the sale from memory, which
// needs the list of customers who ever held a reservation in it.
func (e *entry) refuses() bool {
	return e.soldOut || e.state != flashline.StateOpen
}

// Wrap returns store with Reserve answering from the cache first.
func (c *Cache) Wrap(store flashline.Store) flashline.Store {
	return guarded{Store: store, c: c}
}

type guarded struct {
	flashline.Store
	c *Cache
}

func (g guarded) Reserve(ctx context.Context, req flashline.ReserveRequest) (flashline.ReserveResult, error) {
	if err := g.c.Decide(req.SaleID, req.CustomerID); err != nil {
		outcome := "sold_out"
		if errors.Is(err, flashline.ErrSaleNotOpen) {
			outcome = "sale_not_open"
		}
		g.c.fastRejects.WithLabelValues(outcome).Inc()
		return flashline.ReserveResult{}, err
	}
	res, err := g.Store.Reserve(ctx, req)
	if errors.Is(err, flashline.ErrSoldOut) || errors.Is(err, flashline.ErrSaleNotOpen) {
		// The database knew better than memory: learn it now rather than at
		// the notification.
		g.c.request(req.SaleID)
	}
	return res, err
}
