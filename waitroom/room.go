package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/reload"
	"github.com/flashline/flashline/salecache"
	"github.com/flashline/flashline/sql/dbsqlc"
)

// Channel is the Room's own notification channel (migration 000003: the
// watermark moved, the pre-open count was frozen, a room was made). The Room
// also listens on salecache.Channel (migration 000002: a sale's state or
// opening time changed, or it ran out of stock or got some back).
const Channel = "flashline_waitroom"

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

// RateLimiter counts hits across instances (*postgres.Store): nil or
// flashline.ErrRateLimited.
type RateLimiter interface {
	RateLimit(ctx context.Context, scope, subject string, window time.Duration, max int) error
}

// Options configure a Room. Zero values take the defaults shown.
type Options struct {
	// AdmissionTTL is how long an admission token is good for. Default 120s.
	AdmissionTTL time.Duration
	// Tick is the pacer's period. Default 200ms.
	Tick time.Duration
	// RefreshInterval is how often the sales in memory are re-read, as the
	// fallback for a missed notification. Default 1s.
	RefreshInterval time.Duration
	// StaleAfter is how long a sale's entry is trusted without a successful
	// read; an older one is read again before it is used. Default 3s.
	StaleAfter time.Duration
	// BlockSize is the first number of positions an instance leases at once
	// for a sale; it then adapts to the arrival rate, between 1 and MaxBlock.
	// Default 8.
	BlockSize int
	// MaxBlock bounds the lease size. Default 256.
	MaxBlock int
	// LeaseIdle drops a lease from which no position was taken for this
	// long, and LeaseMaxAge one older than this, so that positions handed out
	// by different instances stay close to arrival order. Defaults 250ms, 1s.
	LeaseIdle   time.Duration
	LeaseMaxAge time.Duration
	// TicketsPerMinute is how many new positions one customer may take in one
	// sale per minute (tickets presented again do not count). Default 20.
	TicketsPerMinute int
	// AssumedPace is the admissions per second estimates assume before any
	// pace has been measured. Default 10.
	AssumedPace float64
	// LeaderRetry is how often an instance that does not lead the pacer
	// tries to. Default 1s.
	LeaderRetry time.Duration
	// RateLimiter limits new tickets per customer and sale; nil: no limit.
	RateLimiter RateLimiter
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
	def(&o.Tick, 200*time.Millisecond)
	def(&o.RefreshInterval, time.Second)
	def(&o.StaleAfter, 3*time.Second)
	def(&o.LeaseIdle, 250*time.Millisecond)
	def(&o.LeaseMaxAge, time.Second)
	def(&o.LeaderRetry, time.Second)
	if o.BlockSize <= 0 {
		o.BlockSize = 8
	}
	if o.MaxBlock <= 0 {
		o.MaxBlock = 256
	}
	o.BlockSize = min(o.BlockSize, o.MaxBlock)
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
// it. It keeps per sale, in memory, what the database says about the room
// (watermark, pre-open count, pace) and the sale (state, opening time, stock
// left, policy), kept current by LISTEN/NOTIFY and a periodic refresh, like
// salecache; nothing per waiter. A status request is answered from memory.
// Safe for concurrent use.
type Room struct {
	pool     *pgxpool.Pool
	keys     *Keyring
	capacity Capacity
	opts     Options

	mu    sync.RWMutex
	sales map[string]*saleInfo // replaced whole on every read, never changed

	flights singleflight.Group // on-demand reads under way, by sale

	leaseMu sync.Mutex
	leases  map[string]*lease

	reloader *reload.Reloader

	leader  atomic.Bool
	metrics roomMetrics
}

type roomMetrics struct {
	tickets   *prometheus.CounterVec
	statuses  *prometheus.CounterVec
	watermark *prometheus.GaugeVec
	leader    prometheus.GaugeFunc
}

// saleInfo is what the Room knows of one sale, as of loaded. found is false
// for a sale the database does not have.
type saleInfo struct {
	id              string
	found           bool
	admission       string
	state           string
	opensAt         *time.Time
	fairness        string
	challengeBits   int
	minAccountAge   int
	seed            []byte
	hasStock        bool
	nextPosition    int64
	preopenCount    int64 // -1: not frozen yet (the sale has not opened)
	admittedThrough int64
	pace            float64
	loaded          time.Time
}

// NewRoom returns a Room reading through pool (the admin pool), signing with
// keys, and pacing by capacity (the purchase path's limiter). Call Load to
// start warm, Run to keep it current and RunPacer to take part in pacing.
func NewRoom(pool *pgxpool.Pool, keys *Keyring, capacity Capacity, opts Options) *Room {
	opts.setDefaults()
	r := &Room{
		pool:     pool,
		keys:     keys,
		capacity: capacity,
		opts:     opts,
		sales:    map[string]*saleInfo{},
		leases:   map[string]*lease{},
	}
	r.reloader = &reload.Reloader{
		Name: "waitroom", Pool: pool, Channels: []string{Channel, salecache.Channel},
		Interval: opts.RefreshInterval, Logger: opts.Logger,
		Load: func(ctx context.Context, saleID string) error {
			if saleID == reload.All {
				return r.load(ctx, nil)
			}
			return r.load(ctx, &saleID)
		},
		Wants: func(channel, saleID string) bool {
			switch {
			case saleID == reload.All:
				// Nothing in memory, nothing to refresh: a deployment
				// without waiting rooms pays no query. A new room
				// announces itself (waiting_rooms_created), and a sale
				// asked about is read then.
				r.mu.RLock()
				defer r.mu.RUnlock()
				return len(r.sales) > 0
			case channel == salecache.Channel:
				return r.cached(saleID) != nil // a sale this instance was asked about
			}
			return true
		},
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
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashline_waitroom_admitted_through",
			Help: "The watermark of each waiting room as this instance knows it: ranks up to it may be admitted.",
		}, []string{"sale_id"}),
		leader: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashline_waitroom_pacer_leader",
			Help: "1 while this instance leads the waiting-room pacer.",
		}, func() float64 {
			if r.leader.Load() {
				return 1
			}
			return 0
		}),
	}
	opts.Registry.MustRegister(r.metrics.tickets, r.metrics.statuses, r.metrics.watermark, r.metrics.leader)
	return r
}

// IsLeader reports whether this instance leads the pacer now.
func (r *Room) IsLeader() bool { return r.leader.Load() }

// ----- What the Room knows of each sale -----

// Load reads every waiting-room sale now: the pre-warm before serving.
func (r *Room) Load(ctx context.Context) error { return r.load(ctx, nil) }

func (r *Room) load(ctx context.Context, saleID *string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := dbsqlc.New(r.pool).WaitroomSales(ctx, saleID)
	if err != nil {
		return fmt.Errorf("waitroom: load: %w", err)
	}
	now := r.opts.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range rows {
		s := &saleInfo{
			id:              row.SaleID,
			found:           true,
			admission:       row.Admission,
			state:           row.State,
			opensAt:         row.OpensAt,
			fairness:        row.Fairness,
			challengeBits:   int(row.ChallengeBits),
			minAccountAge:   int(row.MinAccountAgeSeconds),
			seed:            row.DrawSeed,
			hasStock:        row.HasStock,
			nextPosition:    row.NextPosition,
			preopenCount:    -1,
			admittedThrough: row.AdmittedThrough,
			pace:            row.PacePerSecond,
			loaded:          now,
		}
		if row.PreopenCount != nil {
			s.preopenCount = *row.PreopenCount
		}
		if old := r.sales[s.id]; old != nil && old.found && old.admittedThrough > s.admittedThrough {
			// A read that started before a newer one finished must not move
			// the watermark back in memory either.
			s.admittedThrough, s.preopenCount = old.admittedThrough, old.preopenCount
		}
		r.sales[s.id] = s
		// The id of a sale not yet open is not announced in metrics: a bot
		// that reads it early takes the front of an arrival-order line.
		if s.admission == flashline.AdmissionWaitingRoom && (s.state != flashline.StateScheduled || s.opened(now)) {
			r.metrics.watermark.WithLabelValues(s.id).Set(float64(s.admittedThrough))
		}
	}
	if saleID == nil {
		// Entries the periodic read no longer covers (direct sales asked
		// about, rooms closed long ago) are forgotten after a
		// minute; asking again reads them again.
		for id, s := range r.sales {
			if now.Sub(s.loaded) > time.Minute {
				delete(r.sales, id)
				r.metrics.watermark.DeleteLabelValues(id)
			}
		}
	}
	return nil
}

func (r *Room) cached(saleID string) *saleInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sales[saleID]
}

func (r *Room) trusted(s *saleInfo) bool {
	return s != nil && r.opts.Now().Sub(s.loaded) <= r.opts.StaleAfter
}

// sale returns what the Room knows of saleID, reading it first when it is
// missing or stale (one read per sale at a time, however many ask). trusted
// is false when the read failed and only a stale entry is left; s is nil
// (and err set) when there is nothing at all. A sale the database does not
// have comes back with found false and is not kept: ids are the client's to
// choose, and a cache of what does not exist would be theirs to fill.
func (r *Room) sale(ctx context.Context, saleID string) (s *saleInfo, trusted bool, err error) {
	if s = r.cached(saleID); r.trusted(s) {
		return s, true, nil
	}
	read := r.flights.DoChan(saleID, func() (any, error) {
		// Detached from the first caller, whom others may be waiting
		// behind; load bounds itself.
		err := r.load(context.WithoutCancel(ctx), &saleID)
		if err != nil {
			r.opts.Logger.WarnContext(ctx, "waitroom: read sale", "sale_id", saleID, "err", err)
		}
		if s := r.cached(saleID); s != nil {
			return s, nil // fresh, or stale when the read failed
		}
		if err != nil {
			return nil, err
		}
		return &saleInfo{id: saleID, loaded: r.opts.Now()}, nil
	})
	select {
	case res := <-read:
		if res.Err != nil {
			return nil, false, errors.Join(flashline.ErrUnavailable, res.Err)
		}
		s = res.Val.(*saleInfo)
		return s, r.trusted(s), nil
	case <-ctx.Done():
		return nil, false, errors.Join(flashline.ErrUnavailable, ctx.Err())
	}
}

// room returns the sale if it has a waiting room: ErrNotFound, or
// ErrNoWaitingRoom for a direct sale.
func (r *Room) room(ctx context.Context, saleID string) (*saleInfo, bool, error) {
	s, trusted, err := r.sale(ctx, saleID)
	switch {
	case err != nil:
		return nil, false, err
	case !s.found:
		return nil, false, fmt.Errorf("waiting room of sale %s: %w", saleID, flashline.ErrNotFound)
	case s.admission != flashline.AdmissionWaitingRoom:
		return nil, false, fmt.Errorf("waiting room of sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	}
	return s, trusted, nil
}

// opened reports whether the sale has opened by the instance's clock (it
// may be paused since). The database's clock decides what is stored; this
// only shapes estimates and when a pre-open lease is dropped.
func (s *saleInfo) opened(now time.Time) bool {
	return s.opensAt != nil && !s.opensAt.After(now)
}

// ----- Keeping it current -----

// Run keeps the Room current until ctx is done: it listens for
// notifications and re-reads the sales in memory every RefreshInterval.
func (r *Room) Run(ctx context.Context) error { return r.reloader.Run(ctx) }

// ----- Tickets -----

// TicketRequest is a customer asking for a place in a sale's waiting room.
type TicketRequest struct {
	SaleID     string
	CustomerID string
	// AccountCreated is from the customer's token (zero: not said); a sale
	// with minAccountAgeSeconds refuses accounts younger than that.
	AccountCreated time.Time
	// PreviousToken is the ticket the customer holds, if any: given back
	// unchanged when it is theirs and this sale's.
	PreviousToken string
}

// Challenge is a proof of work to solve before admission (see challenge.go).
type Challenge struct {
	Nonce string
	Bits  int
}

// TicketResult is a ticket with where it stands now.
type TicketResult struct {
	Token  string
	Ticket Ticket
	// Renewed is set when PreviousToken was given back.
	Renewed bool
	// Position is the place in line now: 1 is next to be let in. Before a
	// randomized_at_open sale opens it is an estimate (the draw's place among
	// those present so far).
	Position             int64
	EstimatedWaitSeconds int64
	PollAfter            time.Duration
	Policy               string
	// Challenge is nil when the sale asks none.
	Challenge *Challenge
}

// Ticket gives the customer a place in the sale's waiting room, or gives back
// the ticket they hold. A new place is the next position leased to this
// instance; before the sale opens the ticket is marked pre-open and carries
// the customer's draw, so that under randomized_at_open asking again cannot
// re-roll the place. Errors: ErrNotFound, ErrNoWaitingRoom, ErrSaleNotOpen
// (closed), ErrSoldOut, ErrAccountTooNew, ErrRateLimited, ErrUnavailable.
func (r *Room) Ticket(ctx context.Context, req TicketRequest) (TicketResult, error) {
	s, trusted, err := r.room(ctx, req.SaleID)
	if err != nil {
		return TicketResult{}, err
	}
	now := r.opts.Now()
	switch {
	case !trusted:
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrUnavailable)
	case s.state == flashline.StateClosed:
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrSaleNotOpen)
	case !flashline.AccountOldEnough(req.AccountCreated, s.minAccountAge, now):
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrAccountTooNew)
	}
	if req.PreviousToken != "" {
		t, err := r.keys.ParseTicket(req.PreviousToken)
		if err == nil && t.SaleID == req.SaleID && t.CustomerID == req.CustomerID {
			r.metrics.tickets.WithLabelValues("presented").Inc()
			return r.ticketResult(s, t, req.PreviousToken, true, now), nil
		}
		// Anything else (forged, expired key, someone else's) is ignored:
		// the customer gets a new place, never a better one than a new
		// arrival's.
	}
	if !s.hasStock {
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrSoldOut)
	}
	if len(req.CustomerID) > MaxIDLen {
		return TicketResult{}, flashline.Invalid(fmt.Sprintf("the waiting room takes customer ids of at most %d bytes", MaxIDLen))
	}
	if r.opts.RateLimiter != nil {
		if err := r.opts.RateLimiter.RateLimit(ctx, "ticket", req.SaleID+"\n"+req.CustomerID, time.Minute, r.opts.TicketsPerMinute); err != nil {
			return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, err)
		}
	}
	position, preOpen, err := r.takePosition(ctx, s)
	if err != nil {
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, err)
	}
	t := Ticket{SaleID: req.SaleID, CustomerID: req.CustomerID, ArrivedAt: now.UTC().Truncate(time.Second), Position: position, PreOpen: preOpen}
	if preOpen {
		t.Draw = Draw(s.seed, req.SaleID, req.CustomerID)
	}
	r.metrics.tickets.WithLabelValues("new").Inc()
	return r.ticketResult(s, t, r.keys.SignTicket(t), false, now), nil
}

func (r *Room) ticketResult(s *saleInfo, t Ticket, token string, renewed bool, now time.Time) TicketResult {
	w := r.wait(s, t, now)
	res := TicketResult{
		Token:                token,
		Ticket:               t,
		Renewed:              renewed,
		Position:             w.position,
		EstimatedWaitSeconds: w.seconds,
		PollAfter:            w.pollAfter,
		Policy:               s.fairness,
	}
	if s.challengeBits > 0 {
		res.Challenge = &Challenge{Nonce: r.keys.ChallengeNonce(t), Bits: s.challengeBits}
	}
	return res
}

// Rank is a ticket's place in the admission order, in the units of the
// watermark. Under randomized_at_open a pre-open ticket ranks by its draw
// among the preopenCount positions handed out before the open:
// 1 + floor(draw / 2^64 × preopenCount); every other ticket by its position
// (post-open positions all come after preopenCount). preopenCount < 0 means
// not yet known: the caller passes an estimate.
func Rank(t Ticket, fairness string, preopenCount int64) int64 {
	if !t.PreOpen || fairness != flashline.FairnessRandomizedAtOpen {
		return t.Position
	}
	n := max(preopenCount, 1)
	hi, _ := bits.Mul64(t.Draw, uint64(n)) // floor(draw × n / 2^64), exactly
	return 1 + int64(hi)
}

func (s *saleInfo) rank(t Ticket) int64 {
	n := s.preopenCount
	if n < 0 {
		// Not frozen yet: everyone present so far.
		n = s.nextPosition - 1
	}
	return Rank(t, s.fairness, max(n, t.Position))
}

type estimate struct {
	position  int64
	seconds   int64
	pollAfter time.Duration
}

// wait estimates how long a ticket has to wait, conservatively: the distance
// to the watermark at the last measured pace (AssumedPace before there is
// one), rounded up and taken 1.5 times, plus the time until the sale opens.
// The poll interval grows with the wait, from 1s near the front to 15s far
// back, jittered ±30% so that waiters do not poll in step.
func (r *Room) wait(s *saleInfo, t Ticket, now time.Time) estimate {
	distance := max(s.rank(t)-s.admittedThrough, 1)
	pace := s.pace
	if pace <= 0 {
		pace = r.opts.AssumedPace
	}
	secs := math.Ceil(float64(distance)/pace) * 1.5
	if s.opensAt != nil && s.opensAt.After(now) {
		secs += math.Ceil(s.opensAt.Sub(now).Seconds())
	}
	e := estimate{position: distance, seconds: int64(math.Ceil(secs))}
	base := min(max(time.Duration(secs*float64(time.Second))/5, time.Second), 15*time.Second)
	if distance <= 1 {
		base = time.Second
	}
	e.pollAfter = time.Duration(float64(base) * (0.7 + 0.6*rand.Float64())).Round(time.Millisecond)
	return e
}

// ----- Positions -----

// lease is a block of positions [next, end) this instance may hand out for
// one sale.
type lease struct {
	mu       sync.Mutex
	next     int64
	end      int64
	preOpen  bool // leased before the sale opened (by the database's clock)
	takenAt  time.Time
	lastUsed time.Time
	block    int64
}

// takePosition hands out the next position of this instance's lease for the
// sale, leasing a new block when the lease is used up, idle for LeaseIdle,
// older than LeaseMaxAge, or leased before an open this instance now sees.
// The block doubles when a lease was used up quickly and halves when most of
// one went unused, so that a busy sale costs one UPDATE per many tickets and
// a quiet one wastes few positions.
func (r *Room) takePosition(ctx context.Context, s *saleInfo) (position int64, preOpen bool, err error) {
	r.leaseMu.Lock()
	l := r.leases[s.id]
	if l == nil {
		l = &lease{block: int64(r.opts.BlockSize)}
		r.leases[s.id] = l
	}
	r.leaseMu.Unlock()

	l.mu.Lock()
	defer l.mu.Unlock()
	now := r.opts.Now()
	usable := l.next < l.end &&
		now.Sub(l.lastUsed) <= r.opts.LeaseIdle &&
		now.Sub(l.takenAt) <= r.opts.LeaseMaxAge &&
		!(l.preOpen && s.opened(now))
	if !usable {
		switch {
		case l.end == 0:
		case l.next >= l.end && now.Sub(l.takenAt) < r.opts.LeaseIdle:
			l.block *= 2
		case l.end-l.next > l.block/2:
			l.block /= 2
		}
		l.block = min(max(l.block, 1), int64(r.opts.MaxBlock))
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		row, err := dbsqlc.New(r.pool).WaitroomLease(ctx, l.block, s.id)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false, flashline.ErrNoWaitingRoom
		}
		if err != nil {
			l.next, l.end = 0, 0
			return 0, false, errors.Join(flashline.ErrUnavailable, fmt.Errorf("lease positions: %w", err))
		}
		l.next, l.end = row.FirstPosition, row.FirstPosition+l.block
		l.preOpen = row.PreopenCount == nil
		l.takenAt = now
	}
	position = l.next
	l.next++
	l.lastUsed = now
	return position, l.preOpen, nil
}

// ----- Status -----

// StatusResult is where a ticket stands.
type StatusResult struct {
	State string
	// Waiting: the place in line now (1 = next), the estimate, when to ask
	// again, and whether the sale is paused (nobody is let in meanwhile).
	Position             int64
	EstimatedWaitSeconds int64
	PollAfter            time.Duration
	Paused               bool
	// ChallengeRequired: the proof of work to solve and send as solution.
	Challenge *Challenge
	// Admitted: the admission token for X-Admission-Token, good for one
	// reservation until it expires.
	AdmissionToken string
	ExpiresIn      time.Duration
}

// Status says where a ticket stands: waiting, challenge_required, admitted or
// sold_out. It verifies the ticket with the keyring and answers from memory:
// no database round trip unless the sale's entry is missing or stale. When
// the database cannot be read and only a stale entry is left, the answer is
// "waiting" (come back shortly): nobody is admitted on stale knowledge.
// Errors: ErrAdmissionInvalid (a ticket not valid, or not this customer's or
// this sale's), ErrNotFound, ErrNoWaitingRoom, ErrSaleNotOpen (closed),
// ErrUnavailable.
func (r *Room) Status(ctx context.Context, saleID, customerID, token, solution string) (StatusResult, error) {
	t, err := r.keys.ParseTicket(token)
	if err != nil {
		return StatusResult{}, errors.Join(flashline.ErrAdmissionInvalid, err)
	}
	if t.SaleID != saleID || t.CustomerID != customerID {
		return StatusResult{}, fmt.Errorf("status in sale %s: ticket is for another sale or customer: %w", saleID, flashline.ErrAdmissionInvalid)
	}
	s, trusted, err := r.room(ctx, saleID)
	if err != nil {
		return StatusResult{}, err
	}
	res, err := r.status(s, trusted, t, solution)
	if err == nil {
		r.metrics.statuses.WithLabelValues(res.State).Inc()
	}
	return res, err
}

func (r *Room) status(s *saleInfo, trusted bool, t Ticket, solution string) (StatusResult, error) {
	now := r.opts.Now()
	if s.state == flashline.StateClosed {
		return StatusResult{}, fmt.Errorf("status in sale %s: %w", s.id, flashline.ErrSaleNotOpen)
	}
	waiting := func() StatusResult {
		w := r.wait(s, t, now)
		res := StatusResult{State: StatusWaiting, Position: w.position, EstimatedWaitSeconds: w.seconds,
			PollAfter: w.pollAfter, Paused: s.state == flashline.StatePaused}
		if !trusted {
			res.PollAfter = max(res.PollAfter, 5*time.Second)
		}
		return res
	}
	switch {
	case !trusted:
		return waiting(), nil
	case !s.hasStock:
		return StatusResult{State: StatusSoldOut}, nil
	case s.state == flashline.StatePaused, s.rank(t) > s.admittedThrough:
		// The watermark moves only once the database's clock says the sale
		// is open, so rank <= watermark also means "open".
		return waiting(), nil
	case s.challengeBits > 0 && !r.keys.VerifyChallenge(t, solution, s.challengeBits):
		return StatusResult{State: StatusChallengeRequired,
			Challenge: &Challenge{Nonce: r.keys.ChallengeNonce(t), Bits: s.challengeBits}}, nil
	}
	a := Admission{ID: AdmissionID(t), SaleID: t.SaleID, CustomerID: t.CustomerID, ExpiresAt: now.Add(r.opts.AdmissionTTL)}
	return StatusResult{State: StatusAdmitted, AdmissionToken: r.keys.SignAdmission(a), ExpiresIn: r.opts.AdmissionTTL}, nil
}

// ----- Policy -----

// Policy is a sale's published fairness policy.
type Policy struct {
	Policy      string
	Description string
}

// Policy returns the sale's fairness policy in words a customer can read,
// with the other rules that decide who gets in.
func (r *Room) Policy(ctx context.Context, saleID string) (Policy, error) {
	s, _, err := r.room(ctx, saleID)
	if err != nil {
		return Policy{}, err
	}
	p := Policy{Policy: s.fairness}
	switch s.fairness {
	case flashline.FairnessArrivalOrder:
		p.Description = "Everyone is placed in the order they joined the waiting room, before and after the sale opens. " +
			"Refreshing the page or joining again never moves you forward."
	default:
		p.Description = "Everyone who joins the waiting room before the sale opens is placed by a random draw made for your account and this sale: " +
			"joining early, refreshing the page or joining again does not change your place, so there is no need to rush. " +
			"People who join after the sale opens are placed after them, in the order they join."
	}
	p.Description += " People are let in at the pace the checkout can handle, and each admission is good for one reservation for a limited time."
	if s.challengeBits > 0 {
		p.Description += " Before you are let in, your browser solves a small puzzle; this slows down automated buying."
	}
	if s.minAccountAge > 0 {
		p.Description += fmt.Sprintf(" Accounts created less than %s before joining cannot take part.", humanDuration(s.minAccountAge))
	}
	return p, nil
}

func humanDuration(secs int) string {
	switch {
	case secs%86400 == 0:
		return plural(secs/86400, "day")
	case secs%3600 == 0:
		return plural(secs/3600, "hour")
	case secs%60 == 0:
		return plural(secs/60, "minute")
	}
	return plural(secs, "second")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
