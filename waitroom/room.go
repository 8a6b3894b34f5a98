package waitroom

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// Answers to a status request.
const (
	StatusWaiting           = "waiting"
	StatusChallengeRequired = "challenge_required"
	StatusAdmitted          = "admitted"
	StatusSoldOut           = "sold_out"
)

// Capacity is what the pacer reads of the purchase path's admission limiter
// (*loadshed.Limiter): its current concurrency limit and how much of it is in
// use. The Room never acquires from it.
type Capacity interface {
	Limit() int64
	InFlight() int64
	Latency() time.Duration
}

// Memory is what the Room reads of what this instance knows of its sales
// without the database (package salecache's Cache, which cmd/flashline
// passes: over the database on an origin, over its origins on an edge):
// every sale's facts and its room's, kept current by its owner.
type Memory interface {
	// Sale is what memory knows of saleID, read when missing or stale
	// (fresh false: the read failed and only a stale entry is left).
	Sale(ctx context.Context, saleID string) (s flashline.SaleFacts, fresh bool, err error)
	// Fresh is what memory knows of saleID when it is fresh, without a
	// read (ok false: Sale decides).
	Fresh(saleID string) (s flashline.SaleFacts, ok bool)
	// Sales is every sale in memory now, fresh or not.
	Sales() []flashline.SaleFacts
	// Load reads every sale now.
	Load(ctx context.Context) error
	// Watch returns a channel closed when what saleID's waiters are told
	// changes.
	Watch(saleID string) <-chan struct{}
	// Now is this instance's clock corrected by the database's: the one
	// tickets and admission tokens are judged by.
	Now() time.Time
}

// Options configure a Room. Zero values take the defaults shown.
type Options struct {
	// AdmissionTTL is how long an admission token is good for. Default 120s.
	AdmissionTTL time.Duration
	// UseWindow is how long the pacer counts an admission not yet used for
	// a reservation as outstanding: one unused for longer was most likely
	// abandoned (the page reserves as soon as it hears it is admitted, and
	// a ticket the pacer may reach polls every second), so the pacer tops
	// the room up in its place. The token stays good for AdmissionTTL (one
	// used late is one reservation more than the bound asked; the stock's
	// CHECK still decides). Default 20s, at most AdmissionTTL + 15s.
	UseWindow time.Duration
	// VariantUseWindow is UseWindow for a sale with variants: its admitted
	// shopper first chooses a variant (from the availability the admission
	// answer carries) and then reserves, which takes longer than reserving
	// at once; counted abandoned after UseWindow, admissions still choosing
	// would be topped up by more than the units left can serve (more
	// sold_out after admission; never an oversell). Default 60s, at least
	// UseWindow, at most AdmissionTTL + 15s.
	VariantUseWindow time.Duration
	// Tick is the pacer's period. Default 200ms.
	Tick time.Duration
	// GatherWindow is how long the first ticket of a sale that needs a
	// position waits for others to arrive, so that one lease serves them
	// all (positions.go). Default 20ms.
	GatherWindow time.Duration
	// MaxBlock bounds the positions one lease takes. Default 256.
	MaxBlock int
	// TicketsPerMinute is how many new tickets one customer may take in one
	// sale per minute on one instance (tickets presented again do not
	// count; limit.go). Default 20.
	TicketsPerMinute int
	// Batch is the most reservations the purchase path completes at once
	// on one instance (--max-batch × --batches-in-flight): the pacer admits
	// at most Batch per measured latency (Step). 0: only the limiter's
	// headroom bounds a step.
	Batch int
	// AssumedPace is the admissions per second estimates assume before any
	// pace has been measured. Default 10.
	AssumedPace float64
	// LeaderRetry is how often an instance that does not lead the pacer
	// tries to. Default 1s.
	LeaderRetry time.Duration
	Logger      *slog.Logger
	Registry    prometheus.Registerer
	Now         func() time.Time
}

func (o *Options) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.AdmissionTTL, 120*time.Second)
	def(&o.UseWindow, 20*time.Second)
	o.UseWindow = min(o.UseWindow, o.AdmissionTTL+15*time.Second) // + the longest poll interval
	def(&o.VariantUseWindow, 60*time.Second)
	o.VariantUseWindow = min(max(o.VariantUseWindow, o.UseWindow), o.AdmissionTTL+15*time.Second)
	def(&o.Tick, 200*time.Millisecond)
	def(&o.GatherWindow, 20*time.Millisecond)
	def(&o.LeaderRetry, time.Second)
	if o.MaxBlock <= 0 {
		o.MaxBlock = 256
	}
	if o.TicketsPerMinute <= 0 {
		o.TicketsPerMinute = 20
	}
	if o.AssumedPace <= 0 {
		o.AssumedPace = 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Room is the waiting room of every waiting_room sale, as one instance serves
// it. What it knows of each sale and its room (watermark, pre-open count,
// pace, rules) is the sale cache's, kept current by the database's change
// notifications; nothing is kept per waiter. A status request is answered
// from memory. Safe for concurrent use.
type Room struct {
	cache    Memory
	store    flashline.RoomStore
	keys     *roomtoken.Keyring
	capacity Capacity
	opts     Options

	leaseMu sync.Mutex
	leases  map[string]*lease
	limiter *ticketLimiter

	leader  atomic.Bool
	metrics roomMetrics
	// edges is what the edges reported of their pre-open tickets; wm is the
	// last watermarks document signed, reused for watermarksReuse.
	edges edgeTally
	// admitted is when each room's ranks were admitted, as this instance
	// saw it (admitted.go).
	admitted admittedMarks
	// queue is this instance's counts of each line (analytics.go).
	queue queueStats
	// edgeLines is the edges' counts of the lines, as they reported them
	// (analytics.go): an origin writes them.
	edgeLines edgeLines
	wm        struct {
		sync.Mutex
		at  time.Time
		doc string
	}
}

type roomMetrics struct {
	tickets  *prometheus.CounterVec
	statuses *prometheus.CounterVec
	// byState are statuses' counters of the four states, looked up once:
	// a status answer is what a waiting crowd asks for most.
	byState map[string]prometheus.Counter
	// newTickets and presented are tickets' counters of its two kinds,
	// looked up once: a new pre-open ticket is what a crowd asks an edge
	// for most before the open.
	newTickets, presented prometheus.Counter
	// leases and leased count the leases of positions this instance took
	// (its own tickets' and its edges') and the positions they took.
	leases, leased prometheus.Counter
}

// NewRoom returns a Room that reads sales from cache (kept current by its
// owner: salecache.Cache.Run, for example), writes through store, signs with keys, and
// paces by capacity (the purchase path's limiter). Call RunPacer to take
// part in pacing.
func NewRoom(cache Memory, store flashline.RoomStore, keys *roomtoken.Keyring, capacity Capacity, opts Options) *Room {
	opts.setDefaults()
	r := &Room{
		cache:    cache,
		store:    store,
		keys:     keys,
		capacity: capacity,
		opts:     opts,
		leases:   map[string]*lease{},
		limiter:  &ticketLimiter{max: opts.TicketsPerMinute},
	}
	r.metrics = roomMetrics{
		tickets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_waitroom_tickets_total",
			Help: "Waiting-room tickets answered: kind=new (a position taken) or presented (a previous ticket given back).",
		}, []string{"kind"}),
		statuses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_waitroom_status_total",
			Help: "Waiting-room status answers by state.",
		}, []string{"state"}),
	}
	r.metrics.byState = map[string]prometheus.Counter{}
	for _, state := range []string{StatusWaiting, StatusChallengeRequired, StatusAdmitted, StatusSoldOut} {
		r.metrics.byState[state] = r.metrics.statuses.WithLabelValues(state)
	}
	r.metrics.newTickets = r.metrics.tickets.WithLabelValues("new")
	r.metrics.presented = r.metrics.tickets.WithLabelValues("presented")
	r.metrics.leases = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flashline_waitroom_leases_total",
		Help: "Leases of positions this instance took for the tickets placed by arrival, its own and its edges' (one UPDATE each; on an edge, one request to an origin).",
	})
	r.metrics.leased = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flashline_waitroom_leased_positions_total",
		Help: "Positions those leases took.",
	})
	opts.Registry.MustRegister(r.metrics.tickets, r.metrics.statuses, r.metrics.leases, r.metrics.leased, watermarks{r}, queueCollector{r},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashline_waitroom_pacer_leader",
			Help: "1 while this instance leads the waiting-room pacer.",
		}, func() float64 {
			if r.leader.Load() {
				return 1
			}
			return 0
		}))
	return r
}

// IsLeader reports whether this instance leads the pacer now.
func (r *Room) IsLeader() bool { return r.leader.Load() }

// room returns what the Room knows of saleID if it has a waiting room
// (ErrNotFound, or ErrNoWaitingRoom for a direct sale), reading it first
// when it is missing or stale. fresh is false when only a stale entry is
// left (the database cannot be read).
func (r *Room) room(ctx context.Context, saleID string) (s flashline.SaleFacts, fresh bool, err error) {
	s, fresh, err = r.cache.Sale(ctx, saleID)
	s = r.withEdges(s)
	switch {
	case err != nil:
		return s, false, fmt.Errorf("waiting room of sale %s: %w", saleID, err)
	case s.Admission != flashline.AdmissionWaitingRoom:
		return s, false, fmt.Errorf("waiting room of sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	}
	return s, fresh, nil
}

// rooms is every waiting room in memory.
func (r *Room) rooms() []flashline.SaleFacts {
	all := r.cache.Sales()
	rooms := all[:0]
	for _, s := range all {
		if s.Admission == flashline.AdmissionWaitingRoom {
			rooms = append(rooms, r.withEdges(s))
		}
	}
	return rooms
}

// withEdges is s with the pre-open tickets the edges reported to this
// instance (an origin) added to the room's count, until the crowd is
// frozen. An edge hears the sum in the watermarks, and keeps no tally.
func (r *Room) withEdges(s flashline.SaleFacts) flashline.SaleFacts {
	if s.Room.PreopenCount < 0 {
		s.Room.PreopenTickets += r.edges.sum(s.ID)
	}
	return s
}

// watermarks publishes each waiting room's watermark, as this instance knows
// it, for the rooms that have opened: the id of a sale not yet open is not
// announced in metrics (a bot that reads it early would take the front of an
// arrival-order line).
type watermarks struct{ r *Room }

var watermarkDesc = prometheus.NewDesc("flashline_waitroom_admitted_through",
	"The watermark of each waiting room as this instance knows it: ranks up to it may be admitted.", []string{"sale_id"}, nil)

func (w watermarks) Describe(ch chan<- *prometheus.Desc) { ch <- watermarkDesc }

func (w watermarks) Collect(ch chan<- prometheus.Metric) {
	now := w.r.opts.Now()
	for _, s := range w.r.rooms() {
		if s.Opened(now) {
			ch <- prometheus.MustNewConstMetric(watermarkDesc, prometheus.GaugeValue, float64(s.Room.AdmittedThrough), s.ID)
		}
	}
}
