package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/sql/dbsqlc"
)

// Store implements flashline.Store.
type Store struct {
	// sale is the purchase path's pool: reserve only, so a flood of buyers
	// can hold at most its connections.
	sale *pgxpool.Pool
	// admin serves everything else: sale administration, reads, confirm and
	// cancel, so a saturated purchase path never delays them.
	admin *pgxpool.Pool
	// ReserveTimeout bounds one reserve attempt, its wait for a batch
	// included. The transaction runs to the end even if the client hangs up,
	// so that its retry finds the stored answer rather than a half-done
	// attempt.
	ReserveTimeout time.Duration
	// MaxBatch is the most reservations of one sale coalesced into one
	// transaction (1: one transaction per reservation), and BatchesInFlight
	// how many such transactions one sale may have running on this instance.
	MaxBatch        int
	BatchesInFlight int
	// QueueRounds bounds the reservations of one sale that may wait for a
	// batch on this instance, in rounds of batches (a round is MaxBatch ×
	// BatchesInFlight requests): a burst may fill them all, a queue that
	// stands is cut down to one or two (queueBound, batch.go). One more is
	// refused at once with ErrOverloaded. 0: no bound (serve sets
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

	batches coalescer

	testHookAfterBegin func() // tests only: runs after a batch's first read
}

var _ flashline.Store = (*Store)(nil)

// DefaultQueueRounds is the burst allowance of a sale's queue that serve
// sets (Store.QueueRounds): 8 rounds absorb a spike or a hiccup of the
// database, whose requests are served once it passes (about 9 batch times,
// 60-80 ms, at most), while a steady overload settles at one or two rounds.
const DefaultQueueRounds = 8

// NewStore returns a Store using salePool for reservations and adminPool for
// everything else (they may be the same pool).
func NewStore(salePool, adminPool *pgxpool.Pool) *Store {
	s := &Store{sale: salePool, admin: adminPool, ReserveTimeout: 5 * time.Second, MaxBatch: 64, BatchesInFlight: 1}
	s.batches = coalescer{store: s, sales: make(map[string]*saleQueue)}
	return s
}

// CreateSale creates a sale, its stock rows and their opening ledger entries
// in one transaction.
func (s *Store) CreateSale(ctx context.Context, n flashline.NewSale) (flashline.Sale, error) {
	if err := n.Validate(); err != nil {
		return flashline.Sale{}, err
	}
	id := flashline.NewID(flashline.SaleIDPrefix)
	state := flashline.StateScheduled
	if n.OpensAt == nil || !n.OpensAt.After(time.Now()) {
		if n.Admission == flashline.AdmissionDirect {
			state = flashline.StateOpen
		}
	}
	buckets := make([]int32, n.Buckets)
	quantities := make([]int32, n.Buckets)
	for b := range buckets {
		buckets[b] = int32(b)
		quantities[b] = int32(n.InitialStock / n.Buckets)
		if b < n.InitialStock%n.Buckets {
			quantities[b]++
		}
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
		if _, err := q.SaleInsert(ctx, dbsqlc.SaleInsertParams{
			SaleID:                id,
			Sku:                   n.SKU,
			State:                 state,
			InitialStock:          int32(n.InitialStock),
			PerCustomerLimit:      int32(n.PerCustomerLimit),
			ReservationTtlSeconds: int32(n.ReservationTTLSeconds),
			OpensAt:               n.OpensAt,
			Admission:             n.Admission,
			Buckets:               int32(n.Buckets),
			Fairness:              n.Fairness,
			ChallengeBits:         int32(n.ChallengeBits),
			PerInstrumentLimit:    perInstrument,
			MinAccountAgeSeconds:  int32(n.MinAccountAgeSeconds),
			DrawSeed:              seed,
		}); err != nil {
			return err
		}
		if n.Admission == flashline.AdmissionWaitingRoom {
			if err := q.WaitroomCreate(ctx, id); err != nil {
				return err
			}
		}
		if err := q.StockInsert(ctx, id, buckets, quantities); err != nil {
			return err
		}
		return q.StockLedgerInsertInitial(ctx, id)
	})
	if err != nil {
		return flashline.Sale{}, fmt.Errorf("create sale: %w", translate(err))
	}
	return s.Sale(ctx, id)
}

// Sale reads a sale with its live counts.
func (s *Store) Sale(ctx context.Context, saleID string) (flashline.Sale, error) {
	row, err := dbsqlc.New(s.admin).SaleGet(ctx, saleID)
	if err != nil {
		return flashline.Sale{}, fmt.Errorf("sale %s: %w", saleID, translate(err))
	}
	return saleFromRow(row), nil
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
		LedgerTotal:           int(r.LedgerTotal),
		PerCustomerLimit:      int(r.PerCustomerLimit),
		ReservationTTLSeconds: int(r.ReservationTtlSeconds),
		Admission:             r.Admission,
		Buckets:               int(r.Buckets),
		Fairness:              r.Fairness,
		ChallengeBits:         int(r.ChallengeBits),
		MinAccountAgeSeconds:  int(r.MinAccountAgeSeconds),
		OpensAt:               r.OpensAt,
		CreatedAt:             r.CreatedAt,
		State:                 effectiveState(r.State, r.OpensAt, r.Now, int(r.Available)),
	}
	if r.PauseReason != nil {
		sale.PauseReason = *r.PauseReason
	}
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

// effectiveState is the state a sale shows: a scheduled sale whose time has
// come is open, and an open sale with nothing available is sold out.
func effectiveState(stored string, opensAt *time.Time, now time.Time, available int) string {
	state := stored
	if state == flashline.StateScheduled && opensAt != nil && !opensAt.After(now) {
		state = flashline.StateOpen
	}
	if state == flashline.StateOpen && available == 0 {
		state = flashline.StateSoldOut
	}
	return state
}

// SaleIDs lists every sale, oldest first.
func (s *Store) SaleIDs(ctx context.Context) ([]string, error) {
	ids, err := dbsqlc.New(s.admin).SaleList(ctx)
	return ids, translate(err)
}

// transitions lists, for each admin action, the stored state it leads to and
// the states it may start from. The target is among its own sources, so
// repeating an action is harmless.
var transitions = map[string]struct {
	to   string
	from []string
}{
	flashline.ActionOpen:   {flashline.StateOpen, []string{flashline.StateScheduled, flashline.StateOpen}},
	flashline.ActionPause:  {flashline.StatePaused, []string{flashline.StateScheduled, flashline.StateOpen, flashline.StatePaused}},
	flashline.ActionResume: {flashline.StateOpen, []string{flashline.StatePaused, flashline.StateOpen}},
	flashline.ActionClose:  {flashline.StateClosed, []string{flashline.StateScheduled, flashline.StateOpen, flashline.StatePaused, flashline.StateClosed}},
}

// SetSaleState applies an admin action (open, pause, resume, close).
func (s *Store) SetSaleState(ctx context.Context, saleID, action string) (flashline.Sale, error) {
	t, ok := transitions[action]
	if !ok {
		return flashline.Sale{}, flashline.Invalid("unknown action " + action)
	}
	if action == flashline.ActionResume {
		// A sale paused because its stock did not add up opens again only if
		// it adds up now.
		results, err := s.CheckInvariants(ctx, saleID)
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
	_, err := dbsqlc.New(s.admin).SaleSetState(ctx, dbsqlc.SaleSetStateParams{
		State: t.to, OpenNow: action == flashline.ActionOpen, PauseReason: reason, SaleID: saleID, FromStates: t.from,
	})
	if errors.Is(err, pgx.ErrNoRows) {
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

// Reserve runs one reservation attempt, coalesced with concurrent attempts
// for the same sale (see batch.go and sql/queries/reserve.sql for the
// statements and why they are safe under concurrency).
func (s *Store) Reserve(ctx context.Context, req flashline.ReserveRequest) (flashline.ReserveResult, error) {
	if req.AdmissionID != "" {
		if err := s.limitAdmitted(ctx, req); err != nil {
			return flashline.ReserveResult{}, err
		}
	}
	// The attempt is detached from the client: a mobile client that gives up
	// after a few milliseconds must not abort the transaction half way, or
	// its retry would do the work again instead of replaying the answer.
	c := &call{req: req, deadline: time.Now().Add(s.ReserveTimeout), done: make(chan struct{})}
	s.batches.submit(c)
	return c.res, c.err
}

// SaleBusy reports whether a reservation of saleID would be refused at once
// because the sale's queue is full (Store.QueueRounds): a peek, without
// queueing, so that the HTTP layer can refuse it before it has paid for the
// body and the token.
func (s *Store) SaleBusy(saleID string) bool { return s.batches.full(saleID) }

// Reserve attempts with a valid admission token (waiting-room sales) are
// rate limited per account and per payment instrument, across instances.
// The check sits here, behind the sale cache (salecache.Wrap), so that a
// sold-out or closed sale refuses from memory without this write.
const (
	reserveWindow         = 10 * time.Second
	reservesPerAccount    = 10
	reservesPerInstrument = 20
)

func (s *Store) limitAdmitted(ctx context.Context, req flashline.ReserveRequest) error {
	if err := s.RateLimit(ctx, "reserve", req.SaleID+"\n"+req.CustomerID, reserveWindow, reservesPerAccount); err != nil {
		return err
	}
	if req.PaymentInstrument == "" {
		return nil
	}
	return s.RateLimit(ctx, "reserve-instrument", req.SaleID+"\n"+req.PaymentInstrument, reserveWindow, reservesPerInstrument)
}

// Reservation reads a reservation that by may see.
func (s *Store) Reservation(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	row, err := dbsqlc.New(s.admin).ReservationGet(ctx, reservationID)
	if err != nil {
		return flashline.Reservation{}, fmt.Errorf("reservation %s: %w", reservationID, translate(err))
	}
	if !by.CanAct(row.CustomerID) {
		// Someone else's reservation is not theirs to know about.
		return flashline.Reservation{}, fmt.Errorf("reservation %s: %w", reservationID, flashline.ErrNotFound)
	}
	r := flashline.Reservation{
		ID:          row.ReservationID,
		SaleID:      row.SaleID,
		CustomerID:  row.CustomerID,
		Quantity:    int(row.Quantity),
		State:       row.State,
		CreatedAt:   row.CreatedAt,
		ExpiresAt:   row.ExpiresAt.UTC(),
		ConfirmedAt: row.ConfirmedAt,
	}
	if row.OrderID != nil {
		r.OrderID = *row.OrderID
	}
	return r, nil
}

// stateError is the error for acting on a reservation that is no longer pending.
func stateError(r flashline.Reservation) error {
	switch r.State {
	case flashline.ReservationExpired:
		return flashline.ErrReservationExpired
	case flashline.ReservationCancelled:
		return flashline.ErrReservationCancelled
	case flashline.ReservationConfirmed:
		return flashline.ErrReservationConfirmed
	}
	return nil
}

// Confirm turns a pending reservation into an order, once: repeating it
// returns the same order.
func (s *Store) Confirm(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	r, err := s.Reservation(ctx, reservationID, by)
	if err != nil {
		return r, err
	}
	if r.State == flashline.ReservationPending {
		_, err := dbsqlc.New(s.admin).ReservationConfirm(ctx, flashline.NewID(flashline.OrderIDPrefix), reservationID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return r, fmt.Errorf("confirm reservation %s: %w", reservationID, translate(err))
		}
		// Matched or not (a concurrent confirm or cancel won, or it expired),
		// the reservation as it now stands is the answer.
		if r, err = s.Reservation(ctx, reservationID, by); err != nil {
			return r, err
		}
	}
	switch {
	case r.State == flashline.ReservationConfirmed:
		return r, nil
	case r.State == flashline.ReservationPending:
		return r, flashline.ErrReservationExpired // past expires_at, not yet swept
	}
	return r, stateError(r)
}

// Cancel cancels a pending reservation and returns its units to stock exactly
// once, however often and wherever it is called.
func (s *Store) Cancel(ctx context.Context, reservationID string, by flashline.Actor) (flashline.Reservation, error) {
	r, err := s.Reservation(ctx, reservationID, by)
	if err != nil {
		return r, err
	}
	if r.State == flashline.ReservationPending {
		if _, err := dbsqlc.New(s.admin).ReservationCancel(ctx, reservationID); err != nil {
			return r, fmt.Errorf("cancel reservation %s: %w", reservationID, translate(err))
		}
		if r, err = s.Reservation(ctx, reservationID, by); err != nil {
			return r, err
		}
	}
	if r.State == flashline.ReservationCancelled {
		return r, nil
	}
	return r, stateError(r)
}
