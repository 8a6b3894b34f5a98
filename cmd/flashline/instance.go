package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/jobs"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/migrations"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/salecache"
	"github.com/flashline/flashline/stack"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
	"github.com/flashline/flashline/webhook"
)

// instance is one serve process as it is put together: what serve decided
// from the configuration (the secrets' verifiers, the admission limiter),
// then what start builds, part by part.
type instance struct {
	cfg     serveConfig
	conns   budget
	logger  *slog.Logger
	stdout  io.Writer
	running *parts

	verifier      *auth.Verifier
	keyring       *roomtoken.Keyring
	payments      *webhook.Verifier
	paymentSecret string
	stripe        *webhook.Verifier
	adyen         *webhook.AdyenVerifier
	limiter       *loadshed.Limiter

	pools         postgres.Pools
	riverPool     *pgxpool.Pool
	registry      *prometheus.Registry
	batchSizes    prometheus.Histogram
	queueFull     prometheus.Counter
	rdb           *redis.Client
	db            *postgres.Store // the adapter: the stack's bottom, and the jobs', the room's, the console's
	stack         *stack.Stack
	river         *river.Client[pgx.Tx]
	riverUI       *riverui.Handler
	room          *waitroom.Room
	ln, metricsLn net.Listener
}

// start starts the instance's parts in order, each recorded in running as
// soon as it runs, so that whatever started is stopped (last first) however
// serve ends.
func (in *instance) start(ctx context.Context) error {
	for _, part := range []func(context.Context) error{
		in.migrate,     // the schema, on a pool of its own, closed again
		in.openPools,   // one per role, within the budget
		in.openMetrics, // the registry and the pools' gauges
		in.openStore,   // Redis, then the store stack: cache, gate, database
		in.openRiver,   // River's client and its UI (not started yet)
		in.openRoom,    // the sale cache loaded, the room, the background loops
		in.listen,      // both listeners, before anything is served
		in.startRiver,  // River's workers
		in.startHTTP,   // the API
		in.printDemo,   // --demo's sale and how to buy from it
	} {
		if err := part(ctx); err != nil {
			return err
		}
	}
	return nil
}

// migrate brings the schema up first, on a pool of its own closed before the
// others open: it holds a lock on one connection while golang-migrate and
// River's migrator use others, and counts in the instance's budget.
func (in *instance) migrate(ctx context.Context) error {
	if in.cfg.noMigrate {
		return nil
	}
	return migrate(ctx, in.cfg.directURL, min(4, in.conns.total))
}

// openPools opens separate pools, each sized explicitly (the budget's
// split), so that one cannot starve another: a flood of buyers holds at
// most the sale pool. What needs a session of its own is on the direct URL;
// the rest may go through a pooler in transaction mode. The session pool
// opens first, and with it the check of the server's connection slots.
func (in *instance) openPools(ctx context.Context) error {
	cfg, conns := in.cfg, in.conns
	pooler := cfg.directURL != cfg.databaseURL
	var err error
	open := func(url, name string, size, minConns int) *pgxpool.Pool {
		if err != nil {
			return nil
		}
		var pool *pgxpool.Pool
		pool, err = postgres.NewPool(ctx, url, name, postgres.PoolOptions{MaxConns: int32(size), MinConns: int32(minConns),
			Pooler: pooler && url == cfg.databaseURL})
		if err == nil {
			in.running.addClose(name+" pool", pool.Close)
		}
		return pool
	}
	p := &in.pools
	if p.Session = open(cfg.directURL, "session", conns.session, 0); err != nil {
		return err
	}
	if c, err := postgres.ServerConnections(ctx, p.Session); err != nil {
		in.logger.Warn("flashline: cannot read the database's connection slots", "err", err)
	} else {
		checkServer(ctx, in.logger, c, conns, pooler)
	}
	in.riverPool = open(cfg.directURL, "river", conns.river, 0)
	p.Admin = open(cfg.databaseURL, "admin", conns.admin, 1)
	// MinConns pre-warms the purchase path: the first buyers pay no handshake.
	p.Sale = open(cfg.databaseURL, "sale", conns.sale, min(conns.sale, 4))
	p.Room = open(cfg.databaseURL, "room", conns.room, 1)
	// The jobs' statements name themselves (flashline-jobs) in
	// pg_stat_activity and stock_audit, and never hold an admin connection.
	p.Jobs = open(cfg.databaseURL, "jobs", conns.jobs, 0)
	return err
}

// openMetrics makes the registry /metrics serves, with the purchase path's
// batch metrics, the process's, every pool's and the server's connections.
func (in *instance) openMetrics(context.Context) error {
	in.registry = prometheus.NewRegistry()
	in.batchSizes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "flashline_reserve_batch_size",
		Help:    "Reservations coalesced into one purchase-path transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})
	in.queueFull = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flashline_reserve_queue_full_total",
		Help: "Reservations refused overloaded because their sale's batches were full (the per-sale queue bound).",
	})
	p := in.pools
	in.registry.MustRegister(in.batchSizes, in.queueFull,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newConnectionsCollector(p.Admin, in.conns))
	in.registry.MustRegister(verifierMetrics(in.verifier)...)
	registerPoolMetrics(in.registry, map[string]*pgxpool.Pool{"sale": p.Sale, "admin": p.Admin, "room": p.Room,
		"river": in.riverPool, "jobs": p.Jobs, "session": p.Session})
	return nil
}

// openStore connects to the Redis of peak sales (a gated sale fails closed,
// 503, on an instance without Redis or whose Redis does not answer; this
// one still serves every other sale) and builds the store: the sale cache in
// front of the gate in front of the database, the one Store the handlers
// use.
func (in *instance) openStore(ctx context.Context) error {
	rdb, err := newRedis(in.cfg.redisURL)
	if err != nil {
		return err
	}
	if rdb != nil {
		in.rdb = rdb
		in.running.addClose("redis client", func() { rdb.Close() })
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := rdb.Ping(pingCtx).Err(); err != nil {
			in.logger.Warn("flashline: Redis does not answer; gated sales fail closed until it does", "err", err)
		}
		cancel()
	}
	queueRounds := 0
	if !in.cfg.noShed {
		queueRounds = postgres.DefaultQueueRounds
	}
	in.db = postgres.NewStore(in.pools, postgres.Options{
		MaxBatch: in.cfg.maxBatch, BatchesInFlight: in.cfg.batchesInFlight, QueueRounds: queueRounds,
		OnConnWait:  in.limiter.ObserveWait,
		OnBatch:     func(n int) { in.batchSizes.Observe(float64(n)) },
		OnQueueFull: in.queueFull.Inc,
		Beacon:      in.cfg.beacon,
		Logger:      in.logger,
	})
	in.stack = stack.New(in.db, stack.Options{Redis: rdb, Logger: in.logger, Registry: in.registry, Now: now(in.cfg)})
	return nil
}

// openRiver makes River's client (an insert-only one with --no-workers:
// enough for its UI) and the UI's handler.
func (in *instance) openRiver(context.Context) error {
	var err error
	if in.cfg.noWorkers {
		in.river, err = river.NewClient(riverpgxv5.New(in.riverPool), &river.Config{Logger: riverLogger(in.logger)})
	} else {
		// River reports routine progress at info level every few seconds;
		// its warnings and errors are what an operator needs.
		cfg := in.cfg.jobs
		cfg.Logger, cfg.Registry, cfg.Gate = riverLogger(in.logger), in.registry, in.stack.Gate
		in.river, err = jobs.NewClient(in.riverPool, in.db, cfg)
	}
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	in.riverUI, err = riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(in.river, nil),
		Logger:    in.logger,
		Prefix:    "/admin/riverui",
	})
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}
	return nil
}

// openRoom loads what this instance knows of its sales without the
// database, for the purchase path (sold out, not open) and the waiting room
// (every status poll), kept current by the database's change notifications;
// loaded before serving, so a sale about to open is warm. The waiting
// room's pacer: one instance leads it at a time. Then the background loops,
// which run until the service stops, and stop before the pools close (the
// pacer's leader hands its lock over).
//
// Times that instances compare (an opening, a ticket's or an admission
// token's expiry) are judged by the database's clock as the cache estimates
// it, not by this machine's, which may be off: a token minted on one
// instance and checked on another then lives its 120 s.
func (in *instance) openRoom(ctx context.Context) error {
	cache := in.stack.Cache
	in.keyring = in.keyring.WithClock(cache.Now)
	in.room = waitroom.NewRoom(cache, in.db, in.keyring, in.limiter, waitroom.Options{Logger: in.logger, Registry: in.registry,
		Now: cache.Now, Batch: in.cfg.maxBatch * in.cfg.batchesInFlight})
	if err := in.warm(ctx, cache); err != nil {
		return err
	}
	in.running.startLoops(map[string]func(context.Context) error{
		"sale cache": cache.Run, "pacer": in.room.RunPacer, "room counts": in.room.RunCounts, "gate": in.stack.Gate.Run,
	})
	return nil
}

// warm is the sale cache's first read, before serving. A database too busy
// to answer it within the read's bound (a loaded machine's start:
// fresh-clone run 34's "salecache: load: sale facts: overloaded") is asked
// again, each failure logged, until serve is stopped: an instance that
// exited over it would only be restarted into the same wait.
func (in *instance) warm(ctx context.Context, cache *salecache.Cache) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := cache.Load(ctx)
		if err == nil || ctx.Err() != nil || !(errors.Is(err, flashline.ErrOverloaded) ||
			errors.Is(err, flashline.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		in.logger.WarnContext(ctx, "flashline: the sale cache's first read failed; asking again", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// listen opens the listeners first, so that a bad address fails at once.
func (in *instance) listen(context.Context) error {
	var err error
	if in.ln, in.metricsLn, err = listen(in.cfg); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w: another process listens there; choose another address with --addr or FLASHLINE_ADDR (--metrics-addr or FLASHLINE_METRICS_ADDR for /metrics), for example FLASHLINE_ADDR=127.0.0.1:8081 make run", err)
		}
		return err
	}
	in.running.addClose("listeners", func() { in.ln.Close(); closeIf(in.metricsLn) })
	return nil
}

// startRiver starts River's workers (unless --no-workers) and its UI.
// River must not be stopped by the signal's cancellation (that is a hard
// stop): it is stopped in turn, after the HTTP server has drained. Its start
// asks the database: a signal meanwhile is not kept waiting for a database
// that does not answer.
func (in *instance) startRiver(ctx context.Context) error {
	if !in.cfg.noWorkers {
		started := make(chan error, 1)
		go func() { started <- in.river.Start(context.WithoutCancel(ctx)) }()
		in.running.add("river", func(ctx context.Context) error { return in.river.Stop(ctx) })
		select {
		case err := <-started:
			if err != nil {
				return fmt.Errorf("start river: %w", err)
			}
		case <-ctx.Done():
			return fmt.Errorf("start river: %w", ctx.Err())
		}
	}
	uiCtx, stopUI := context.WithCancel(context.WithoutCancel(ctx))
	if err := in.riverUI.Start(uiCtx); err != nil {
		stopUI()
		return fmt.Errorf("start river ui: %w", err)
	}
	in.running.addClose("river ui", stopUI)
	return nil
}

// startHTTP serves the API (handlers.Routes) on the listener, and the
// private mux on --metrics-addr's.
func (in *instance) startHTTP(context.Context) error {
	draining := make(chan struct{})
	// The console's live page shows the fleet's answers: each instance
	// reports its own to the shared table once a second while they change.
	name := handlers.InstanceName()
	// And its counts of the waiting rooms' lines (the queue's analytics).
	in.running.startLoops(map[string]func(context.Context) error{"console answers": func(ctx context.Context) error {
		return handlers.RunPublisher(ctx, in.db, in.registry, name, in.logger)
	}, "console lines": func(ctx context.Context) error {
		return in.room.RunQueuePublisher(ctx, in.db, name, in.logger)
	}})
	srv := newHTTPServer(handlers.Routes(handlers.Deps{
		Store:            in.stack.Store,
		Refusals:         in.stack.Refusals,
		Verifier:         in.verifier,
		Limiter:          in.limiter,
		Logger:           in.logger,
		Ready:            readiness(in.pools.Admin),
		Registry:         in.registry,
		RiverUI:          in.riverUI,
		Room:             in.room,
		Keyring:          in.keyring,
		CustomerInFlight: in.cfg.customerInFlight,
		InFlightPerAddr:  in.cfg.maxConnsPerAddr,
		TrustedProxies:   in.cfg.trustedProxies,
		MaxStreams:       in.cfg.maxStreams,
		Draining:         draining,
		Payments:         in.payments,
		Stripe:           in.stripe,
		Adyen:            in.adyen,
		Gate:             in.stack.Gate,
		Console:          in.db,
		Instance:         name,
		Sessions:         in.db,
		Now:              in.stack.Cache.Now,
	}))
	srv.RegisterOnShutdown(func() { close(draining) })
	startHTTP(in.running, in.logger, srv, in.ln, in.metricsLn, in.registry, in.cfg.pprof)
	in.logger.Info("flashline: listening", "url", publicURL(in.ln.Addr()), "role", in.cfg.role, "workers", !in.cfg.noWorkers, "redis", in.rdb != nil)
	return nil
}

// printDemo makes --demo's sale and prints how to buy from it; a failure is
// a warning, not a reason to stop serving.
func (in *instance) printDemo(ctx context.Context) error {
	if !in.cfg.demo {
		return nil
	}
	if err := printDemo(ctx, in.db, in.cfg, in.paymentSecret, publicURL(in.ln.Addr()), in.stdout); err != nil {
		in.logger.Warn("flashline: demo sale", "err", err)
	}
	return nil
}

// riverLogger passes on River's warnings and errors, and Flashline's own job
// messages ("jobs: ...", logged through the same logger) at every level.
func riverLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(minLevel{Handler: logger.Handler(), min: slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.min && !strings.HasPrefix(r.Message, "jobs: ") {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h minLevel) Enabled(context.Context, slog.Level) bool { return true }

func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(a), min: h.min}
}

func (h minLevel) WithGroup(g string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(g), min: h.min}
}

// migrate brings the schema up on a pool of its own, closed afterwards:
// migrating holds a lock on one connection while golang-migrate and River's
// migrator use others, more than a small admin pool may have. Its
// connections may take as long to open as the pool's first ping waits (10
// s): nobody waits on a start, and a database slow to accept (a busy one at
// a rollout) should delay it, not fail it.
func migrate(ctx context.Context, databaseURL string, conns int) error {
	pool, err := postgres.NewPool(ctx, databaseURL, "migrate", postgres.PoolOptions{MaxConns: int32(conns)})
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrations.Up(ctx, pool)
}

// readiness reports whether the database answers and the schema is the one
// this binary expects. The schema check is cached briefly: it reads two tables
// and need not run on every probe.
func readiness(pool *pgxpool.Pool) func(context.Context) error {
	var (
		mu        sync.Mutex
		checkedAt time.Time
		current   bool
	)
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			return fmt.Errorf("database unreachable: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if time.Since(checkedAt) > 10*time.Second {
			st, err := migrations.GetStatus(ctx, pool)
			if err != nil {
				return fmt.Errorf("migration status: %w", err)
			}
			current, checkedAt = st.Current(), time.Now()
		}
		if !current {
			return errors.New("migrations are not current: run 'flashline migrate up'")
		}
		return nil
	}
}

func registerPoolMetrics(reg prometheus.Registerer, pools map[string]*pgxpool.Pool) {
	for name, pool := range pools {
		labels := prometheus.Labels{"pool": name}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashline_pool_acquired_conns", Help: "Connections in use.", ConstLabels: labels},
				func() float64 { return float64(pool.Stat().AcquiredConns()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashline_pool_max_conns", Help: "Pool size.", ConstLabels: labels},
				func() float64 { return float64(pool.Stat().MaxConns()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashline_pool_empty_acquire_total", Help: "Acquires that had to wait for a connection.", ConstLabels: labels},
				func() float64 { return float64(pool.Stat().EmptyAcquireCount()) }),
		)
	}
}
