package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"golang.org/x/net/netutil"
	"riverqueue.com/riverui"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/gate"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/jobs"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/migrations"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/salecache"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/webhook"
)

type serveConfig struct {
	addr, metricsAddr, databaseURL string
	// directURL is what needs a session of its own (LISTEN, River, the
	// pacer's advisory lock, migrations): databaseURL unless set, which
	// then may be a pooler in transaction mode.
	directURL             string
	redisURL              string
	adminToken, jwtSecret string
	// dbConns is the most connections the instance opens (--db-conns),
	// split among the roles (budget.go); pools are the role flags that
	// override the split.
	dbConns                                int
	pools                                  roleFlags
	maxInFlight, maxBatch, batchesInFlight int
	customerInFlight, maxConns             int
	noMigrate, noWorkers, demo, noShed     bool
	jobs                                   jobs.Config
	shutdownTimeout                        time.Duration
	// waitroomKeys signs waiting-room tickets and admission tokens
	// ("kid:secret[,kid:secret...]"); empty: derived from the JWT secret,
	// which only --demo allows.
	waitroomKeys string
	// paymentSecret is the HMAC key of payment events; empty: no payment
	// events and no payment-confirmed sales (with --demo: DevSecret).
	paymentSecret string
	// clockSkew is the test hook FLASHLINE_TEST_CLOCK_SKEW: this instance's
	// clock runs that far ahead (negative: behind) of the machine's.
	clockSkew time.Duration
	// role is all (the default), origin or edge (edge.go); origins and
	// edgeID are an edge's.
	role, origins, edgeID string
}

// clockSkewEnv names the clock-skew test hook: a Go duration ("90s", "-2m")
// by which this instance's clock is shifted, as if the machine's clock were
// wrong. It is the clock the sale cache times its entries by and corrects by
// the database's (salecache.Cache.Now), which the opening judgment, the
// waiting room's tickets and admission tokens and the reserve path's
// admission check use. For the fault harness (internal/chaos) only: serve
// logs a warning at start while it is set. Holds never read it: their expiry
// is the database's now(), and so is a new sale's opening.
const clockSkewEnv = "FLASHLINE_TEST_CLOCK_SKEW"

// minSecretLen is the shortest admin token, JWT secret, waiting-room key or
// payment webhook secret serve accepts outside --demo: 32 bytes, the size of
// the HMAC-SHA256 keys they are.
const minSecretLen = 32

// minKeyRetention is the shortest --key-retention: the contract promises
// that a retry within a day replays its answer.
const minKeyRetention = 24 * time.Hour

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg serveConfig
	e := newFlags("serve", getenv, stderr)
	e.string(&cfg.addr, "addr", "FLASHLINE_ADDR", ":8080", "address to listen on")
	e.string(&cfg.role, "role", "FLASHLINE_ROLE", roleAll, "all (the whole service), origin (the same, named for a deployment with edges) or edge (the waiting room without a database, in front of --origin)")
	e.string(&cfg.origins, "origin", "FLASHLINE_ORIGIN", "", "an edge's origins: base URLs of instances with the database, comma-separated (role edge only)")
	e.string(&cfg.edgeID, "edge-id", "FLASHLINE_EDGE_ID", "", "an edge's name in its reports to origins, 1-64 of [A-Za-z0-9_-] (default: edge- and random hex)")
	e.string(&cfg.metricsAddr, "metrics-addr", "FLASHLINE_METRICS_ADDR", "", "also serve /metrics, without auth, on this address (a private network's; empty: /metrics only on --addr, to the admin)")
	e.string(&cfg.databaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL URL (libpq form); may be a pooler in transaction mode (PgBouncer) when --database-direct-url names the server itself")
	e.redisURL(&cfg.redisURL)
	e.string(&cfg.adminToken, "admin-token", "FLASHLINE_ADMIN_TOKEN", "", "bearer token of the admin API (required)")
	e.string(&cfg.jwtSecret, "jwt-secret", "FLASHLINE_JWT_SECRET", "", "HS256 secret of customer JWTs (required)")
	e.string(&cfg.directURL, "database-direct-url", directURLEnv, "", "PostgreSQL URL of the server itself, for what needs a session (LISTEN, River, the pacer's lock, migrations), when --database-url is a pooler in transaction mode such as PgBouncer (default: --database-url)")
	e.int(&cfg.dbConns, "db-conns", "FLASHLINE_DB_CONNS", defaultDBConns, "the most database connections this instance opens in all, split among its roles (the role pool flags override their share)")
	e.int(&cfg.pools.sale, "sale-pool-size", "FLASHLINE_SALE_POOL_SIZE", 0, "connections the purchase path may hold (0: its share of --db-conns)")
	e.int(&cfg.pools.admin, "admin-pool-size", "FLASHLINE_ADMIN_POOL_SIZE", 0, "connections for admin, reads, confirm, cancel and payment events (0: its share of --db-conns)")
	e.int(&cfg.pools.room, "room-pool-size", "FLASHLINE_ROOM_POOL_SIZE", 0, "connections for the waiting room and the sale cache (0: its share of --db-conns)")
	e.int(&cfg.pools.river, "river-pool-size", "FLASHLINE_RIVER_POOL_SIZE", 0, "connections for River (0: its share of --db-conns)")
	e.int(&cfg.pools.jobs, "jobs-pool-size", "FLASHLINE_JOBS_POOL_SIZE", 0, "connections for the jobs' statements: sweeper, invariant, pruning (0: its share of --db-conns)")
	e.int(&cfg.maxInFlight, "max-in-flight", "FLASHLINE_MAX_IN_FLIGHT", 0, "the most the admission limit may let into the purchase path at once (0: (8+1) x max-batch x batches-in-flight x the sale pool's size)")
	e.int(&cfg.customerInFlight, "customer-in-flight", "FLASHLINE_CUSTOMER_IN_FLIGHT", 4, "requests one customer may have in flight at once (0: no cap)")
	e.int(&cfg.maxConns, "max-conns", "FLASHLINE_MAX_CONNS", 10000, "open client connections at most; more wait to be accepted")
	e.int(&cfg.maxBatch, "max-batch", "FLASHLINE_MAX_BATCH", 64, "the most concurrent reservations of one sale coalesced into one transaction (1: one transaction each)")
	e.int(&cfg.batchesInFlight, "batches-in-flight", "FLASHLINE_BATCHES_IN_FLIGHT", 1, "reserve transactions one sale may have running at once on this instance")
	e.bool(&cfg.noShed, "no-shed", "FLASHLINE_NO_SHED", "turn the admission limiter off (only to measure what it is worth)")
	e.bool(&cfg.noMigrate, "no-migrate", "FLASHLINE_NO_MIGRATE", "do not migrate the schema up on start")
	e.bool(&cfg.noWorkers, "no-workers", "FLASHLINE_NO_WORKERS", "do not run River workers (sweeper, invariant, pruning)")
	e.bool(&cfg.demo, "demo", "FLASHLINE_DEMO", "create a demo sale on start and print how to buy from it; allows development secrets")
	e.string(&cfg.paymentSecret, "payment-webhook-secret", "FLASHLINE_PAYMENT_WEBHOOK_SECRET", "", "HMAC-SHA256 secret of payment events (POST /payments/events, Flashline-Signature), 32+ bytes, shared with the payment side; unset: no payment events, and sales must be \"confirmation\": \"customer\" (with --demo: derived from the JWT secret)")
	e.string(&cfg.waitroomKeys, "waitroom-keys", "FLASHLINE_WAITROOM_KEYS", "", `keys of waiting-room tokens, "kid:secret[,kid:secret...]" (32+ byte secrets), the first signs (required; with --demo, derived from the JWT secret when empty)`)
	e.duration(&cfg.jobs.SweepInterval, "sweep-interval", "FLASHLINE_SWEEP_INTERVAL", time.Second, "how often expired reservations are swept")
	e.duration(&cfg.jobs.InvariantInterval, "invariant-interval", "FLASHLINE_INVARIANT_INTERVAL", 2*time.Second, "how often every sale's invariant is checked")
	e.string(&cfg.jobs.NotifyURL, "notify-url", "FLASHLINE_NOTIFY_URL", "", "the store's webhook that takes lottery notifications (won, lost, waitlisted, window expired, promoted), POSTed as JSON and signed (Flashline-Signature) with --notify-secret; empty: they wait in the outbox (lottery_notifications)")
	e.string(&cfg.jobs.NotifySecret, "notify-secret", "FLASHLINE_NOTIFY_SECRET", "", "HMAC-SHA256 secret that signs lottery notifications, 32+ bytes, shared with the store's webhook (required with --notify-url)")
	e.duration(&cfg.jobs.LotteryGrace, "lottery-grace", "FLASHLINE_LOTTERY_GRACE", 5*time.Second, "how long after a lottery winner's purchase window ends it is closed for good and the unit passes down the waitlist")
	e.duration(&cfg.jobs.KeyRetention, "key-retention", "FLASHLINE_KEY_RETENTION", 24*time.Hour, "how long idempotency keys are kept (at least 24h: a retry within a day replays)")
	e.duration(&cfg.shutdownTimeout, "shutdown-timeout", "FLASHLINE_SHUTDOWN_TIMEOUT", 15*time.Second, "how long to drain in-flight requests on SIGINT/SIGTERM")
	if err := e.fs.Parse(args); err != nil {
		return err
	}
	if v := getenv(clockSkewEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("serve: %s: %w", clockSkewEnv, err)
		}
		cfg.clockSkew = d
	}
	switch cfg.role {
	case roleAll, roleOrigin:
		if cfg.origins != "" || cfg.edgeID != "" {
			return errors.New("serve: --origin and --edge-id are an edge's (--role edge)")
		}
	case roleEdge:
		return runEdge(ctx, cfg, stdout, stderr)
	default:
		return fmt.Errorf("serve: --role %q: want all, origin or edge", cfg.role)
	}
	if cfg.adminToken == "" || cfg.jwtSecret == "" {
		return errors.New("serve: FLASHLINE_ADMIN_TOKEN and FLASHLINE_JWT_SECRET must be set ('make run' sets development values)")
	}
	if err := checkSecrets(cfg, stderr); err != nil {
		return err
	}
	if err := checkNotify(cfg); err != nil {
		return err
	}
	if cfg.jobs.KeyRetention < minKeyRetention {
		// 0 or less would prune every key at once, and a retry would make
		// a second reservation instead of replaying the first.
		return fmt.Errorf("serve: --key-retention is %s; it must be at least %s, the published minimum (a retry within a day replays its answer)", cfg.jobs.KeyRetention, minKeyRetention)
	}
	if p := cfg.pools; p.sale < 0 || p.admin < 0 || p.room < 0 || p.river < 0 || p.jobs < 0 {
		return errors.New("serve: pool sizes must be at least 1 (0: the role's share of --db-conns)")
	}
	if cfg.maxBatch < 1 || cfg.batchesInFlight < 1 {
		return errors.New("serve: --max-batch and --batches-in-flight must be at least 1")
	}
	conns, err := splitBudget(cfg.dbConns, cfg.batchesInFlight, cfg.pools)
	if err != nil {
		return err
	}
	if cfg.customerInFlight < 0 || cfg.maxConns < 1 {
		return errors.New("serve: --customer-in-flight must be at least 0 and --max-conns at least 1")
	}
	if cfg.maxInFlight == 0 {
		cfg.maxInFlight = saleShare(cfg) * conns.sale
	}
	if cfg.maxInFlight < conns.sale {
		return fmt.Errorf("serve: --max-in-flight (%d) must be at least the sale pool's size (%d), where the limit starts", cfg.maxInFlight, conns.sale)
	}
	if cfg.databaseURL, err = resolveDatabaseURL(cfg.databaseURL, getenv, stderr); err != nil {
		return err
	}
	if cfg.directURL == "" {
		cfg.directURL = cfg.databaseURL
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if cfg.clockSkew != 0 {
		logger.Warn("flashline: TEST HOOK: this instance's clock is skewed; for the fault harness only, never in production",
			"env", clockSkewEnv, "skew", cfg.clockSkew)
	}
	return serve(ctx, cfg, conns, logger, stdout)
}

// checkSecrets refuses secrets an attacker could guess: outside --demo, the
// admin token, the JWT secret, the payment webhook secret (when set) and
// every waiting-room key must be at least minSecretLen bytes, and the
// waiting-room keys must be set (derived from the JWT secret, whoever issues
// customer tokens could mint admission tokens). The payment secret must be a
// secret of its own: whoever knows it can confirm any hold.
func checkSecrets(cfg serveConfig, stderr io.Writer) error {
	if cfg.paymentSecret != "" && (cfg.paymentSecret == cfg.adminToken || cfg.paymentSecret == cfg.jwtSecret) {
		return errors.New("serve: FLASHLINE_PAYMENT_WEBHOOK_SECRET must be a secret of its own, not the admin token or the JWT secret")
	}
	if cfg.demo {
		if len(cfg.adminToken) < minSecretLen || len(cfg.jwtSecret) < minSecretLen || cfg.waitroomKeys == "" || cfg.paymentSecret == "" {
			fmt.Fprintln(stderr, "flashline: --demo: development secrets in use (short, or waiting-room keys and the payment webhook secret derived from the JWT secret); never in production")
		}
		return nil
	}
	secrets := []struct{ name, value string }{
		{"FLASHLINE_ADMIN_TOKEN", cfg.adminToken},
		{"FLASHLINE_JWT_SECRET", cfg.jwtSecret},
	}
	if cfg.paymentSecret != "" {
		secrets = append(secrets, struct{ name, value string }{"FLASHLINE_PAYMENT_WEBHOOK_SECRET", cfg.paymentSecret})
	}
	for _, s := range secrets {
		if len(s.value) < minSecretLen {
			return fmt.Errorf("serve: %s is %d bytes; it must be at least %d random bytes (only --demo allows development values)", s.name, len(s.value), minSecretLen)
		}
	}
	if cfg.waitroomKeys == "" {
		return errors.New("serve: FLASHLINE_WAITROOM_KEYS must be set (\"kid:secret\", a secret of 32+ random bytes, the same on every instance); only --demo derives them from the JWT secret")
	}
	return nil
}

// checkNotify checks the lottery's notification webhook: an http(s) URL
// with a secret of its own (32+ bytes outside --demo).
func checkNotify(cfg serveConfig) error {
	if cfg.jobs.NotifyURL == "" {
		return nil
	}
	u, err := url.Parse(cfg.jobs.NotifyURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("serve: FLASHLINE_NOTIFY_URL must be an http(s) URL")
	}
	switch secret := cfg.jobs.NotifySecret; {
	case secret == "":
		return errors.New("serve: FLASHLINE_NOTIFY_URL needs FLASHLINE_NOTIFY_SECRET, the secret its notifications are signed with")
	case secret == cfg.adminToken || secret == cfg.jwtSecret || secret == cfg.paymentSecret:
		return errors.New("serve: FLASHLINE_NOTIFY_SECRET must be a secret of its own")
	case !cfg.demo && len(secret) < minSecretLen:
		return fmt.Errorf("serve: FLASHLINE_NOTIFY_SECRET is %d bytes; it must be at least %d random bytes", len(secret), minSecretLen)
	}
	return nil
}

// saleShare is what one sale may hold of the purchase path at once: the
// batches it may run and a burst's rounds of batches waiting.
func saleShare(cfg serveConfig) int {
	return (postgres.DefaultQueueRounds + 1) * cfg.maxBatch * cfg.batchesInFlight
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

func serve(ctx context.Context, cfg serveConfig, conns budget, logger *slog.Logger, stdout io.Writer) error {
	verifier, err := auth.NewVerifier(cfg.jwtSecret, cfg.adminToken)
	if err != nil {
		return err
	}
	// Every instance must hold the same keys: a ticket taken on one is
	// checked on another. Tickets' expiry is judged by the instance's clock.
	keyring := waitroom.DeriveKeyring(cfg.jwtSecret)
	if cfg.waitroomKeys != "" {
		if keyring, err = waitroom.ParseKeyring(cfg.waitroomKeys); err != nil {
			return fmt.Errorf("serve: --waitroom-keys: %w", err)
		}
		if keyring.Uses(cfg.jwtSecret) || keyring.Uses(cfg.adminToken) || (cfg.paymentSecret != "" && keyring.Uses(cfg.paymentSecret)) {
			// Tickets and customer tokens are both HS256 JWTs.
			return errors.New("serve: --waitroom-keys: a waiting-room key must be a secret of its own, not the JWT secret, the admin token or the payment webhook secret")
		}
	}
	// Payment events: the secret shared with the payment side. --demo
	// without one derives a development secret from the JWT secret (printed
	// with the demo, for `flashline pay`).
	paymentSecret := cfg.paymentSecret
	if paymentSecret == "" && cfg.demo {
		paymentSecret = webhook.DevSecret(cfg.jwtSecret)
	}
	var payments *webhook.Verifier
	if paymentSecret != "" {
		payments = webhook.NewVerifier(paymentSecret)
	} else {
		logger.Warn("flashline: no FLASHLINE_PAYMENT_WEBHOOK_SECRET: POST /payments/events is refused, and so are sales confirmed by payment (create them with \"confirmation\": \"customer\")")
	}
	// The admission limit of the purchase path. What saturates first is a
	// sale's hot row, and the coalescer bounds that itself, per sale (the
	// store's QueueRounds: rounds of batches waiting). What the limit guards
	// is the pool the sales share: it starts open, at room for every
	// connection running a full batch with its queue, and shrinks when the
	// batches have to queue for a connection (ObserveWait); it never goes
	// below one sale's share, so one hot sale always fills its batches.
	share := min(saleShare(cfg), cfg.maxInFlight)
	shed := loadshed.Options{MinLimit: share, MaxLimit: cfg.maxInFlight, Step: cfg.maxBatch}
	if cfg.noShed {
		// For measuring what the limiter is worth; never in production.
		shed = loadshed.Options{InitialLimit: 1 << 20, MinLimit: 1 << 20, MaxLimit: 1 << 20, QueueSize: -1}
	}
	limiter, err := loadshed.New(shed)
	if err != nil {
		return err
	}

	// Whatever is started from here on is stopped, last first, within the
	// drain deadline, however serve ends: a signal while it was still
	// starting included.
	running := newParts(logger)
	err = startServe(ctx, cfg, conns, running, logger, stdout, verifier, keyring, payments, paymentSecret, limiter)
	if err != nil {
		if ctx.Err() != nil {
			// A stop signal while starting: stop what started, and say so.
			logger.Info("flashline: stopped while starting", "err", err)
			err = nil
		}
		return errors.Join(err, running.stopWithin(cfg.shutdownTimeout))
	}
	return serveUntilDone(ctx, cfg, logger, running)
}

// startServe starts the instance's parts in order, each recorded in running
// as soon as it runs: the pools (direct ones first, after the migration),
// the store and what stands in front of it, River, the background loops,
// and the HTTP servers.
func startServe(ctx context.Context, cfg serveConfig, conns budget, running *parts, logger *slog.Logger, stdout io.Writer,
	verifier *auth.Verifier, keyring *waitroom.Keyring, payments *webhook.Verifier, paymentSecret string, limiter *loadshed.Limiter) error {
	// The migration first, on a pool of its own closed before the others
	// open: it holds a lock on one connection while golang-migrate and
	// River's migrator use others, and counts in the instance's budget.
	if !cfg.noMigrate {
		if err := migrate(ctx, cfg.directURL, min(4, conns.total)); err != nil {
			return err
		}
	}
	// Separate pools, each sized explicitly (the budget's split), so that
	// one cannot starve another: a flood of buyers holds at most the sale
	// pool. What needs a session of its own is on the direct URL; the rest
	// may go through a pooler in transaction mode.
	const acquire = 3 * time.Second
	pooler := cfg.directURL != cfg.databaseURL
	open := func(url, name string, o postgres.PoolOptions) (*pgxpool.Pool, error) {
		o.AcquireTimeout, o.Pooler = acquire, pooler && url == cfg.databaseURL
		pool, err := postgres.NewPool(ctx, url, name, o)
		if err != nil {
			return nil, err
		}
		running.addClose(name+" pool", pool.Close)
		return pool, nil
	}
	sessionPool, err := open(cfg.directURL, "session", postgres.PoolOptions{MaxConns: int32(conns.session)})
	if err != nil {
		return err
	}
	if c, err := postgres.ServerConnections(ctx, sessionPool); err != nil {
		logger.Warn("flashline: cannot read the database's connection slots", "err", err)
	} else {
		checkServer(ctx, logger, c, conns, pooler)
	}
	riverPool, err := open(cfg.directURL, "river", postgres.PoolOptions{MaxConns: int32(conns.river)})
	if err != nil {
		return err
	}
	adminPool, err := open(cfg.databaseURL, "admin", postgres.PoolOptions{MaxConns: int32(conns.admin), MinConns: 1})
	if err != nil {
		return err
	}
	// MinConns pre-warms the purchase path: the first buyers pay no handshake.
	salePool, err := open(cfg.databaseURL, "sale", postgres.PoolOptions{MaxConns: int32(conns.sale), MinConns: int32(min(conns.sale, 4))})
	if err != nil {
		return err
	}
	roomPool, err := open(cfg.databaseURL, "room", postgres.PoolOptions{MaxConns: int32(conns.room), MinConns: 1})
	if err != nil {
		return err
	}
	// The jobs' statements name themselves (flashline-jobs) in
	// pg_stat_activity and stock_audit, and never hold an admin connection.
	jobsPool, err := open(cfg.databaseURL, "jobs", postgres.PoolOptions{MaxConns: int32(conns.jobs)})
	if err != nil {
		return err
	}

	store := postgres.NewStore(postgres.Pools{Sale: salePool, Admin: adminPool, Room: roomPool, Jobs: jobsPool, Session: sessionPool})
	store.Logger = logger
	store.MaxBatch, store.BatchesInFlight = cfg.maxBatch, cfg.batchesInFlight
	if !cfg.noShed {
		store.QueueRounds = postgres.DefaultQueueRounds
	}
	store.OnConnWait = limiter.ObserveWait
	registry := prometheus.NewRegistry()
	batchSizes := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "flashline_reserve_batch_size",
		Help:    "Reservations coalesced into one purchase-path transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})
	queueFull := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flashline_reserve_queue_full_total",
		Help: "Reservations refused overloaded because their sale's batches were full (the per-sale queue bound).",
	})
	registry.MustRegister(batchSizes, queueFull)
	store.OnBatch = func(n int) { batchSizes.Observe(float64(n)) }
	store.OnQueueFull = queueFull.Inc
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerPoolMetrics(registry, map[string]*pgxpool.Pool{"sale": salePool, "admin": adminPool, "room": roomPool, "river": riverPool, "jobs": jobsPool, "session": sessionPool})
	registry.MustRegister(newConnectionsCollector(adminPool, conns))

	// The sale cache (below) and the Redis gate of peak sales: a gated sale
	// fails closed (503) on an instance without Redis, or whose Redis does
	// not answer; this one still serves every other sale.
	cache := salecache.New(store, salecache.Options{Logger: logger, Registry: registry, Now: now(cfg)})
	rdb, err := newRedis(cfg.redisURL)
	if err != nil {
		return err
	}
	if rdb != nil {
		running.addClose("redis client", func() { rdb.Close() })
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := rdb.Ping(pingCtx).Err(); err != nil {
			logger.Warn("flashline: Redis does not answer; gated sales fail closed until it does", "err", err)
		}
		cancel()
	}
	gt := gate.New(rdb, store, cache, gate.Options{Logger: logger, Registry: registry})

	var riverClient *river.Client[pgx.Tx]
	if cfg.noWorkers {
		// An insert-only client: enough for River UI.
		riverClient, err = river.NewClient(riverpgxv5.New(riverPool), &river.Config{Logger: riverLogger(logger)})
	} else {
		// River reports routine progress at info level every few seconds;
		// its warnings and errors are what an operator needs.
		cfg.jobs.Logger, cfg.jobs.Registry, cfg.jobs.Gate = riverLogger(logger), registry, gt
		riverClient, err = jobs.NewClient(riverPool, store, cfg.jobs)
	}
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(riverClient, nil),
		Logger:    logger,
		Prefix:    "/admin/riverui",
	})
	if err != nil {
		return fmt.Errorf("river ui: %w", err)
	}

	// What this instance knows of its sales without the database, for the
	// purchase path (sold out, not open) and the waiting room (every status
	// poll), kept current by the database's change notifications; loaded
	// before serving, so a sale about to open is warm. The waiting room's
	// pacer: one instance leads it at a time.
	//
	// Times that instances compare (an opening, a ticket's or an admission
	// token's expiry) are judged by the database's clock as the cache
	// estimates it, not by this machine's, which may be off: a token minted
	// on one instance and checked on another then lives its 120 s.
	clock := cache.Now
	keyring = keyring.WithClock(clock)
	room := waitroom.NewRoom(cache, store, keyring, limiter, waitroom.Options{Logger: logger, Registry: registry, Now: clock,
		Batch: cfg.maxBatch * cfg.batchesInFlight})
	if err := cache.Load(ctx); err != nil {
		return err
	}
	// The loops run until the service stops, and are stopped before the
	// pools close (the pacer's leader hands its lock over).
	running.startLoops(map[string]func(context.Context) error{
		"sale cache": cache.Run, "pacer": room.RunPacer, "room counts": room.RunCounts, "gate": gt.Run,
	})

	// Listen first, so that a bad address fails at once.
	ln, metricsLn, err := listen(cfg)
	if err != nil {
		return err
	}
	running.addClose("listeners", func() { ln.Close(); closeIf(metricsLn) })
	// River must not be stopped by the signal's cancellation (that is a hard
	// stop); it is stopped in turn, after the HTTP server has drained.
	if !cfg.noWorkers {
		// Its start asks the database: a signal meanwhile is not kept
		// waiting for a database that does not answer.
		started := make(chan error, 1)
		go func() { started <- riverClient.Start(context.WithoutCancel(ctx)) }()
		running.add("river", func(ctx context.Context) error { return riverClient.Stop(ctx) })
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
	if err := ui.Start(uiCtx); err != nil {
		stopUI()
		return fmt.Errorf("start river ui: %w", err)
	}
	running.addClose("river ui", stopUI)

	srv := newHTTPServer(handlers.Routes(handlers.Deps{
		Store:            cache.Wrap(gt.Wrap(store)),
		Verifier:         verifier,
		Limiter:          limiter,
		Logger:           logger,
		Ready:            readiness(adminPool),
		Registry:         registry,
		RiverUI:          ui,
		Room:             room,
		Lottery:          store,
		Keyring:          keyring,
		CustomerInFlight: cfg.customerInFlight,
		Refuse:           cache.Refuse,
		SaleBusy:         store.SaleBusy,
		Payments:         payments,
		Gate:             gt,
		Now:              clock,
	}))
	url := publicURL(ln.Addr())
	startHTTP(running, logger, srv, ln, metricsLn, registry)
	logger.Info("flashline: listening", "url", url, "role", cfg.role, "workers", !cfg.noWorkers, "redis", rdb != nil)
	if cfg.demo {
		if err := printDemo(ctx, store, cfg, paymentSecret, url, stdout); err != nil {
			logger.Warn("flashline: demo sale", "err", err)
		}
	}
	return nil
}

// now is the instance's clock: the machine's, unless the test hook skews it.
func now(cfg serveConfig) func() time.Time {
	if skew := cfg.clockSkew; skew != 0 {
		return func() time.Time { return time.Now().Add(skew) }
	}
	return time.Now
}

func closeIf(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}

// startHTTP serves srv on ln, and the private mux (privateMux) on metricsLn
// if there is one; a server that fails ends the service (running.failed).
// Stopping it drains the requests in flight.
func startHTTP(running *parts, logger *slog.Logger, srv *http.Server, ln, metricsLn net.Listener, registry *prometheus.Registry) {
	failed := func(err error) {
		if !errors.Is(err, http.ErrServerClosed) {
			select {
			case running.failed <- fmt.Errorf("serve: %w", err):
			default:
			}
		}
	}
	go func() { failed(srv.Serve(ln)) }()
	var metricsSrv *http.Server
	if metricsLn != nil {
		metricsSrv = newHTTPServer(privateMux(registry))
		logger.Info("flashline: metrics", "url", publicURL(metricsLn.Addr())+"/metrics")
		go func() { failed(metricsSrv.Serve(metricsLn)) }()
	}
	running.add("http server", func(ctx context.Context) error {
		logger.Info("flashline: shutting down, draining in-flight requests")
		err := srv.Shutdown(ctx)
		if metricsSrv != nil {
			err = errors.Join(err, metricsSrv.Shutdown(ctx))
		}
		return err
	})
}

// serveUntilDone waits until ctx is done (the stop signal), or until a
// server or a background loop fails; then it stops every running part, the
// HTTP server's drain first, within cfg.shutdownTimeout.
func serveUntilDone(ctx context.Context, cfg serveConfig, logger *slog.Logger, running *parts) error {
	var failure error
	select {
	case failure = <-running.failed:
		logger.Warn("flashline: stopping: a part of the service failed", "err", failure)
	case <-ctx.Done():
	}
	err := errors.Join(failure, running.stopWithin(cfg.shutdownTimeout))
	if err != nil {
		logger.Warn("flashline: stopped", "err", err)
	} else {
		logger.Info("flashline: stopped")
	}
	return err
}

// privateMux is what --metrics-addr serves: /metrics, and Go's profiler
// under /debug/pprof/ (CPU and allocation profiles of the running service;
// not its command line, which may hold secrets).
func privateMux(registry *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", handlers.MetricsHandler(registry))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return mux
}

// migrate brings the schema up on a pool of its own, closed afterwards:
// migrating holds a lock on one connection while golang-migrate and River's
// migrator use others, more than a small admin pool may have.
func migrate(ctx context.Context, databaseURL string, conns int) error {
	pool, err := postgres.NewPool(ctx, databaseURL, "migrate", postgres.PoolOptions{MaxConns: int32(conns), AcquireTimeout: 3 * time.Second})
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrations.Up(ctx, pool)
}

// newHTTPServer returns a server with limits sized for a storefront: headers
// within 16 KiB (a JWT and the usual cookies fit many times over; Go's
// default, 1 MiB, lets one request hold a megabyte) that arrive within 10 s;
// the whole request within 15 s (bodies have their own, shorter deadline,
// handlers/json.go); an answer written within 30 s; an idle keep-alive
// connection closed after a minute. A client slow enough to hit these under
// a flood gets no answer, so they are generous; a slowloris holds a
// connection no longer than them.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    16 << 10,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
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

// publicURL is the URL to print for a listener: a wildcard address is shown
// as localhost, which is what a user on the same machine types.
func publicURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// listen opens --addr, at most --max-conns connections served at once (each
// costs a goroutine and buffers; the rest wait to be accepted), and
// --metrics-addr when set (nil otherwise).
func listen(cfg serveConfig) (ln, metricsLn net.Listener, err error) {
	if ln, err = net.Listen("tcp", cfg.addr); err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	if cfg.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.metricsAddr); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("listen on %s: %w", cfg.metricsAddr, err)
		}
	}
	return netutil.LimitListener(ln, cfg.maxConns), metricsLn, nil
}
