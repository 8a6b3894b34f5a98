package stack

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
	"github.com/flashline/flashline/salecache"
)

// DB is what the stack needs of the database adapter, the authority at its
// bottom: the Store the wrappers pass through to, what the gate needs of the
// database, what the sale cache reads and the purchase queues the refusals
// peek at. cmd/flashline passes *postgres.Store.
type DB interface {
	flashline.GateStore
	flashline.FactSource
	flashline.Queues
}

// Options configure a Stack. Zero values take the defaults shown.
type Options struct {
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
	// the gate's around the DB given to New.
	Store flashline.Store
	// Cache is what this instance knows of its sales without the database
	// (the waiting room reads it, and its Now is the clock instances agree
	// on). Load warms it; Run keeps it current.
	Cache *salecache.Cache
	// Refusals decides what is refused without the database, from the
	// DB's purchase queues and the Cache's memory: the HTTP layer asks it
	// (handlers.Deps.Refusals), and Store's sale cache asks it again before
	// a reservation reaches the gate and the database.
	Refusals *flashline.Refusals
	// Gate is the Redis gate of peak sales: Run relays what is owed back to
	// its counters, the gate job (jobs.Config.Gate) looks after them, and an
	// operator rebuilds one with Rebuild.
	Gate *gate.Gate
}

// New puts the store together on db from o. It opens nothing: the adapter
// and the Redis client are the caller's, as is running the cache and the
// gate.
func New(db DB, o Options) *Stack {
	o.Cache.Logger = cmp.Or(o.Cache.Logger, o.Logger)
	o.Cache.Registry = cmp.Or(o.Cache.Registry, o.Registry)
	o.Gate.Logger = cmp.Or(o.Gate.Logger, o.Logger)
	o.Gate.Registry = cmp.Or(o.Gate.Registry, o.Registry)
	if o.Cache.Now == nil {
		o.Cache.Now = o.Now
	}
	cache := salecache.New(db, o.Cache)
	gt := gate.New(o.Redis, db, cache, o.Gate)
	refusals := flashline.NewRefusals(db, cache)
	return &Stack{Store: cache.Wrap(gt.Wrap(db), refusals), Cache: cache, Refusals: refusals, Gate: gt}
}
