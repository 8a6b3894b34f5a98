package loadtest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/flashline/flashline/internal/apiclient"
	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// crowd: Clients customers come to a waiting-room sale of Stock units, half
// before it opens (OpenIn after the start) and half in the seconds after;
// each takes a ticket, polls its status at the pace the server asks for,
// solves the challenge, and reserves once admitted. It measures how
// admission is paced: when the first and last customers are admitted, how
// many per second, and how many polls the crowd cost.
func (r *runner) crowd(ctx context.Context) (*Result, error) {
	saleID, opensAt, err := r.createWaitingRoomSale(ctx)
	if err != nil {
		return nil, err
	}
	t := newTally()
	c := &crowdStats{states: map[string]int{}}
	bar := r.bar(int64(r.cfg.Clients), "admitted or turned away")
	start := time.Now()
	deadline := opensAt.Add(r.cfg.Duration)
	arrivals := arrivalSpread(opensAt, time.Now())
	var wg sync.WaitGroup
	for i := range r.cfg.Clients {
		wg.Go(func() {
			defer func() { _ = bar.Add(1) }()
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(arrivals) + 1))):
			case <-ctx.Done():
				return
			}
			r.waiter(ctx, i, saleID, opensAt, deadline, t, c)
		})
	}
	wg.Wait()
	_ = bar.Finish()
	res := t.result(time.Since(start))
	res.SaleID = saleID
	res.Notes = c.notes(opensAt, r.cfg.Clients)
	return res, nil
}

// crowdStats is what the waiters saw.
type crowdStats struct {
	mu       sync.Mutex
	tickets  int
	polls    int
	states   map[string]int // "status <state>", "ticket <HTTP outcome>", ...
	admitted []time.Time
	lastSold time.Time
	soldOut  []time.Time // when waiters heard sold_out from the status
	pollLat  []time.Duration
}

func (c *crowdStats) count(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// waiter is one customer's way through the waiting room.
func (r *runner) waiter(ctx context.Context, i int, saleID string, opensAt, deadline time.Time, t *tally, c *crowdStats) {
	token := r.token(fmt.Sprintf("crowd-%d", i))
	api, auth := r.generated(i), bearer(token)
	var ticket apiclient.Ticket
	for {
		start := time.Now()
		tr, err := api.TicketWithResponse(ctx, saleID, &apiclient.TicketParams{}, auth)
		if err == nil && tr.JSON200 != nil {
			ticket = *tr.JSON200
			break
		}
		var a answer
		if tr == nil {
			a = answered(start, 0, nil, err)
		} else {
			a = answered(start, tr.StatusCode(), tr.Body, err)
		}
		if ctx.Err() != nil || time.Now().After(deadline) || !retryLater(a) {
			c.count(func() { c.states[fmt.Sprintf("ticket %s", a.outcome())]++ })
			return
		}
	}
	c.count(func() { c.tickets++ })
	solution := ""
	if ticket.Challenge != nil {
		solution = roomtoken.Solve(ticket.Challenge.Nonce, ticket.Challenge.Bits)
	}
	wait := time.Duration(ticket.PollAfterMs) * time.Millisecond
	for ctx.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(wait)
		start := time.Now()
		params := &apiclient.StatusParams{Token: ticket.Token}
		if solution != "" {
			params.Solution = &solution
		}
		sr, err := api.StatusWithResponse(ctx, saleID, params, auth)
		if err != nil || sr.JSON200 == nil {
			var a answer
			if sr == nil {
				a = answered(start, 0, nil, err)
			} else {
				a = answered(start, sr.StatusCode(), sr.Body, err)
			}
			c.count(func() { c.polls++; c.states["status "+a.outcome()]++ })
			if !retryLater(a) {
				return
			}
			wait = time.Second
			continue
		}
		st := sr.JSON200
		lat := time.Since(start)
		c.count(func() { c.pollLat = append(c.pollLat, lat) })
		state := "status " + string(st.State)
		if st.QueueIsFull != nil && !*st.QueueIsFull {
			state += " (for now: holds pending)"
		}
		c.count(func() { c.polls++; c.states[state]++ })
		switch st.State {
		case apiclient.StatusStateWaiting:
			wait = 0
			if st.PollAfterMs != nil {
				wait = time.Duration(*st.PollAfterMs) * time.Millisecond
			}
		case apiclient.StatusStateChallengeRequired:
			solution, wait = roomtoken.Solve(st.Challenge.Nonce, st.Challenge.Bits), 0
		case apiclient.StatusStateAdmitted:
			now := time.Now()
			c.count(func() { c.admitted = append(c.admitted, now) })
			admission := ""
			if st.AdmissionToken != nil {
				admission = *st.AdmissionToken
			}
			key := fmt.Sprintf("crowd-%d", i)
			for {
				ra := r.reserve(ctx, i, token, client.ReserveRequest{SaleID: saleID, IdempotencyKey: key, Quantity: 1, AdmissionToken: admission})
				t.add(ra)
				if ra.status == http.StatusCreated {
					done := time.Now()
					c.count(func() {
						if done.After(c.lastSold) {
							c.lastSold = done
						}
					})
				}
				if !retryLater(ra) || time.Now().After(deadline) {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		default: // sold_out (for now or for good: this waiter stops asking)
			now := time.Now()
			c.count(func() { c.soldOut = append(c.soldOut, now) })
			return
		}
	}
}

// retryLater: an answer a client retries (no answer, 429, 503).
func retryLater(a answer) bool {
	return a.err != nil || a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable
}

func (c *crowdStats) notes(opensAt time.Time, crowd int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.SortFunc(c.admitted, func(a, b time.Time) int { return a.Compare(b) })
	notes := []string{fmt.Sprintf("crowd\t%d customers, %d tickets, %d status polls", crowd, c.tickets, c.polls)}
	for _, s := range slices.Sorted(maps.Keys(c.states)) {
		notes = append(notes, fmt.Sprintf("  %s\t%d", s, c.states[s]))
	}
	if n := len(c.pollLat); n > 0 {
		slices.Sort(c.pollLat)
		notes = append(notes, fmt.Sprintf("status latency\tp50 %v, p99 %v (as the clients saw it)",
			c.pollLat[n/2].Round(time.Millisecond), c.pollLat[min(n-1, n*99/100)].Round(time.Millisecond)))
	}
	if len(c.admitted) == 0 {
		return append(notes, "admitted\tnobody")
	}
	first, last := c.admitted[0].Sub(opensAt), c.admitted[len(c.admitted)-1].Sub(opensAt)
	notes = append(notes, fmt.Sprintf("admitted\t%d, the first %v and the last %v after the open", len(c.admitted), first.Round(time.Millisecond), last.Round(time.Millisecond)))
	if !c.lastSold.IsZero() {
		notes = append(notes, fmt.Sprintf("last unit sold\t%v after the open", c.lastSold.Sub(opensAt).Round(time.Millisecond)))
		if n := len(c.soldOut); n > 0 {
			// How long after the last sale the waiting crowd heard it.
			slices.SortFunc(c.soldOut, func(a, b time.Time) int { return a.Compare(b) })
			at := func(q float64) time.Duration {
				return c.soldOut[min(n-1, int(q*float64(n)))].Sub(c.lastSold).Round(time.Millisecond)
			}
			notes = append(notes, fmt.Sprintf("sold out heard\t%d waiters, p50 %v, p99 %v, last %v after the last unit sold", n, at(.5), at(.99), at(1)))
		}
	}
	// Admissions per second after the open, as seen by the clients (they see
	// an admission at their next poll).
	perSecond := map[int]int{}
	maxSecond := 0
	for _, a := range c.admitted {
		s := max(0, int(a.Sub(opensAt)/time.Second))
		perSecond[s]++
		maxSecond = max(maxSecond, s)
	}
	line := ""
	for s := 0; s <= maxSecond && s < 30; s++ {
		line += " " + strconv.Itoa(perSecond[s])
	}
	return append(notes, "admitted per second\t"+line[1:])
}

// createWaitingRoomSale creates the crowd's sale: a waiting room that opens
// OpenIn from now, with the configured challenge difficulty.
func (r *runner) createWaitingRoomSale(ctx context.Context) (string, time.Time, error) {
	opensAt := time.Now().Add(r.cfg.OpenIn).Truncate(time.Second).Add(time.Second)
	at := opensAt.UTC()
	id, err := r.createSale(ctx, client.NewSale{SKU: "sku_crowd", InitialStock: r.cfg.Stock,
		Admission: "waiting_room", OpensAt: &at, Fairness: r.cfg.Fairness, ChallengeBits: r.cfg.ChallengeBits})
	return id, opensAt, err
}

// arrivalSpread is how long the crowd takes to arrive: twice the time to
// the open, half before it and half after; none when the open has passed
// already (a machine slow enough that creating the sale took its lead,
// which once made a negative spread panic in rand.Int64N).
func arrivalSpread(opensAt, now time.Time) time.Duration {
	return max(2*opensAt.Sub(now), 0)
}
