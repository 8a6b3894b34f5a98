package waitroom

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

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

// Challenge is a proof of work to solve before admission (see
// roomtoken/challenge.go).
type Challenge struct {
	Nonce string
	Bits  int
}

// TicketResult is a ticket with where it stands now.
type TicketResult struct {
	Token  string
	Ticket roomtoken.Ticket
	// Renewed is set when PreviousToken was given back.
	Renewed bool
	// Position is the place in line now: 1 is next to be let in (the people
	// ahead, plus one). For a ticket placed by the draw it is an estimate,
	// and PositionLow and PositionHigh are its 25th and 75th percentiles
	// (both 0 for a place known exactly): see estimate.
	Position             int64
	PositionLow          int64
	PositionHigh         int64
	EstimatedWaitSeconds int64
	PollAfter            time.Duration
	Policy               flashline.Fairness
	// Challenge is nil when the sale asks none.
	Challenge *Challenge
}

// Ticket gives the customer a place in the sale's waiting room, or gives back
// the ticket they hold. A new place is the next position leased to this
// instance; before the sale opens the ticket is marked pre-open and carries
// the customer's draw, so that under randomized_at_open asking again cannot
// re-roll the place. Errors: ErrNotFound, ErrNoWaitingRoom, ErrSaleNotOpen
// (closed), ErrSoldOut, ErrAccountTooNew, ErrRateLimited, ErrUnavailable,
// ErrOverloaded.
func (r *Room) Ticket(ctx context.Context, req TicketRequest) (TicketResult, error) {
	s, fresh, err := r.room(ctx, req.SaleID)
	if err != nil {
		return TicketResult{}, err
	}
	now := r.opts.Now()
	switch {
	case !fresh && !drawnBefore(s, r.cache.Now()):
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrUnavailable)
	case s.State == flashline.StateClosed:
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrSaleNotOpen)
	case !flashline.AccountOldEnough(req.AccountCreated, s.Room.MinAccountAgeSeconds, now):
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrAccountTooNew)
	}
	if req.PreviousToken != "" {
		t, err := r.keys.ParseTicket(req.PreviousToken)
		if err == nil && t.SaleID == req.SaleID && t.CustomerID == req.CustomerID {
			r.metrics.presented.Inc()
			return r.ticketResult(s, t, req.PreviousToken, true, now), nil
		}
		// Anything else (forged, expired key, someone else's) is ignored:
		// the customer gets a new place, never a better one than a new
		// arrival's.
	}
	if s.SoldOut {
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrSoldOut)
	}
	if len(req.CustomerID) > roomtoken.MaxIDLen {
		return TicketResult{}, flashline.Invalid(fmt.Sprintf("the waiting room takes customer ids of at most %d bytes", roomtoken.MaxIDLen))
	}
	draw := flashline.Draw(s.Room.DrawSeed, req.SaleID, req.CustomerID)
	if r.placedByDraw(s) {
		return r.drawnResult(s, req.CustomerID, draw, now), nil
	}
	if !r.limiter.allow(req.SaleID+"\n"+req.CustomerID, now) {
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, flashline.ErrRateLimited)
	}
	position, preOpen, err := r.takePosition(ctx, s, req.CustomerID, draw)
	if err != nil {
		return TicketResult{}, fmt.Errorf("ticket for sale %s: %w", req.SaleID, err)
	}
	t := roomtoken.Ticket{SaleID: req.SaleID, CustomerID: req.CustomerID, ArrivedAt: now.UTC().Truncate(time.Second), Position: position, PreOpen: preOpen}
	if preOpen {
		t.Draw = draw
	}
	r.metrics.newTickets.Inc()
	r.queue.arrived(req.SaleID, now)
	return r.ticketResult(s, t, r.keys.SignTicket(t), false, now), nil
}

// TicketFromMemory is Ticket when memory alone answers it, with nothing
// asked of the store: the sale's waiting room fresh in memory, asking no
// account age (the caller does not read the account's creation from the
// customer's token), and the answer the ticket given back (customerID's own,
// of this sale) or a new one placed by the draw before the open. ok false
// says only that it did not answer, and nothing was counted: Ticket decides,
// with its errors, its positions and its limit. It is for the edge's front
// door (handlers/edgedoor.go), where a crowd's tickets cost least.
// customerID may be a view of the caller's scratch space: the result holds
// it, and is good while that is.
func (r *Room) TicketFromMemory(saleID, customerID, previousToken string) (TicketResult, bool) {
	s, ok := r.cache.Fresh(saleID)
	if !ok || s.Admission != flashline.AdmissionWaitingRoom || s.State == flashline.StateClosed || s.Room.MinAccountAgeSeconds > 0 {
		return TicketResult{}, false
	}
	s = r.withEdges(s)
	now := r.opts.Now()
	if previousToken != "" {
		t, err := r.keys.ParseTicket(previousToken)
		if err == nil && t.SaleID == saleID && t.CustomerID == customerID {
			r.metrics.presented.Inc()
			return r.ticketResult(s, t, previousToken, true, now), true
		}
	}
	if s.SoldOut || len(customerID) > roomtoken.MaxIDLen || !r.placedByDraw(s) {
		return TicketResult{}, false
	}
	return r.drawnResult(s, customerID, flashline.Draw(s.Room.DrawSeed, saleID, customerID), now), true
}

// placedByDraw reports whether a new ticket in s's room is placed by the
// draw. Before the open the draw orders everyone: the ticket takes no
// position, no write and no limit (asking again gives the same place), and
// is the same for every ask within the hour (see drawnTicket). The open is
// judged by the database's clock as this instance estimates it
// (Cache.Now); a sale opened by hand is seen open once the cache hears of
// it, so a customer who asks in that moment is placed by the draw too. The
// estimate moves with every read, and on an edge with every document (each
// its origin's estimate), so it can step back: the open is never judged by
// an earlier clock than the one the facts were read at (which the policy
// reveals the seed by), and never once the facts say the crowd is frozen
// (a ticket drawn then would not be counted in it).
func (r *Room) placedByDraw(s flashline.SaleFacts) bool {
	return s.Room.Fairness == flashline.FairnessRandomizedAtOpen && s.Room.PreopenCount < 0 && !s.Opened(latest(r.cache.Now(), s.DBNow))
}

// drawnResult is customerID's new ticket placed by its draw in s's room
// (placedByDraw), counted once among the room's pre-open tickets.
func (r *Room) drawnResult(s flashline.SaleFacts, customerID string, draw uint64, now time.Time) TicketResult {
	if r.countPreopen(s.ID, customerID, draw) {
		r.queue.arrived(s.ID, now)
	}
	t := drawnTicket(s.ID, customerID, draw, now)
	r.metrics.newTickets.Inc()
	return r.ticketResult(s, t, r.keys.SignTicket(t), false, now)
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// drawnBefore reports whether a new ticket in s's room is placed by the draw
// alone, known from s even when it is stale: a randomized_at_open room whose
// opening time has not come by now. Such a ticket is signed here and written
// nowhere, so an instance that cannot learn the line's state (an edge that
// has lost its origins) still hands it out; its count reaches the room with
// the next count that gets through.
func drawnBefore(s flashline.SaleFacts, now time.Time) bool {
	return s.Room.Fairness == flashline.FairnessRandomizedAtOpen && s.State == flashline.StateScheduled &&
		s.OpensAt != nil && s.OpensAt.After(now)
}

// drawnTicket is a pre-open ticket of a randomized_at_open room: placed by
// its draw alone, it carries position 1 (no position is leased for it) and
// arrives at the start of the hour, so that asking again within the hour
// gives the same token, and at any time the same place. Its admission id is
// then the same too: one admission per customer and hour.
func drawnTicket(saleID, customerID string, draw uint64, now time.Time) roomtoken.Ticket {
	return roomtoken.Ticket{SaleID: saleID, CustomerID: customerID, ArrivedAt: now.UTC().Truncate(time.Hour),
		Position: 1, PreOpen: true, Draw: draw}
}

func (r *Room) ticketResult(s flashline.SaleFacts, t roomtoken.Ticket, token string, renewed bool, now time.Time) TicketResult {
	w := r.wait(s, t, now)
	res := TicketResult{
		Token:                token,
		Ticket:               t,
		Renewed:              renewed,
		Position:             w.position,
		PositionLow:          w.low,
		PositionHigh:         w.high,
		EstimatedWaitSeconds: w.seconds,
		PollAfter:            w.pollAfter,
		Policy:               s.Room.Fairness,
	}
	if s.Room.ChallengeBits > 0 {
		res.Challenge = &Challenge{Nonce: r.keys.ChallengeNonce(t), Bits: s.Room.ChallengeBits}
	}
	return res
}

// Rank is a ticket's place in the admission order, in the units of the
// watermark. Under randomized_at_open a pre-open ticket ranks by its draw
// among the preopenCount pre-open tickets counted at the open:
// 1 + floor(draw / 2^64 × preopenCount); every other ticket by its position
// (in a room whose pre-open crowd took as many positions as it counts
// tickets; see rank for the general case). preopenCount < 0 means not yet
// known: the caller passes an estimate.
func Rank(t roomtoken.Ticket, fairness flashline.Fairness, preopenCount int64) int64 {
	if !t.PreOpen || fairness != flashline.FairnessRandomizedAtOpen {
		return t.Position
	}
	return flashline.DrawRank(t.Draw, preopenCount)
}

// drawn reports whether t is placed by the draw in s's room.
func drawn(s flashline.SaleFacts, t roomtoken.Ticket) bool {
	return t.PreOpen && s.Room.Fairness == flashline.FairnessRandomizedAtOpen
}

// crowd is the pre-open crowd of s's room: as frozen at the open, or, before,
// the pre-open tickets counted so far.
func crowd(s flashline.SaleFacts) int64 {
	if s.Room.PreopenCount >= 0 {
		return s.Room.PreopenCount
	}
	return max(s.Room.PreopenTickets, 1)
}

// RankIn is t's rank in a room whose pre-open crowd was frozen at
// preopenCount tickets and preopenPositions positions and committed with
// finalSeed (crowddraw.go): a pre-open ticket of a randomized_at_open room
// by flashline.CrowdRank under finalSeed (nil: a room frozen before
// commitments existed, by the ticket's own draw, Rank), a position handed out after
// the freeze right after the crowd, preopenCount + (position −
// preopenPositions), so that positions nobody holds are not counted as
// people; any other ticket by its position.
func RankIn(t roomtoken.Ticket, fairness flashline.Fairness, preopenCount, preopenPositions int64, finalSeed []byte) int64 {
	if t.PreOpen && fairness == flashline.FairnessRandomizedAtOpen {
		if finalSeed != nil && preopenCount >= 0 {
			// Ranked by the final seed, which nobody knew when the ticket
			// was signed.
			var f [32]byte
			copy(f[:], finalSeed)
			return flashline.CrowdRank(f, flashline.RegistrantOf(t.SaleID, t.CustomerID), preopenCount)
		}
		return Rank(t, fairness, preopenCount)
	}
	if preopenCount >= 0 && preopenPositions >= 0 && t.Position > preopenPositions {
		return preopenCount + t.Position - preopenPositions
	}
	return t.Position
}

// rank is t's rank in s's room (RankIn; before the freeze, a pre-open ticket
// ranks among the crowd counted so far).
func rank(s flashline.SaleFacts, t roomtoken.Ticket) int64 {
	if drawn(s, t) && s.Room.PreopenCount < 0 {
		return Rank(t, s.Room.Fairness, crowd(s))
	}
	return RankIn(t, s.Room.Fairness, s.Room.PreopenCount, s.Room.PreopenPositions, s.Room.FinalSeed)
}

// placeRange is the 25th and 75th percentiles of the place of a ticket placed
// by the draw, distance ranks from the watermark in a crowd of n: the people
// ahead of it not yet let in are those of the other n−1 whose draws fall in
// the distance−1 ranks between, a binomial count of mean (n−1)·f and
// variance (n−1)·f·(1−f), f = (distance−1)/n; its quartiles are the mean
// ∓ 0.6745 standard deviations (the normal approximation).
func placeRange(distance, n int64) (low, high int64) {
	if n <= 1 || distance <= 1 {
		return 1, 1
	}
	f := min(float64(distance-1)/float64(n), 1)
	mean := float64(n-1) * f
	sd := math.Sqrt(float64(n-1) * f * (1 - f))
	low = 1 + int64(math.Max(math.Floor(mean-0.6745*sd), 0))
	high = 1 + int64(math.Ceil(mean+0.6745*sd))
	return low, max(high, low)
}

type estimate struct {
	position  int64
	low, high int64 // placed by the draw: the place's quartiles
	seconds   int64
	pollAfter time.Duration
}

// wait estimates how long a ticket has to wait, conservatively: the distance
// to the watermark at the last measured pace (AssumedPace before there is
// one), rounded up and taken 1.5 times, plus the time until the sale opens.
// The poll interval is pollAfter's.
func (r *Room) wait(s flashline.SaleFacts, t roomtoken.Ticket, now time.Time) estimate {
	distance := max(rank(s, t)-s.Room.AdmittedThrough, 1)
	pace := s.Room.Pace
	if pace <= 0 {
		pace = r.opts.AssumedPace
	}
	secs := math.Ceil(float64(distance)/pace) * 1.5
	if s.OpensAt != nil && s.OpensAt.After(now) {
		secs += math.Ceil(s.OpensAt.Sub(now).Seconds())
	}
	e := estimate{position: distance, seconds: int64(math.Ceil(secs))}
	if drawn(s, t) {
		e.low, e.high = placeRange(distance, crowd(s))
	}
	e.pollAfter = pollAfter(s, distance, secs, now)
	return e
}

// pollAfter is when a ticket distance ranks from the watermark, expected in
// secs, should ask again. It grows with the wait, from 1s near the front to
// 15s far back, jittered ±30% so that waiters do not poll in step. But the
// estimate is conservative and the pace it is taken at falls while the
// pacer waits for admissions to be used, so a ticket the pacer may reach at
// its next tick (within reach: OutstandingFactor × the units left +
// OutstandingFloor, the most it admits before anyone buys) asks again
// within about a second, and, before the open, within a second after it:
// those admitted learn it at once, and the sale sells at the pace of the
// purchase path rather than of the polls (at most reach tickets poll that
// often).
func pollAfter(s flashline.SaleFacts, distance int64, secs float64, now time.Time) time.Duration {
	base := min(max(time.Duration(secs*float64(time.Second))/5, time.Second), 15*time.Second)
	if distance <= 1 {
		base = time.Second
	}
	reach := OutstandingFactor*s.Available + OutstandingFloor
	if !s.SoldOut && distance <= reach {
		if s.OpensAt == nil || !s.OpensAt.After(now) {
			base = time.Second
		}
		d := jitter(base)
		if s.OpensAt != nil && s.OpensAt.After(now) && s.OpensAt.Sub(now) < d {
			// Not later than just after the open (and the crowd's freeze, a
			// quarter second after it), spread over a second.
			d = s.OpensAt.Sub(now) + 300*time.Millisecond + time.Duration(rand.Int64N(int64(time.Second)))
		}
		return d.Round(time.Millisecond)
	}
	d := jitter(base)
	if !s.SoldOut {
		// Beyond reach: what comes after the open is most likely "sold
		// out", as soon as those within reach have bought. Ask at least
		// every (distance − reach) / beyondPollBudget after the open, not
		// under beyondPollFloor: the tickets beyond reach then cost at most
		// about 5,000 polls a second in all, whatever the crowd (those
		// 30,000 ranks beyond it and more keep the 15 s).
		beyond := max(time.Duration(float64(distance-reach)/beyondPollBudget*float64(time.Second)), beyondPollFloor)
		var untilOpen time.Duration
		if s.OpensAt != nil && s.OpensAt.After(now) {
			untilOpen = s.OpensAt.Sub(now)
		}
		d = min(d, untilOpen+jitter(beyond))
	}
	return d.Round(time.Millisecond)
}

// The poll budget of the tickets beyond the pacer's reach (see pollAfter).
const (
	beyondPollBudget = 2000 // ranks per second
	beyondPollFloor  = 3 * time.Second
)
