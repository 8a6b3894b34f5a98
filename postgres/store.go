package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// Pools are the Store's connection pools, one per role, each sized on its
// own so that no role can starve another:
//   - Sale: the purchase path (reservations, and the rate limits of admitted
//     reservations), so a flood of buyers holds at most its connections;
//   - Admin: the admin API and operators' actions (extend, void), reads of
//     reservations, confirm, cancel and payment events: never delayed by
//     buyers or a waiting crowd;
//   - Room: the waiting room (new tickets' rate limits and position leases,
//     the pacer, whose leader holds one connection while it leads) and the
//     sale cache's reads;
//   - Jobs: the River jobs' statements (sweeper, invariant, pruning), so
//     that they name themselves in pg_stat_activity and stock_audit
//     (flashline-jobs) and a slow sweep never holds an admin connection.
//     Nil: the admin pool;
//   - Session: what needs a session of its own, which a pooler in
//     transaction mode (PgBouncer) cannot give: the pacer's leader, whose
//     leadership is a session advisory lock, and the LISTEN connection
//     (made like this pool's connections, named flashline-listen). Nil: the
//     room's pool.
//
// They may be the same pool (SinglePool), as in tests and the CLI.
//
// Every role but the purchase path waits for a connection, a full server
// included, for up to RoleWait (db.Acquire); the purchase path never waits
// longer than its batch may.
type Pools struct {
	Sale, Admin, Room, Jobs, Session *pgxpool.Pool
}

// RoleWait is how long confirm, cancel, payment events, the admin's calls,
// the waiting room and the jobs wait for a connection (a busy pool, or a
// server without a free slot) before they are answered overloaded, unless
// Options.RoleWait says otherwise.
const RoleWait = 5 * time.Second

// SinglePool is Pools with one pool in every role.
func SinglePool(p *pgxpool.Pool) Pools { return Pools{Sale: p, Admin: p, Room: p, Jobs: p} }

// Options configure a Store. Zero values take the defaults shown.
type Options struct {
	// ReserveTimeout bounds one reserve attempt, its wait for a batch
	// included (plus a COMMIT already sent): an attempt out of time is
	// answered ErrOverloaded with nothing written. The transaction runs to
	// the end even if the client hangs up, so that its retry finds the
	// stored answer rather than a half-done attempt. Default 5s.
	ReserveTimeout time.Duration
	// RoleWait is how long every role but the purchase path waits for a
	// connection (db.Acquire). Default RoleWait (5s); tests that are about
	// the contract, not about overload, wait longer on a loaded machine.
	RoleWait time.Duration
	// MaxBatch is the most reservations of one sale coalesced into one
	// transaction (1: one transaction per reservation), and BatchesInFlight
	// how many such transactions one sale may have running on this instance.
	// Defaults 64 and 1.
	MaxBatch        int
	BatchesInFlight int
	// QueueRounds bounds the reservations of one sale that may wait for a
	// batch on this instance, in rounds of batches (a round is MaxBatch ×
	// BatchesInFlight requests): a burst may fill them all, a queue that
	// stands is cut down to one or two (queueBound, coalescer.go). One more
	// is refused at once with ErrOverloaded. 0: no bound (serve sets
	// DefaultQueueRounds).
	QueueRounds int
	// OnBatch, when set, is told the size of every batch (for metrics).
	OnBatch func(size int)
	// OnConnWait, when set, is told how long every batch waited for a
	// connection of the purchase path's pool (the admission limiter's
	// signal: loadshed.Limiter.ObserveWait).
	OnConnWait func(time.Duration)
	// OnQueueFull, when set, is told of every request refused because its
	// sale's queue was full (for metrics).
	OnQueueFull func()
	// Logger takes what goes wrong in the background (a lost LISTEN
	// connection); nil discards it.
	Logger *slog.Logger
	// Beacon is the public randomness beacon a new lottery's draw waits
	// for (its first round after the registration closes, fixed at the
	// sale's creation); nil: the deployment has none, and a lottery's draw
	// rests on the store's seed alone.
	Beacon *flashline.BeaconChain
}

// Store implements flashline.Store, and what the sale cache
// (flashline.FactSource), the Redis gate (flashline.GateStore) and the
// waiting room (flashline.RoomStore) need of the database.
type Store struct {
	sale, admin, room, jobs, session *db
	opts                             Options

	batches coalescer

	testHookAfterBegin   func() // tests only: runs after a batch's first read
	testHookBeforeCommit func() // tests only: runs before a batch's COMMIT
}

var _ flashline.Store = (*Store)(nil)

// DefaultQueueRounds is the burst allowance of a sale's queue that serve
// sets (Options.QueueRounds): 8 rounds absorb a spike or a hiccup of the
// database, whose requests are served once it passes (about 9 batch times,
// 60-80 ms, at most), while a steady overload settles at one or two rounds.
const DefaultQueueRounds = 8

func (s *Store) logger() *slog.Logger { return s.opts.Logger }

// NewStore returns a Store on the given pools.
func NewStore(p Pools, opts Options) *Store {
	jobs, session := p.Jobs, p.Session
	if jobs == nil {
		jobs = p.Admin
	}
	if session == nil {
		session = p.Room
	}
	if opts.ReserveTimeout <= 0 {
		opts.ReserveTimeout = 5 * time.Second
	}
	if opts.RoleWait <= 0 {
		opts.RoleWait = RoleWait
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 64
	}
	if opts.BatchesInFlight <= 0 {
		opts.BatchesInFlight = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	waiting := func(p *pgxpool.Pool) *db { return &db{Pool: p, wait: opts.RoleWait} }
	s := &Store{sale: &db{Pool: p.Sale}, admin: waiting(p.Admin), room: waiting(p.Room), jobs: waiting(jobs), session: waiting(session), opts: opts}
	s.batches = coalescer{store: s, sales: make(map[string]*saleQueue)}
	return s
}

// CreateSale creates a sale, its stock rows and their opening ledger entries
// in one transaction. Whether it is open at once (a direct sale whose opening
// time is unset or past) is judged by the database's clock, as every later
// opening is: an instance whose clock runs ahead must not open a sale early.
func (s *Store) CreateSale(ctx context.Context, n flashline.NewSale) (flashline.Sale, error) {
	if err := n.Validate(); err != nil {
		return flashline.Sale{}, err
	}
	id := flashline.NewID(flashline.SaleIDPrefix)
	var buckets, quantities []int32
	var rowVariants []string // per stock row: its variant's SKU ("": none)
	var variants dbsqlc.VariantInsertParams
	if n.Variants == nil {
		buckets, quantities = flashline.VariantStock(0, flashline.NewVariant{Stock: n.InitialStock, Buckets: n.Buckets})
		rowVariants = make([]string, len(buckets))
	}
	for p, v := range n.Variants {
		b, q := flashline.VariantStock(p, v)
		buckets, quantities = append(buckets, b...), append(quantities, q...)
		for range b {
			rowVariants = append(rowVariants, v.SKU)
		}
		variants.Skus, variants.Titles = append(variants.Skus, v.SKU), append(variants.Titles, v.Title)
		variants.Positions = append(variants.Positions, int32(p))
		variants.InitialStocks = append(variants.InitialStocks, int32(v.Stock))
		variants.Buckets = append(variants.Buckets, int32(v.Buckets))
	}
	// The seed of the waiting room's pre-open draw: secret, so nobody can
	// compute a draw before the sale exists.
	seed := make([]byte, 16)
	if _, err := rand.Read(seed); err != nil {
		return flashline.Sale{}, fmt.Errorf("create sale: draw seed: %w", err)
	}
	var perInstrument *int32
	if n.PerInstrumentLimit > 0 {
		l := int32(n.PerInstrumentLimit)
		perInstrument = &l
	}
	err := withTx(ctx, s.admin, func(q *dbsqlc.Queries) error {
		now, err := q.DatabaseNow(ctx)
		if err != nil {
			return err
		}
		if _, err := q.SaleInsert(ctx, dbsqlc.SaleInsertParams{
			SaleID:                id,
			Sku:                   n.SKU,
			State:                 string(n.InitialState(now)),
			InitialStock:          int32(n.InitialStock),
			PerCustomerLimit:      int32(n.PerCustomerLimit),
			ReservationTtlSeconds: int32(n.ReservationTTLSeconds),
			OpensAt:               n.OpensAt,
			Admission:             string(n.Admission),
			Buckets:               int32(n.Buckets),
			Fairness:              string(n.Fairness),
			ChallengeBits:         int32(n.ChallengeBits),
			PerInstrumentLimit:    perInstrument,
			MinAccountAgeSeconds:  int32(n.MinAccountAgeSeconds),
			DrawSeed:              seed,
			Confirmation:          string(n.Confirmation),
			Gate:                  string(n.Gate),
			Title:                 optional(n.Title),
			ImageUrl:              optional(n.ImageURL),
			PriceAmount:           priceAmount(n.Price),
			PriceCurrency:         priceCurrency(n.Price),
			VariantCount:          int32(len(n.Variants)),
		}); err != nil {
			return err
		}
		if n.Variants != nil {
			variants.SaleID = id
			if err := q.VariantInsert(ctx, variants); err != nil {
				return err
			}
		}
		if n.Admission == flashline.AdmissionWaitingRoom {
			if err := q.WaitroomCreate(ctx, roomCreate(id, n, s.opts.Beacon)); err != nil {
				return err
			}
		}
		if n.Lottery != nil {
			if err := createLottery(ctx, q, id, *n.Lottery, s.opts.Beacon, len(n.Variants) > 0); err != nil {
				return err
			}
		}
		if err := q.StockInsert(ctx, dbsqlc.StockInsertParams{SaleID: id, Buckets: buckets, Quantities: quantities, Variants: rowVariants}); err != nil {
			return err
		}
		return q.StockLedgerInsertInitial(ctx, dbsqlc.StockLedgerInsertInitialParams{SaleID: id})
	})
	if err != nil {
		return flashline.Sale{}, fmt.Errorf("create sale: %w", translate(err))
	}
	return s.Sale(ctx, id)
}

// Sale reads a sale with its live counts.
func (s *Store) Sale(ctx context.Context, saleID string) (flashline.Sale, error) {
	row, err := dbsqlc.New(s.admin).SaleGet(ctx, dbsqlc.SaleGetParams{SaleID: saleID})
	if err != nil {
		return flashline.Sale{}, fmt.Errorf("sale %s: %w", saleID, translate(err))
	}
	sale := saleFromRow(row)
	if sale.Variants, err = saleVariants(ctx, dbsqlc.New(s.admin), saleID); err != nil {
		return flashline.Sale{}, fmt.Errorf("sale %s: variants: %w", saleID, translate(err))
	}
	if sale.Admission == flashline.AdmissionLottery {
		q := dbsqlc.New(s.admin)
		l, err := s.lottery(ctx, q, saleID)
		if err != nil {
			return flashline.Sale{}, err
		}
		if l.Counts, err = lotteryCounts(ctx, q, saleID); err != nil {
			return flashline.Sale{}, err
		}
		sale.Lottery = &l
	}
	return sale, nil
}

// saleVariants are a sale's variants in order with their live counts (none
// for a sale without variants).
func saleVariants(ctx context.Context, q *dbsqlc.Queries, saleID string) ([]flashline.Variant, error) {
	rows, err := q.VariantsOfSale(ctx, dbsqlc.VariantsOfSaleParams{SaleID: saleID})
	if err != nil {
		return nil, err
	}
	var out []flashline.Variant
	for _, v := range rows {
		out = append(out, flashline.Variant{SKU: v.Sku, Title: v.Title, InitialStock: int(v.InitialStock),
			Available: int(v.Available), Pending: int(v.Pending), Confirmed: int(v.Confirmed), OK: v.Ok != nil && *v.Ok})
	}
	return out, nil
}

func saleFromRow(r dbsqlc.SaleGetRow) flashline.Sale {
	sale := flashline.Sale{
		ID:                    r.SaleID,
		SKU:                   r.Sku,
		InitialStock:          int(r.InitialStock),
		Available:             int(r.Available),
		Pending:               int(r.Pending),
		Confirmed:             int(r.Confirmed),
		Expired:               int(r.Expired),
		Cancelled:             int(r.Cancelled),
		Voided:                int(r.Voided),
		LedgerTotal:           int(r.LedgerTotal),
		PerCustomerLimit:      int(r.PerCustomerLimit),
		ReservationTTLSeconds: int(r.ReservationTtlSeconds),
		Admission:             flashline.Admission(r.Admission),
		Buckets:               int(r.Buckets),
		Fairness:              flashline.Fairness(r.Fairness),
		ChallengeBits:         int(r.ChallengeBits),
		MinAccountAgeSeconds:  int(r.MinAccountAgeSeconds),
		Confirmation:          flashline.Confirmation(r.Confirmation),
		OpensAt:               r.OpensAt,
		CreatedAt:             r.CreatedAt,
		Gate:                  flashline.Gate(r.Gate),
		State:                 flashline.EffectiveState(flashline.SaleState(r.State), r.OpensAt, r.Now, int(r.Available)),
	}
	if r.PauseReason != nil {
		sale.PauseReason = *r.PauseReason
	}
	sale.Title = sale.SKU
	if r.Title != nil {
		sale.Title = *r.Title
	}
	if r.ImageUrl != nil {
		sale.ImageURL = *r.ImageUrl
	}
	sale.Price = priceFrom(r.PriceAmount, r.PriceCurrency)
	if r.PerInstrumentLimit != nil {
		sale.PerInstrumentLimit = int(*r.PerInstrumentLimit)
	}
	// The view's counts are computed by this very read; a failed verdict of
	// the invariant job stands until an admin resumes the sale.
	now := r.Now
	sale.Invariant = flashline.Invariant{OK: r.CountsOk != nil && *r.CountsOk, CheckedAt: &now}
	if r.InvariantOk != nil && !*r.InvariantOk {
		sale.Invariant = flashline.Invariant{CheckedAt: r.InvariantCheckedAt}
		if r.InvariantDetail != nil {
			sale.Invariant.Detail = *r.InvariantDetail
		}
	}
	if !sale.Invariant.OK && sale.Invariant.Detail == "" {
		sale.Invariant.Detail = mismatchDetail(sale.Available, sale.Pending, sale.Confirmed, sale.InitialStock, sale.LedgerTotal)
	}
	return sale
}

// SaleIDs lists a page of sales, newest first (flashline.SaleQuery).
func (s *Store) SaleIDs(ctx context.Context, q flashline.SaleQuery) ([]string, error) {
	if q.Limit < 1 || q.Limit > flashline.MaxSalePage {
		return nil, flashline.Invalid(fmt.Sprintf("a page of sales holds 1 to %d", flashline.MaxSalePage))
	}
	states := make([]string, len(q.States))
	for i, st := range q.States {
		states[i] = string(st)
	}
	db := dbsqlc.New(s.admin)
	ids, err := db.SaleList(ctx, dbsqlc.SaleListParams{After: q.After, States: states, MaxRows: int32(q.Limit)})
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", translate(err))
	}
	if len(ids) == 0 && q.After != "" {
		// An unknown cursor reads as an empty page: say so instead.
		found, err := db.SaleExists(ctx, dbsqlc.SaleExistsParams{SaleID: q.After})
		if err != nil {
			return nil, fmt.Errorf("list sales: %w", translate(err))
		}
		if !found {
			return nil, flashline.Invalid("after: no sale " + q.After)
		}
	}
	return ids, nil
}

// SetSaleState applies an admin action (open, pause, resume, close), as the
// domain's state machine allows (flashline.SaleAction.Transition): one
// conditional update from the allowed states.
//
// The move is audited under the operator ctx names (flashline.WithOperator;
// DefaultOperator when none) by the statement that makes it.
func (s *Store) SetSaleState(ctx context.Context, saleID string, action flashline.SaleAction) (flashline.Sale, error) {
	to, from, err := action.Transition()
	if err != nil {
		return flashline.Sale{}, err
	}
	operator := flashline.OperatorOf(ctx)
	if err := flashline.CheckOperator(operator); err != nil {
		return flashline.Sale{}, err
	}
	if action == flashline.ActionResume {
		// A sale paused because its stock did not add up opens again only if
		// it adds up now.
		results, err := s.checkInvariants(ctx, s.admin, saleID)
		if err != nil {
			return flashline.Sale{}, err
		}
		for _, r := range results {
			if !r.OK {
				return flashline.Sale{}, fmt.Errorf("resume sale %s: %s: %w", saleID, r.Detail, flashline.ErrInvariantBroken)
			}
		}
	}
	var reason *string
	if action == flashline.ActionPause {
		r := "paused by admin"
		reason = &r
	}
	fromStates := make([]string, len(from))
	for i, f := range from {
		fromStates[i] = string(f)
	}
	_, err = dbsqlc.New(s.admin).SaleSetState(ctx, dbsqlc.SaleSetStateParams{
		State: string(to), OpenNow: action == flashline.ActionOpen, PauseReason: reason, SaleID: saleID, FromStates: fromStates,
		Action: string(action), Operator: operator,
	})
	if notFound(err) {
		// Unknown sale, or a transition that is not allowed: tell which.
		if _, err := s.Sale(ctx, saleID); err != nil {
			return flashline.Sale{}, err
		}
		return flashline.Sale{}, fmt.Errorf("%s sale %s: %w", action, saleID, flashline.ErrInvalidTransition)
	}
	if err != nil {
		return flashline.Sale{}, fmt.Errorf("%s sale %s: %w", action, saleID, translate(err))
	}
	return s.Sale(ctx, saleID)
}

// priceFrom is a sale's price from its columns (nil: none).
func priceFrom(amount *int64, currency *string) *flashline.Price {
	if amount == nil || currency == nil {
		return nil
	}
	return &flashline.Price{Amount: *amount, Currency: *currency}
}

func priceAmount(p *flashline.Price) *int64 {
	if p == nil {
		return nil
	}
	return &p.Amount
}

func priceCurrency(p *flashline.Price) *string {
	if p == nil {
		return nil
	}
	return &p.Currency
}
