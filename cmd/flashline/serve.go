package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/jobs"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/waitroom/roomtoken"
	"github.com/flashline/flashline/waitroom/waitpage"
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
	// customer is where customer tokens of the store's identity provider
	// are verified (its JWKS or its issuer, the audience, the longest
	// lifetime): auth.Options without the JWT secret.
	customer auth.Options
	// dbConns is the most connections the instance opens (--db-conns),
	// split among the roles (budget.go); pools are the role flags that
	// override the split.
	dbConns                                int
	pools                                  roleFlags
	maxInFlight, maxBatch, batchesInFlight int
	customerInFlight, maxConns             int
	// maxStreams bounds the waiting clients' status streams (0: half of
	// maxConns: every stream holds a connection).
	maxStreams int
	// maxConnsPerAddr bounds the connections of one client address
	// (--max-conns-per-addr, 0: none); trustedProxies are the addresses it
	// does not apply to (--trusted-proxies, parsed from trustedProxiesFlag
	// by checkClients).
	maxConnsPerAddr                    int
	trustedProxiesFlag                 string
	trustedProxies                     []netip.Prefix
	noMigrate, noWorkers, demo, noShed bool
	// pprof mounts Go's profiler on --metrics-addr (--pprof).
	pprof bool
	// The waiting page's languages: a store's catalogues laid over the
	// built-in ones (--page-translations), the default language
	// (--page-language), and the store's look (--page-look);
	// waitpage.Configure.
	pageTranslations, pageLanguage, pageLook string

	jobs jobs.Config
	// The public randomness beacon of lotteries (--beacon-*): beacon is
	// set from them by checkBeacon when --beacon-url is.
	beaconKey       string
	beaconGenesis   int
	beaconPeriod    time.Duration
	beacon          *flashline.BeaconChain
	shutdownTimeout time.Duration
	// waitroomKeys signs waiting-room tickets and admission tokens
	// ("kid:secret[,kid:secret...]"); empty: derived from the JWT secret,
	// which only --demo allows.
	waitroomKeys string
	// paymentSecret is the HMAC key of payment events; empty: no payment
	// events and no payment-confirmed sales (with --demo: DevSecret).
	paymentSecret string
	// stripeSecrets are the signing secrets of the Stripe endpoint
	// (POST /payments/stripe), "whsec_...[,whsec_...]" while one is rolled;
	// stripeTolerance how far a Stripe-Signature's timestamp may be from
	// now. adyenKeys are the hex HMAC keys of Adyen's notifications (POST
	// /payments/adyen), comma-separated while one is rotated. Empty: that
	// route answers payments_not_configured.
	stripeSecrets   string
	stripeTolerance time.Duration
	adyenKeys       string
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
// admission check use. For the fault harness (internal/testkit/chaos) only: only a
// binary built with the tag flashline_testhooks (testHooks; internal/testkit/testserver
// builds so) honours it, and serve logs a warning at start while it is set;
// any other binary ignores it, with a warning. Holds never read it: their
// expiry is the database's now(), and so is a new sale's opening.
const clockSkewEnv = "FLASHLINE_TEST_CLOCK_SKEW"

// readClockSkew reads clockSkewEnv: the skew when hooks (testHooks) allows
// test hooks, otherwise zero and a warning on stderr if the variable is set.
func readClockSkew(getenv func(string) string, hooks bool, stderr io.Writer) (time.Duration, error) {
	v := getenv(clockSkewEnv)
	if v == "" {
		return 0, nil
	}
	if !hooks {
		fmt.Fprintf(stderr, "flashline: %s is ignored: it is a test hook, honoured only by binaries built for the tests (tag flashline_testhooks)\n", clockSkewEnv)
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("serve: %s: %w", clockSkewEnv, err)
	}
	return d, nil
}

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
	e.String(&cfg.addr, "addr", "FLASHLINE_ADDR", ":8080", "address to listen on")
	e.String(&cfg.role, "role", "FLASHLINE_ROLE", roleAll, "all (the whole service), origin (the same, named for a deployment with edges) or edge (the waiting room without a database, in front of --origin)")
	e.String(&cfg.origins, "origin", "FLASHLINE_ORIGIN", "", "an edge's origins: base URLs of instances with the database, comma-separated (role edge only)")
	e.String(&cfg.edgeID, "edge-id", "FLASHLINE_EDGE_ID", "", "an edge's name in its reports to origins, 1-64 of [A-Za-z0-9_-] (default: edge- and random hex)")
	e.String(&cfg.metricsAddr, "metrics-addr", "FLASHLINE_METRICS_ADDR", "", "also serve /metrics, without auth, on this address (a private network's; empty: /metrics only on --addr, to the admin)")
	e.Bool(&cfg.pprof, "pprof", "FLASHLINE_PPROF", "also serve Go's profiler, /debug/pprof/, without auth on --metrics-addr (only for profiling: a CPU profile or trace costs the service while it runs)")
	e.String(&cfg.databaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL URL (libpq form); may be a pooler in transaction mode (PgBouncer) when --database-direct-url names the server itself")
	e.redisURL(&cfg.redisURL)
	e.String(&cfg.adminToken, "admin-token", "FLASHLINE_ADMIN_TOKEN", "", "bearer token of the admin API (required)")
	e.String(&cfg.jwtSecret, "jwt-secret", "FLASHLINE_JWT_SECRET", "", "HS256 secret of customer JWTs (required without --customer-jwks-url or --customer-issuer)")
	e.String(&cfg.customer.JWKSURL, "customer-jwks-url", "FLASHLINE_CUSTOMER_JWKS_URL", "", "the JWKS of the store's identity provider: customer tokens signed RS256, ES256 or EdDSA with its keys are accepted (https, or http to this machine)")
	e.String(&cfg.customer.Issuer, "customer-issuer", "FLASHLINE_CUSTOMER_ISSUER", "", "the identity provider's issuer: every provider token's \"iss\" (and HS256 tokens' too), and, without --customer-jwks-url, where its JWKS is found (OpenID discovery, ISSUER/.well-known/openid-configuration)")
	e.String(&cfg.customer.Audience, "customer-audience", "FLASHLINE_CUSTOMER_AUDIENCE", "", "the \"aud\" every customer token must name (provider's and HS256 alike); empty: not checked")
	e.Duration(&cfg.customer.MaxTokenAge, "customer-max-token-age", "FLASHLINE_CUSTOMER_MAX_TOKEN_AGE", 0, "the longest lifetime (exp - iat) of a customer token accepted (0: 24h for the provider's tokens, unbounded for HS256 ones)")
	e.String(&cfg.directURL, "database-direct-url", directURLEnv, "", "PostgreSQL URL of the server itself, for what needs a session (LISTEN, River, the pacer's lock, migrations), when --database-url is a pooler in transaction mode such as PgBouncer (default: --database-url)")
	e.Int(&cfg.dbConns, "db-conns", "FLASHLINE_DB_CONNS", defaultDBConns, "the most database connections this instance opens in all, split among its roles (the role pool flags override their share)")
	e.Int(&cfg.pools.sale, "sale-pool-size", "FLASHLINE_SALE_POOL_SIZE", 0, "connections the purchase path may hold (0: its share of --db-conns)")
	e.Int(&cfg.pools.admin, "admin-pool-size", "FLASHLINE_ADMIN_POOL_SIZE", 0, "connections for admin, reads, confirm, cancel and payment events (0: its share of --db-conns)")
	e.Int(&cfg.pools.room, "room-pool-size", "FLASHLINE_ROOM_POOL_SIZE", 0, "connections for the waiting room and the sale cache (0: its share of --db-conns)")
	e.Int(&cfg.pools.river, "river-pool-size", "FLASHLINE_RIVER_POOL_SIZE", 0, "connections for River (0: its share of --db-conns)")
	e.Int(&cfg.pools.jobs, "jobs-pool-size", "FLASHLINE_JOBS_POOL_SIZE", 0, "connections for the jobs' statements: sweeper, invariant, pruning (0: its share of --db-conns)")
	e.Int(&cfg.maxInFlight, "max-in-flight", "FLASHLINE_MAX_IN_FLIGHT", 0, "the most the admission limit may let into the purchase path at once (0: (8+1) x max-batch x batches-in-flight x the sale pool's size)")
	e.Int(&cfg.customerInFlight, "customer-in-flight", "FLASHLINE_CUSTOMER_IN_FLIGHT", 4, "requests one customer may have in flight at once (0: no cap)")
	e.Int(&cfg.maxConns, "max-conns", "FLASHLINE_MAX_CONNS", 10000, "open client connections at most; more wait to be accepted")
	e.Int(&cfg.maxConnsPerAddr, "max-conns-per-addr", "FLASHLINE_MAX_CONNS_PER_ADDR", 256, "open client connections one address may hold (an IPv6 one: its /64), past which its new ones are reset (0: no bound); behind --trusted-proxies, the requests in flight one forwarded address (X-Forwarded-For) may have, past which they are answered 429")
	e.String(&cfg.trustedProxiesFlag, "trusted-proxies", "FLASHLINE_TRUSTED_PROXIES", defaultTrustedProxies, `addresses or CIDR prefixes of the proxies (and edges) in front of this instance, comma-separated, whose connections --max-conns-per-addr does not bound: their clients are bounded by X-Forwarded-For instead; "none": no address`)
	e.Int(&cfg.maxStreams, "max-streams", "FLASHLINE_MAX_STREAMS", 0, "waiting clients' status streams open at once, each a connection (0: half of --max-conns); past it clients poll")
	e.Int(&cfg.maxBatch, "max-batch", "FLASHLINE_MAX_BATCH", 64, "the most concurrent reservations of one sale coalesced into one transaction (1: one transaction each)")
	e.Int(&cfg.batchesInFlight, "batches-in-flight", "FLASHLINE_BATCHES_IN_FLIGHT", 1, "reserve transactions one sale may have running at once on this instance")
	e.Bool(&cfg.noShed, "no-shed", "FLASHLINE_NO_SHED", "turn the admission limiter off (only to measure what it is worth)")
	e.Bool(&cfg.noMigrate, "no-migrate", "FLASHLINE_NO_MIGRATE", "do not migrate the schema up on start")
	e.Bool(&cfg.noWorkers, "no-workers", "FLASHLINE_NO_WORKERS", "do not run River workers (sweeper, invariant, pruning)")
	e.Bool(&cfg.demo, "demo", "FLASHLINE_DEMO", "create a demo sale on start and print how to buy from it; allows development secrets")
	e.String(&cfg.paymentSecret, "payment-webhook-secret", "FLASHLINE_PAYMENT_WEBHOOK_SECRET", "", "HMAC-SHA256 secret of payment events (POST /payments/events, Flashline-Signature), 32+ bytes, shared with the payment side; unset: no payment events, and sales must be \"confirmation\": \"customer\" (with --demo: derived from the JWT secret)")
	e.String(&cfg.stripeSecrets, "stripe-webhook-secret", "FLASHLINE_STRIPE_WEBHOOK_SECRET", "", "the signing secret of the Stripe endpoint POST /payments/stripe (whsec_..., Stripe's dashboard shows it), or several comma-separated while one is rolled; unset: the route answers payments_not_configured (docs/integration.md)")
	e.Duration(&cfg.stripeTolerance, "stripe-webhook-tolerance", "FLASHLINE_STRIPE_WEBHOOK_TOLERANCE", webhook.DefaultTolerance, "how far a Stripe-Signature's timestamp may be from this instance's clock (an older event is refused; Stripe retries with a new signature)")
	e.String(&cfg.adyenKeys, "adyen-hmac-key", "FLASHLINE_ADYEN_HMAC_KEY", "", "the HMAC key (hex, from Adyen's Customer Area) of the notifications POST /payments/adyen takes, or several comma-separated while one is rotated; unset: the route answers payments_not_configured (docs/integration.md)")
	e.String(&cfg.waitroomKeys, "waitroom-keys", "FLASHLINE_WAITROOM_KEYS", "", `keys of waiting-room tokens, "kid:secret[,kid:secret...]" (32+ byte secrets), the first signs (required; with --demo, derived from the JWT secret when empty)`)
	e.Duration(&cfg.jobs.SweepInterval, "sweep-interval", "FLASHLINE_SWEEP_INTERVAL", time.Second, "how often expired reservations are swept")
	e.Duration(&cfg.jobs.InvariantInterval, "invariant-interval", "FLASHLINE_INVARIANT_INTERVAL", 2*time.Second, "how often every sale's invariant is checked")
	e.String(&cfg.jobs.NotifyURL, "notify-url", "FLASHLINE_NOTIFY_URL", "", "the store's webhook that takes lottery notifications (won, lost, waitlisted, window expired, promoted), POSTed as JSON and signed (Flashline-Signature) with --notify-secret; empty: they wait in the outbox (lottery_notifications)")
	e.String(&cfg.jobs.NotifySecret, "notify-secret", "FLASHLINE_NOTIFY_SECRET", "", "HMAC-SHA256 secret that signs lottery notifications, 32+ bytes, shared with the store's webhook (required with --notify-url)")
	e.Duration(&cfg.jobs.LotteryGrace, "lottery-grace", "FLASHLINE_LOTTERY_GRACE", 5*time.Second, "how long after a lottery winner's purchase window ends it is closed for good and the unit passes down the waitlist")
	e.String(&cfg.jobs.BeaconURL, "beacon-url", "FLASHLINE_BEACON_URL", "", "the public randomness beacon a lottery's draw and a randomized_at_open waiting room's pre-open crowd wait for, in drand's HTTP format (GET URL/public/ROUND: round, randomness, signature; scheme bls-unchained-g1-rfc9380); with --beacon-public-key, --beacon-genesis and --beacon-period; empty: no beacon, and lotteries and rooms created meanwhile are drawn from the store's seed alone (the policy and the transcript say so)")
	e.String(&cfg.beaconKey, "beacon-public-key", "FLASHLINE_BEACON_PUBLIC_KEY", "", "the beacon chain's public key, hex of the 96-byte compressed G2 point (from the beacon itself, never from the store)")
	e.Int(&cfg.beaconGenesis, "beacon-genesis", "FLASHLINE_BEACON_GENESIS", 0, "the beacon chain's genesis time, Unix seconds: round r is published at genesis + (r-1) × period")
	e.Duration(&cfg.beaconPeriod, "beacon-period", "FLASHLINE_BEACON_PERIOD", 0, "the beacon chain's round period, whole seconds (e.g. 3s)")
	e.Duration(&cfg.jobs.BeaconWait, "beacon-wait", "FLASHLINE_BEACON_WAIT", 5*time.Minute, "how long past its draw time (or its round's, if later) a lottery's draw, or a waiting room's crowd past its commitment at the open, waits for its beacon round before the sale is paused with the reason; never drawn without it")
	e.Duration(&cfg.jobs.KeyRetention, "key-retention", "FLASHLINE_KEY_RETENTION", 24*time.Hour, "how long keys stored in idempotency_keys (before migration 000017) are kept (at least 24h: a retry within a day replays); a key in its reservation's row is kept with it")
	e.pageFlags(&cfg.pageTranslations, &cfg.pageLanguage, &cfg.pageLook)
	e.Duration(&cfg.shutdownTimeout, "shutdown-timeout", "FLASHLINE_SHUTDOWN_TIMEOUT", 15*time.Second, "how long to drain in-flight requests on SIGINT/SIGTERM")
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	// Origins and edges alike serve the waiting page.
	if err := waitpage.Configure(waitpage.Options{Translations: cfg.pageTranslations, Language: cfg.pageLanguage, Look: cfg.pageLook}); err != nil {
		return fmt.Errorf("serve: --page-translations, --page-language, --page-look: %w", err)
	}
	var err error
	if cfg.clockSkew, err = readClockSkew(getenv, testHooks, stderr); err != nil {
		return err
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
	if cfg.adminToken == "" || (cfg.jwtSecret == "" && !cfg.hasProvider()) {
		return errors.New("serve: FLASHLINE_ADMIN_TOKEN must be set, and FLASHLINE_JWT_SECRET or the identity provider's FLASHLINE_CUSTOMER_ISSUER or FLASHLINE_CUSTOMER_JWKS_URL ('make run' sets development values)")
	}
	if cfg.demo && cfg.jwtSecret == "" {
		return errors.New("serve: --demo needs FLASHLINE_JWT_SECRET: it mints its demo customer's token")
	}
	if err := checkSecrets(cfg, stderr); err != nil {
		return err
	}
	if err := checkNotify(cfg); err != nil {
		return err
	}
	if err := checkBeacon(&cfg); err != nil {
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
	if err := checkClients(&cfg); err != nil {
		return err
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

// saleShare is what one sale may hold of the purchase path at once: the
// batches it may run and a burst's rounds of batches waiting (across its
// variants: the coalescer has one queue a sale).
func saleShare(cfg serveConfig) int {
	return (postgres.DefaultQueueRounds + 1) * cfg.maxBatch * cfg.batchesInFlight
}

func serve(ctx context.Context, cfg serveConfig, conns budget, logger *slog.Logger, stdout io.Writer) error {
	verifier, err := newVerifier(ctx, cfg, cfg.adminToken, logger)
	if err != nil {
		return err
	}
	// Every instance must hold the same keys: a ticket taken on one is
	// checked on another. Tickets' expiry is judged by the instance's clock.
	keyring := roomtoken.DeriveKeyring(cfg.jwtSecret)
	if cfg.waitroomKeys != "" {
		if keyring, err = roomtoken.ParseKeyring(cfg.waitroomKeys); err != nil {
			return fmt.Errorf("serve: --waitroom-keys: %w", err)
		}
		if (cfg.jwtSecret != "" && keyring.Uses(cfg.jwtSecret)) || keyring.Uses(cfg.adminToken) || (cfg.paymentSecret != "" && keyring.Uses(cfg.paymentSecret)) {
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
	} else if cfg.stripeSecrets == "" && cfg.adyenKeys == "" {
		logger.Warn("flashline: no FLASHLINE_PAYMENT_WEBHOOK_SECRET: POST /payments/events is refused, and so are sales confirmed by payment (create them with \"confirmation\": \"customer\")")
	}
	// The payment providers' own webhooks.
	var stripe *webhook.Verifier
	if secrets := webhook.SplitSecrets(cfg.stripeSecrets); len(secrets) > 0 {
		stripe = webhook.NewVerifier(secrets[0], secrets[1:]...).WithTolerance(cfg.stripeTolerance)
	}
	var adyen *webhook.AdyenVerifier
	if keys := webhook.SplitSecrets(cfg.adyenKeys); len(keys) > 0 {
		if adyen, err = webhook.NewAdyenVerifier(keys...); err != nil {
			return fmt.Errorf("serve: FLASHLINE_ADYEN_HMAC_KEY: %w", err)
		}
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
	in := &instance{cfg: cfg, conns: conns, logger: logger, stdout: stdout, running: newParts(logger),
		verifier: verifier, keyring: keyring, payments: payments, paymentSecret: paymentSecret, limiter: limiter,
		stripe: stripe, adyen: adyen}
	if err := in.start(ctx); err != nil {
		if ctx.Err() != nil {
			// A stop signal while starting: stop what started, and say so.
			logger.Info("flashline: stopped while starting", "err", err)
			err = nil
		}
		return errors.Join(err, in.running.stopWithin(cfg.shutdownTimeout))
	}
	return serveUntilDone(ctx, cfg, logger, in.running)
}

// hasProvider says whether customer tokens of an identity provider are
// configured (its JWKS, or its issuer to discover it).
func (cfg serveConfig) hasProvider() bool {
	return cfg.customer.JWKSURL != "" || cfg.customer.Issuer != ""
}

// newVerifier is the verifier of customer tokens and of adminToken: HS256
// with the JWT secret, the identity provider's tokens with its keys (fetched
// now, and kept fresh until ctx ends), or both.
func newVerifier(ctx context.Context, cfg serveConfig, adminToken string, logger *slog.Logger) (*auth.Verifier, error) {
	o := cfg.customer
	o.JWTSecret, o.Logger = cfg.jwtSecret, logger
	v, err := auth.New(ctx, adminToken, o)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if v.HasProvider() {
		logger.Info("flashline: customer tokens of the identity provider", "issuer", o.Issuer, "jwks_url", o.JWKSURL,
			"audience", o.Audience, "keys", v.ProviderKeys(), "hs256", cfg.jwtSecret != "")
	}
	return v, nil
}

// verifierMetrics are the identity provider's keys as metrics: how many
// this instance holds, and its failed fetches (an outage: the keys held
// keep verifying).
func verifierMetrics(v *auth.Verifier) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashline_customer_provider_keys",
			Help: "Keys of the identity provider this instance holds to verify customer tokens (0 without a provider).",
		}, func() float64 { return float64(v.ProviderKeys()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flashline_customer_provider_fetch_failures_total",
			Help: "Fetches of the identity provider's discovery document or keys that failed; the keys held keep verifying, tokens of any other key are refused.",
		}, func() float64 { return float64(v.KeyFetchFailures()) }),
	}
}

// now is the instance's clock: the machine's, unless the test hook skews it.
func now(cfg serveConfig) func() time.Time {
	if skew := cfg.clockSkew; skew != 0 {
		return func() time.Time { return time.Now().Add(skew) }
	}
	return time.Now
}
