package jobs

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/flashline/flashline"
)

// Config configures the River client and its jobs. Zero values take the
// defaults shown.
type Config struct {
	SweepInterval     time.Duration // 1s
	SweepBatchSize    int           // 500
	InvariantInterval time.Duration // 2s
	PruneInterval     time.Duration // 1m
	// KeyRetention is how long keys of idempotency_keys (stored before
	// migration 000017) are kept; the published minimum is 24h. A key in
	// its reservation's row is kept as long as the reservation.
	KeyRetention time.Duration // 24h
	// CompletedJobRetention is how long River keeps finished jobs; a job every
	// second would otherwise leave 86,400 rows a day per kind.
	CompletedJobRetention time.Duration // 10m
	// Gate, when set, is the Redis gate: its job runs every second, and the
	// sweeper asks it to relay the units it restocked at once.
	Gate Gate
	// LotteryGrace is how long after a lottery winner's purchase window ends
	// the window is closed for good (a reservation checked just before the
	// end may still be committing).
	LotteryGrace time.Duration // 5s
	// NotifyURL is the store's webhook that takes the lottery's
	// notifications; empty: they wait in the outbox.
	NotifyURL string
	// NotifySecret signs the notifications (Flashline-Signature).
	NotifySecret string
	// NotifyBackoff is the wait after a failed delivery's first attempt,
	// doubled per attempt up to 10 minutes.
	NotifyBackoff time.Duration // 1s
	// BeaconURL is where the lottery's draw (and a randomized_at_open
	// room's crowd) reads its beacon round, in drand's HTTP format (GET
	// BeaconURL/public/ROUND); empty: a lottery or room created with a
	// beacon cannot be drawn, and is paused after BeaconWait.
	BeaconURL string
	// BeaconWait is how long past its draw time (or its round's, if later) a
	// draw waits for the beacon's round before its sale is paused.
	BeaconWait time.Duration // 5m
	Logger     *slog.Logger
	Registry   prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.SweepInterval == 0 {
		c.SweepInterval = time.Second
	}
	if c.SweepBatchSize == 0 {
		c.SweepBatchSize = 500
	}
	if c.InvariantInterval == 0 {
		c.InvariantInterval = 2 * time.Second
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = time.Minute
	}
	if c.KeyRetention == 0 {
		c.KeyRetention = 24 * time.Hour
	}
	if c.CompletedJobRetention == 0 {
		c.CompletedJobRetention = 10 * time.Minute
	}
	if c.LotteryGrace == 0 {
		c.LotteryGrace = 5 * time.Second
	}
	if c.BeaconWait == 0 {
		c.BeaconWait = 5 * time.Minute
	}
	if c.NotifyBackoff == 0 {
		c.NotifyBackoff = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
}

// NewClient returns a River client (not yet started) that runs the periodic
// jobs on pool, acting on store (the database adapter: cmd/flashline passes
// postgres.Store).
func NewClient(pool *pgxpool.Pool, store flashline.JobStore, cfg Config) (*river.Client[pgx.Tx], error) {
	cfg.setDefaults()
	if cfg.SweepInterval < time.Second || cfg.InvariantInterval < time.Second {
		// River asks for periodic intervals of at least a second.
		return nil, errors.New("jobs: sweep and invariant intervals must be at least 1s")
	}
	m := newMetrics(cfg.Registry)
	workers := river.NewWorkers()
	river.AddWorker(workers, &SweepWorker{store: store, batchSize: cfg.SweepBatchSize, logger: cfg.Logger, metrics: m, gate: cfg.Gate})
	river.AddWorker(workers, &InvariantWorker{store: store, logger: cfg.Logger, metrics: m})
	river.AddWorker(workers, &PruneWorker{store: store, retention: cfg.KeyRetention, logger: cfg.Logger, metrics: m})

	periodic := func(interval time.Duration, args river.JobArgs) *river.PeriodicJob {
		return river.NewPeriodicJob(river.PeriodicInterval(interval),
			func() (river.JobArgs, *river.InsertOpts) {
				// One attempt: the next tick is the retry, and a job that
				// outlived its tick must not pile up behind it.
				return args, &river.InsertOpts{MaxAttempts: 1}
			},
			&river.PeriodicJobOpts{RunOnStart: true})
	}
	periodicJobs := []*river.PeriodicJob{
		periodic(cfg.SweepInterval, SweepArgs{}),
		periodic(cfg.InvariantInterval, InvariantArgs{}),
		periodic(cfg.PruneInterval, PruneArgs{}),
	}
	river.AddWorker(workers, &LotteryWorker{store: store, grace: cfg.LotteryGrace, logger: cfg.Logger,
		beacon: Beacon{URL: cfg.BeaconURL, Client: &http.Client{Timeout: beaconTimeout}}, beaconWait: cfg.BeaconWait})
	periodicJobs = append(periodicJobs, periodic(time.Second, LotteryArgs{}))
	if cfg.NotifyURL != "" {
		river.AddWorker(workers, &NotifyWorker{store: store, url: cfg.NotifyURL, secret: cfg.NotifySecret,
			backoff: cfg.NotifyBackoff, client: &http.Client{Timeout: notifyTimeout}, logger: cfg.Logger,
			sent: newNotifyMetrics(cfg.Registry)})
		periodicJobs = append(periodicJobs, periodic(time.Second, NotifyArgs{}))
	}
	if cfg.Gate != nil {
		river.AddWorker(workers, &GateWorker{gate: cfg.Gate})
		periodicJobs = append(periodicJobs, periodic(time.Second, GateArgs{}))
	}
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:                          clientID(time.Now()),
		Queues:                      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		PeriodicJobs:                periodicJobs,
		Workers:                     workers,
		CompletedJobRetentionPeriod: cfg.CompletedJobRetention,
		DiscardedJobRetentionPeriod: 24 * time.Hour,
		JobTimeout:                  time.Minute,
		Logger:                      cfg.Logger,
	})
}

// clientID names this process in River's tables (a job's attempted_by, the
// leader): River's default (host and start time) with the process id, so an
// operator, or the fault harness, can tell which of several instances on one
// host ran a job.
func clientID(started time.Time) string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown_host"
	}
	host = strings.NewReplacer(".", "_", "-", "_", ":", "_").Replace(host)
	if len(host) > 60 {
		host = host[:60]
	}
	return fmt.Sprintf("%s_pid%d_%s", host, os.Getpid(), started.UTC().Format("2006_01_02T15_04_05_000000"))
}

// ClientIDPid is the process id in a River client id made by this package
// (a job's attempted_by), or 0 when id is not one.
func ClientIDPid(id string) int {
	_, rest, ok := strings.Cut(id, "_pid")
	for ok {
		var pid int
		if n, _ := fmt.Sscanf(rest, "%d_", &pid); n == 1 {
			return pid
		}
		_, rest, ok = strings.Cut(rest, "_pid")
	}
	return 0
}

type metrics struct {
	restocked   prometheus.Counter
	invariantOK *prometheus.GaugeVec
	// variantOK and variantUnits label each variant of a sale with
	// variants: at most 100 a sale (flashline.MaxVariants, the
	// sales_variant_count_range CHECK), so 4 series a variant stay bounded
	// as the sale's own do.
	variantOK    *prometheus.GaugeVec
	variantUnits *prometheus.GaugeVec
	incidents    prometheus.Counter
	prunedKeys   prometheus.Counter
	overdue      prometheus.Gauge
	lastSweep    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		restocked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashline_restocked_units_total",
			Help: "Units the expiry sweeper returned to stock.",
		}),
		invariantOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashline_invariant_ok",
			Help: "1 when a sale's available + pending + confirmed == initial and the ledger agrees, else 0.",
		}, []string{"sale_id"}),
		variantOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashline_variant_invariant_ok",
			Help: "1 when a variant's available + pending + confirmed == its initial stock and its buckets' ledger agrees, else 0 (sales with variants only).",
		}, []string{"sale_id", "variant"}),
		variantUnits: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashline_variant_units",
			Help: "A variant's units by state (available, pending, confirmed) at the invariant job's last check (sales with variants only).",
		}, []string{"sale_id", "variant", "state"}),
		incidents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashline_invariant_incidents_total",
			Help: "Invariant mismatches found (each pauses its sale).",
		}),
		prunedKeys: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flashline_idempotency_keys_pruned_total",
			Help: "Idempotency keys deleted after their retention.",
		}),
	}
	m.overdue = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flashline_sweep_overdue_seconds",
		Help: "How far past its expiry the oldest pending hold was after this instance's last sweep (the sweeper's lag).",
	})
	m.lastSweep = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flashline_sweep_last_run_timestamp_seconds",
		Help: "When this instance last finished an expiry sweep (Unix time; the sweep runs on River's leader).",
	})
	reg.MustRegister(m.restocked, m.invariantOK, m.variantOK, m.variantUnits, m.incidents, m.prunedKeys, m.overdue, m.lastSweep)
	return m
}
