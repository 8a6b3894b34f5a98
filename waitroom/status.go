package waitroom

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// StatusResult is where a ticket stands.
type StatusResult struct {
	State string
	// Waiting: the place in line now (1 = next), the estimate, when to ask
	// again, and whether the sale is paused (nobody is let in meanwhile).
	Position             int64
	PositionLow          int64 // the place's quartiles when it is an estimate (see TicketResult)
	PositionHigh         int64
	EstimatedWaitSeconds int64
	PollAfter            time.Duration
	Paused               bool
	// Held: an operator holds the queue (nobody is let in meanwhile).
	Held bool
	// Stale: this instance cannot read the line's state now (an edge that
	// has lost its origins, an instance that cannot reach the database):
	// the answer is "waiting" on what it knew last, and nobody is admitted
	// until it knows again.
	Stale bool
	// Message is the operator's message to everyone waiting ("" none); it
	// comes with every answer.
	Message string
	// ChallengeRequired: the proof of work to solve and send as solution.
	Challenge *Challenge
	// Admitted: the admission token for X-Admission-Token, good for one
	// reservation until it expires.
	AdmissionToken string
	ExpiresIn      time.Duration
	// QueueIsFull (sold_out): no unit can come back — the sale is sold out
	// with no pending hold that could be cancelled or expire, or it is
	// closed — so asking again is pointless. False while holds are pending
	// (sold out for now): ask again after PollAfter.
	QueueIsFull bool
	// Variants are the sale's variants with what shoppers are told of each
	// (available, few left, sold out; never a count), in every answer of a
	// sale with variants (none without).
	Variants []VariantStatus
}

// VariantStatus is one variant of a sale as the waiting room tells it.
type VariantStatus struct {
	SKU, Title   string
	Availability flashline.Availability
}

// soldOutPoll is how often a sold-out room's waiters ask again while
// pending holds could still give units back, and how often at most the
// waiters of a paused sale or a held queue ask (nobody is let in
// meanwhile: the front need not ask every second); jittered ±30%.
const soldOutPoll = 5 * time.Second

// jitter is d ±30%, to the millisecond.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.7 + 0.6*rand.Float64())).Round(time.Millisecond)
}

// Status says where a ticket stands: waiting, challenge_required, admitted or
// sold_out (with QueueIsFull when for good, as for a closed sale). It
// verifies the ticket with the keyring and answers from memory: no database
// round trip unless the sale's entry is missing or stale. When
// the database cannot be read and only a stale entry is left, the answer is
// "waiting" (come back shortly): nobody is admitted on stale knowledge.
// Errors: ErrAdmissionInvalid (a ticket not valid, or not this customer's or
// this sale's), ErrNotFound, ErrNoWaitingRoom, ErrUnavailable.
func (r *Room) Status(ctx context.Context, saleID, customerID, token, solution string) (StatusResult, error) {
	t, err := r.ticketOf(saleID, customerID, token)
	if err != nil {
		return StatusResult{}, err
	}
	s, fresh, err := r.room(ctx, saleID)
	if err != nil {
		return StatusResult{}, err
	}
	return r.answer(s, fresh, t, solution)
}

// StatusFromMemory is Status when memory alone answers it: a good ticket of
// this customer and sale, the sale's waiting room fresh in memory, and no
// error. ok false says only that it did not answer (Status decides, with
// its errors and its read). It is for the front door
// (handlers/frontdoor.go), where a crowd's polls cost least.
func (r *Room) StatusFromMemory(saleID, customerID, token, solution string) (res StatusResult, ok bool) {
	t, err := r.ticketOf(saleID, customerID, token)
	if err != nil {
		return StatusResult{}, false
	}
	s, ok := r.cache.Fresh(saleID)
	if !ok || s.Admission != flashline.AdmissionWaitingRoom {
		return StatusResult{}, false
	}
	res, err = r.answer(r.withEdges(s), true, t, solution)
	return res, err == nil
}

// ticketOf is token's ticket, when it is good and customerID's in saleID.
func (r *Room) ticketOf(saleID, customerID, token string) (roomtoken.Ticket, error) {
	t, err := r.keys.ParseTicket(token)
	if err != nil {
		return roomtoken.Ticket{}, errors.Join(flashline.ErrAdmissionInvalid, err)
	}
	if t.SaleID != saleID || t.CustomerID != customerID {
		return roomtoken.Ticket{}, fmt.Errorf("status in sale %s: ticket is for another sale or customer: %w", saleID, flashline.ErrAdmissionInvalid)
	}
	return t, nil
}

// answer is the status of ticket t in sale s, counted (one reading of the
// clock for both).
func (r *Room) answer(s flashline.SaleFacts, fresh bool, t roomtoken.Ticket, solution string) (StatusResult, error) {
	now := r.opts.Now()
	res, err := r.status(s, fresh, t, solution, now)
	res.Message = s.Room.Broadcast
	if len(s.Variants) > 0 {
		res.Variants = make([]VariantStatus, len(s.Variants))
		for i, v := range s.Variants {
			res.Variants[i] = VariantStatus{SKU: v.SKU, Title: v.Title, Availability: v.Availability()}
		}
	}
	if err == nil {
		r.queue.answered(s.ID, t, queueState(res), asksFrom(s, t), now)
		if c, ok := r.metrics.byState[res.State]; ok {
			c.Inc()
		} else {
			r.metrics.statuses.WithLabelValues(res.State).Inc()
		}
	}
	return res, err
}

func (r *Room) status(s flashline.SaleFacts, fresh bool, t roomtoken.Ticket, solution string, now time.Time) (StatusResult, error) {
	if s.State == flashline.StateClosed {
		// Nothing more is sold in a closed sale: the line is over.
		return StatusResult{State: StatusSoldOut, QueueIsFull: true}, nil
	}
	waiting := func() StatusResult {
		w := r.wait(s, t, now)
		res := StatusResult{State: StatusWaiting, Position: w.position, PositionLow: w.low, PositionHigh: w.high, EstimatedWaitSeconds: w.seconds,
			PollAfter: w.pollAfter, Paused: s.State == flashline.StatePaused, Held: s.Room.Held}
		if res.Paused || res.Held {
			res.PollAfter = max(res.PollAfter, jitter(soldOutPoll))
		}
		if !fresh {
			res.PollAfter = max(res.PollAfter, 5*time.Second)
			res.Stale = true
		}
		return res
	}
	switch {
	case !fresh:
		return waiting(), nil
	case s.SoldOut && s.PendingHolds:
		// Sold out for now: a pending hold may be cancelled or expire, and
		// its unit go to the next in line.
		return StatusResult{State: StatusSoldOut, PollAfter: jitter(soldOutPoll)}, nil
	case s.SoldOut:
		return StatusResult{State: StatusSoldOut, QueueIsFull: true}, nil
	case s.State == flashline.StatePaused, s.Room.Held:
		r.admitted.stop(s.ID, now)
		return waiting(), nil
	case rank(s, t) > s.Room.AdmittedThrough:
		// The watermark moves only once the database's clock says the sale
		// is open, so rank <= watermark also means "open".
		return waiting(), nil
	case now.Sub(admittedSince(r.admitted.since(s.ID, rank(s, t), s.Room.AdmittedThrough, now, r.opts.AdmissionTTL), t)) > r.opts.AdmissionTTL:
		// The ticket's turn came longer ago than an admission lives: it was
		// let go, and the pacer let another in its place (admitted.go).
		return StatusResult{}, fmt.Errorf("status in sale %s: the ticket was admitted more than %s ago and did not reserve: take a new ticket: %w",
			s.ID, r.opts.AdmissionTTL, flashline.ErrAdmissionInvalid)
	case s.Room.ChallengeBits > 0 && !r.keys.VerifyChallenge(t, solution, s.Room.ChallengeBits):
		return StatusResult{State: StatusChallengeRequired,
			Challenge: &Challenge{Nonce: r.keys.ChallengeNonce(t), Bits: s.Room.ChallengeBits}}, nil
	}
	a := roomtoken.Admission{ID: roomtoken.AdmissionID(t), SaleID: t.SaleID, CustomerID: t.CustomerID, ExpiresAt: now.Add(r.opts.AdmissionTTL)}
	return StatusResult{State: StatusAdmitted, AdmissionToken: r.keys.SignAdmission(a), ExpiresIn: r.opts.AdmissionTTL}, nil
}

// MaxBroadcastLen bounds an operator's message to a room's waiters, in bytes.
const MaxBroadcastLen = 280

// HoldQueue holds (held) or releases the queue of saleID's room: while it is
// held nobody is admitted (status answers waiting, held) and the pacer does
// not move the watermark; the sale itself keeps its state. Audited under
// operator, with reason. Errors: ErrNoWaitingRoom (or a sale without one),
// flashline.Invalid for a bad operator or reason.
func (r *Room) HoldQueue(ctx context.Context, saleID string, held bool, operator, reason string) error {
	if err := flashline.CheckOperator(operator); err != nil {
		return err
	}
	if len(reason) > MaxBroadcastLen || (reason != "" && !flashline.ValidText(reason)) {
		return flashline.Invalid(fmt.Sprintf("reason must be at most %d characters of text", MaxBroadcastLen))
	}
	if _, _, err := r.room(ctx, saleID); err != nil {
		return err
	}
	if err := r.store.SetQueueHeld(ctx, saleID, held, operator, reason); err != nil {
		return err
	}
	// Every instance hears of it (flashline_waitroom); this one at once.
	_ = r.cache.Load(ctx)
	return nil
}

// Broadcast sets the message everyone waiting in saleID's room sees ("":
// none), audited under operator. Errors: ErrNoWaitingRoom, flashline.Invalid
// for a message over MaxBroadcastLen bytes or not text.
func (r *Room) Broadcast(ctx context.Context, saleID, message, operator string) error {
	if err := flashline.CheckOperator(operator); err != nil {
		return err
	}
	if len(message) > MaxBroadcastLen || (message != "" && !flashline.ValidText(message)) {
		return flashline.Invalid(fmt.Sprintf("message must be at most %d characters of text", MaxBroadcastLen))
	}
	if _, _, err := r.room(ctx, saleID); err != nil {
		return err
	}
	if err := r.store.SetBroadcast(ctx, saleID, message, operator); err != nil {
		return err
	}
	_ = r.cache.Load(ctx)
	return nil
}

// Watch returns a channel closed when what every waiter of saleID is told
// changes (salecache.Cache.Watch): a status stream waits on it between
// answers.
func (r *Room) Watch(saleID string) <-chan struct{} { return r.cache.Watch(saleID) }
