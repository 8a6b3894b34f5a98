// Package stack puts the store together: the sale cache in front of the
// Redis gate in front of the PostgreSQL adapter, as the one flashline.Store
// the HTTP layer uses, and the parts the rest of an instance needs of it.
//
//	handlers → salecache (answers from memory) → gate (Redis) → postgres (the authority)
//
// Each wrapper overrides the Store methods it must see (salecache.Sees,
// gate.Sees: by their effect on stock, flashline.StockEffectOf) and passes
// the rest through; this package's test fails when a method that changes
// stock would pass a wrapper unseen.
package stack

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/salecache"
)

// Options configure a Stack. Zero values take the defaults shown.
type Options struct {
	// Pools are the adapter's connection pools (postgres.Pools).
	Pools postgres.Pools
	// Postgres tunes the adapter (its Logger defaults to Logger).
	Postgres postgres.Options
	// Redis is the gate's Redis; nil: none, and every gated sale fails
	// closed (503) on this instance.
	Redis *redis.Client
	// Cache tunes the sale cache (its Logger, Registry and Now default to
	// those below).
	Cache salecache.Options
	// Gate tunes the gate (its Logger and Registry default to those below).
	Gate gate.Options
	// Logger takes what goes wrong in the background. Default: discarded.
	Logger *slog.Logger
	// Registry takes the cache's and the gate's metrics. Default: a
	// registry of their own each.
	Registry prometheus.Registerer
	// Now is this instance's clock, which the sale cache corrects by the
	// database's (salecache.Cache.Now). Default: time.Now.
	Now func() time.Time
}

// Stack is the store put together.
type Stack struct {
	// Store is the one Store the HTTP layer uses: the cache's wrapper around
	// the gate's around DB.
	Store flashline.Store
	// DB is the adapter, the authority: for what needs more of the database
	// than a Store (the jobs, the waiting room, the operators' commands).
	DB *postgres.Store
	// Cache is what this instance knows of its sales without the database
	// (the waiting room reads it, and its Now is the clock instances agree
	// on). Load warms it; Run keeps it current.
	Cache *salecache.Cache
	// Gate is the Redis gate of peak sales: Run relays what is owed back to
	// its counters, the gate job (jobs.Config.Gate) looks after them, and an
	// operator rebuilds one with Rebuild.
	Gate *gate.Gate
}

// New puts the store together from o. It opens nothing: the pools and the
// Redis client are the caller's, as is running the cache and the gate.
func New(o Options) *Stack {
	o.Postgres.Logger = cmp.Or(o.Postgres.Logger, o.Logger)
	o.Cache.Logger = cmp.Or(o.Cache.Logger, o.Logger)
	o.Cache.Registry = cmp.Or(o.Cache.Registry, o.Registry)
	o.Gate.Logger = cmp.Or(o.Gate.Logger, o.Logger)
	o.Gate.Registry = cmp.Or(o.Gate.Registry, o.Registry)
	if o.Cache.Now == nil {
		o.Cache.Now = o.Now
	}
	db := postgres.NewStore(o.Pools, o.Postgres)
	cache := salecache.New(db, o.Cache)
	gt := gate.New(o.Redis, db, cache, o.Gate)
	return &Stack{Store: cache.Wrap(gt.Wrap(db)), DB: db, Cache: cache, Gate: gt}
}
