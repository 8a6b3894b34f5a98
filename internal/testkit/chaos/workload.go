package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// Targets are the instances' base URLs by slot; a killed instance keeps its
// slot (its URL refuses connections) until it is started again.
type Targets interface {
	URL(slot int) string
	Slots() int
	// inFlight counts the requests of a kind under way at a slot.
	inFlight(slot int, kind Kind) *atomic.Int64
}

// Workload is the buyers and the reader of one run.
type Workload struct {
	SaleID    string
	Customers []string
	Tokens    []string
	Targets   Targets
	History   *History
	HTTP      *http.Client
	Seed      uint64
	// LoadUntil: buyers start no new checkout after it.
	LoadUntil time.Time
	// Deadline: a logical operation without a definite answer by then is
	// recorded unknown (a failure: the service did not recover).
	Deadline time.Time
	// AttemptTimeout bounds one HTTP request.
	AttemptTimeout time.Duration
	// MaxCheckouts is the most checkouts one buyer makes.
	MaxCheckouts int
	// Variants are the SKUs of the sale's variants (none: a sale without
	// variants): a buyer reserves one of them, chosen at random, and
	// switches to another when it is answered variant_sold_out.
	Variants []string
}

// Run runs every buyer and the reader until the buyers are done.
func (w *Workload) Run(ctx context.Context) {
	var wg sync.WaitGroup
	readerCtx, stopReader := context.WithCancel(ctx)
	wg.Go(func() { w.reader(readerCtx, len(w.Customers)) })
	var buyers sync.WaitGroup
	for i := range w.Customers {
		buyers.Go(func() { w.buyer(ctx, i) })
	}
	buyers.Wait()
	stopReader()
	wg.Wait()
}

// buyer is one customer's script, from its own random stream: checkouts
// (a fifth of first attempts abandoned after a few milliseconds and retried
// with the same key), then confirm, cancel (sometimes twice) or abandon the
// hold, and for an abandoned hold a confirm close to its expiry (either
// side) and reads until the expiry is seen. In a sale with variants each
// checkout is of a variant chosen at random, and one answered
// variant_sold_out goes on with another (a key of its own) among those not
// seen sold out; when every one was, the buyer waits as on sold_out and
// tries them all again (cancels and expiries bring units back).
func (w *Workload) buyer(ctx context.Context, i int) {
	rng := rand.New(rand.NewPCG(w.Seed, uint64(i)+1))
	b := &buyer{w: w, i: i, rng: rng, slot: rng.IntN(w.Targets.Slots()), gone: map[string]bool{}}
	variant := b.pick()
	// Buyers arrive spread over the first two thirds of the load.
	spread := time.Until(w.LoadUntil) * 2 / 3
	sleep(ctx, spread*time.Duration(i)/time.Duration(len(w.Customers))+time.Duration(rng.IntN(300))*time.Millisecond)
	for checkout := 0; checkout < w.MaxCheckouts && time.Now().Before(w.LoadUntil) && ctx.Err() == nil; checkout++ {
		key := fmt.Sprintf("%s-k%d", w.Customers[i], checkout)
		if variant != "" {
			key += "-" + variant
		}
		qty := 1
		if rng.IntN(10) < 3 {
			qty = 2
		}
		op := b.reserve(ctx, key, variant, qty)
		switch op.Outcome {
		case OutVariantSoldOut:
			b.gone[variant] = true
			if len(b.gone) == len(w.Variants) {
				sleep(ctx, time.Duration(150+rng.IntN(500))*time.Millisecond)
				clear(b.gone)
			}
			variant = b.pick()
			checkout-- // the same checkout, of another variant
			continue
		case OutSoldOut, OutNotOpen:
			// Not stored: the same key is evaluated afresh later.
			sleep(ctx, time.Duration(150+rng.IntN(500))*time.Millisecond)
			checkout-- // same key again, unless the load is over
			if rng.IntN(4) == 0 {
				checkout++ // or give up on it
			}
			continue
		case OutLimitReached:
			return
		case OutCreated:
		default:
			return
		}
		res, expiresAt := op.ResID, op.ExpiresAt
		switch r := rng.IntN(100); {
		case r < 45:
			sleep(ctx, time.Duration(rng.IntN(1200))*time.Millisecond)
			c := b.act(ctx, Confirm, res, expiresAt)
			if rng.IntN(5) == 0 {
				b.act(ctx, Confirm, res, expiresAt) // the same order again
			}
			if c.Outcome == OutConfirmed {
				// One more checkout: limit_reached while the order stands.
				b.reserve(ctx, fmt.Sprintf("%s-k%d", w.Customers[i], checkout+1), b.pick(), 1)
				return
			}
		case r < 65:
			sleep(ctx, time.Duration(rng.IntN(800))*time.Millisecond)
			b.act(ctx, Cancel, res, expiresAt)
			if rng.IntN(4) == 0 {
				b.act(ctx, Cancel, res, expiresAt)
			}
		default:
			// Abandoned: confirm within ±0.6 s of the expiry, then watch
			// for the sweeper.
			at := expiresAt.Add(time.Duration(rng.IntN(1200)-600) * time.Millisecond)
			sleep(ctx, time.Until(at))
			c := b.act(ctx, Confirm, res, expiresAt)
			if c.Outcome == OutConfirmed {
				b.reserve(ctx, fmt.Sprintf("%s-k%d", w.Customers[i], checkout+1), b.pick(), 1)
				return
			}
			b.watchExpiry(ctx, res, expiresAt)
		}
		variant = b.pick() // the next checkout's
	}
}

type buyer struct {
	w    *Workload
	i    int
	rng  *rand.Rand
	slot int
	// short: the first attempt of the operation under way is one the
	// client abandons after a few milliseconds (not counted in flight: a
	// fault waits for real ones).
	short bool
	// gone are the variants this buyer was answered variant_sold_out for.
	gone map[string]bool
}

// pick is a variant at random among those not seen sold out (among all
// when every one was); "" in a sale without variants.
func (b *buyer) pick() string {
	var left []string
	for _, v := range b.w.Variants {
		if !b.gone[v] {
			left = append(left, v)
		}
	}
	if len(left) == 0 {
		left = b.w.Variants
	}
	if len(left) == 0 {
		return ""
	}
	return left[b.rng.IntN(len(left))]
}

// next is the instance of the next attempt: the same as before until an
// attempt fails, then another one (a retry lands on another instance).
func (b *buyer) next(failed bool) int {
	n := b.w.Targets.Slots()
	if failed && n > 1 {
		b.slot = (b.slot + 1 + b.rng.IntN(n-1)) % n
	}
	return b.slot
}

// ReplayCreated asks again, once the buyers are done, for every reservation
// a buyer was answered 201 for: the same customer, key and units, each on
// an instance of its own random choice, recorded as an operation of that
// buyer (Op.Replay) whose answer must be the first 201 byte for byte
// ("replay_differs" otherwise). After a failover this asks the new primary
// for every acknowledged reservation.
func (w *Workload) ReplayCreated(ctx context.Context) {
	byClient := map[int][]*Op{}
	for _, op := range w.History.Ops() {
		if op.Kind == Reserve && op.Outcome == OutCreated && !op.Replay {
			byClient[op.Client] = append(byClient[op.Client], op)
		}
	}
	// One after the other for each buyer, as its own operations were.
	var wg sync.WaitGroup
	for i, firsts := range byClient {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(w.Seed, uint64(i)+1<<32))
			b := &buyer{w: w, i: i, rng: rng, slot: rng.IntN(w.Targets.Slots())}
			for _, first := range firsts {
				b.reserveAs(ctx, first.Key, first.Variant, first.Qty, first)
			}
		})
	}
	wg.Wait()
}

// reserve reserves qty units of variant ("": a sale without variants).
func (b *buyer) reserve(ctx context.Context, key, variant string, qty int) *Op {
	return b.reserveAs(ctx, key, variant, qty, nil)
}

// reserveAs is reserve, or with first a replay of that 201.
func (b *buyer) reserveAs(ctx context.Context, key, variant string, qty int, first *Op) *Op {
	op := &Op{Client: b.i, Kind: Reserve, Customer: b.w.Customers[b.i], Key: key, Variant: variant, Qty: qty, Call: time.Now()}
	if first != nil {
		op.Replay, op.Body = true, first.Body
	}
	op = b.w.History.Begin(op)
	abandonFirst := b.rng.IntN(5) == 0
	b.short = abandonFirst
	defer func() { b.short = false }()
	b.retry(ctx, op, func(ctx context.Context, c *client.Client, attempt int) (client.Response, func() (string, bool)) {
		if attempt == 0 && abandonFirst {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(1+b.rng.IntN(4))*time.Millisecond)
			defer cancel()
		}
		r, err := c.Reserve(ctx, b.w.Tokens[b.i], client.ReserveRequest{SaleID: b.w.SaleID, IdempotencyKey: key, Quantity: qty, Variant: variant})
		if err != nil && r.Status == 0 {
			return r.Response, nil
		}
		return r.Response, func() (string, bool) {
			switch {
			case r.Status == http.StatusCreated:
				if op.Body != nil && string(op.Body) != string(r.Body) {
					op.Outcome = "replay_differs"
				}
				op.Body = r.Body
				op.ResID, op.ExpiresAt = r.Value.ReservationID, client.Time(r.Value.ExpiresAt)
				return OutCreated, true
			case r.Status == http.StatusConflict && (r.Code() == "sold_out" || r.Code() == "limit_reached" || r.Code() == "sale_not_open" ||
				variant != "" && r.Code() == "variant_sold_out"):
				return r.Code(), true
			}
			return "", false
		}
	})
	return op
}

// act confirms or cancels a hold, or reads it.
func (b *buyer) act(ctx context.Context, kind Kind, res string, expiresAt time.Time) *Op {
	op := b.w.History.Begin(&Op{Client: b.i, Kind: kind, Customer: b.w.Customers[b.i], ResID: res, ExpiresAt: expiresAt, Call: time.Now()})
	b.retry(ctx, op, func(ctx context.Context, c *client.Client, _ int) (client.Response, func() (string, bool)) {
		var (
			resp  client.Response
			state string
			order string
			err   error
		)
		tok := b.w.Tokens[b.i]
		switch kind {
		case Confirm:
			var r client.Result[client.Order]
			r, err = c.Confirm(ctx, tok, res)
			resp, state, order = r.Response, OutConfirmed, r.Value.OrderID
		case Cancel:
			var r client.Result[client.Reservation]
			r, err = c.Cancel(ctx, tok, res)
			resp, state = r.Response, string(r.Value.State)
		default:
			var r client.Result[client.Reservation]
			r, err = c.Reservation(ctx, tok, res)
			resp, state = r.Response, string(r.Value.State)
		}
		if err != nil && resp.Status == 0 {
			return resp, nil
		}
		return resp, func() (string, bool) {
			switch {
			case resp.Status == http.StatusOK:
				op.OrderID = order
				return state, true
			case resp.Status == http.StatusNotFound:
				return OutNotFound, true
			case resp.Status == http.StatusConflict:
				switch resp.Code() {
				case "reservation_expired":
					return OutExpired, true
				case "reservation_cancelled":
					return OutCancelled, true
				case "reservation_confirmed":
					return OutConfirmed, true
				}
			}
			return "", false
		}
	})
	return op
}

// watchExpiry reads an abandoned hold until it shows expired (the sweeper
// runs every second), within the deadline.
func (b *buyer) watchExpiry(ctx context.Context, res string, expiresAt time.Time) {
	sleep(ctx, time.Until(expiresAt.Add(time.Duration(800+b.rng.IntN(800))*time.Millisecond)))
	for time.Now().Before(b.w.Deadline) && ctx.Err() == nil {
		if op := b.act(ctx, ReadReservation, res, expiresAt); op.Outcome != OutPending {
			return
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// retry runs attempts of op until one has a definite answer or the
// deadline passes. send makes one attempt and returns its answer and how to
// read it (nil: no answer at all).
func (b *buyer) retry(ctx context.Context, op *Op, send func(context.Context, *client.Client, int) (client.Response, func() (string, bool))) {
	failed := false
	for attempt := 0; ; attempt++ {
		if time.Now().After(b.w.Deadline) || ctx.Err() != nil {
			op.Outcome, op.Return = OutUnknown, time.Now()
			return
		}
		slot := b.next(failed)
		a := Attempt{Instance: slot, Start: time.Now()}
		inFlight := b.w.Targets.inFlight(slot, op.Kind)
		counted := !(attempt == 0 && b.short)
		if counted {
			inFlight.Add(1)
		}
		actx, cancel := context.WithTimeout(ctx, b.w.AttemptTimeout)
		resp, read := send(actx, client.New(b.w.Targets.URL(slot), b.w.HTTP), attempt)
		cancel()
		if counted {
			inFlight.Add(-1)
		}
		a.End = time.Now()
		a.Status, a.Replayed = resp.Status, resp.Replayed()
		if resp.Status != 0 {
			a.Code = resp.Code()
		} else {
			a.Err = "no answer"
		}
		op.Attempts = append(op.Attempts, a)
		if read != nil {
			if outcome, ok := read(); ok {
				if op.Outcome == "" {
					op.Outcome = outcome
				}
				op.Return = a.End
				return
			}
		}
		failed = true
		// Back off: the Retry-After asked for (at most a second), else
		// 20-120 ms.
		wait := time.Duration(20+b.rng.IntN(100)) * time.Millisecond
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(200+b.rng.IntN(800)) * time.Millisecond
		}
		sleep(ctx, wait)
	}
}

// reader reads the sale's counts every 150 ms from a random instance; a
// read that gets no 200 is left out (it changed nothing).
func (w *Workload) reader(ctx context.Context, clientID int) {
	rng := rand.New(rand.NewPCG(w.Seed, 0))
	for ctx.Err() == nil {
		slot := rng.IntN(w.Targets.Slots())
		call := time.Now()
		actx, cancel := context.WithTimeout(ctx, w.AttemptTimeout)
		r, err := client.New(w.Targets.URL(slot), w.HTTP).Sale(actx, testserver.AdminToken, w.SaleID)
		cancel()
		ret := time.Now()
		if err == nil && r.Status == http.StatusOK {
			v := r.Value
			w.History.Begin(&Op{
				Client: clientID, Kind: ReadSale, Call: call, Return: ret, Outcome: OutRead,
				Counts:   Counts{Available: v.Available, Pending: v.Pending, Confirmed: v.Confirmed, Expired: v.Expired, Cancelled: v.Cancelled},
				Attempts: []Attempt{{Instance: slot, Start: call, End: ret, Status: r.Status}},
			})
			if len(v.Variants) > 0 {
				// Read after the sale's counts, in a statement of its own.
				variants := make([]VariantCounts, len(v.Variants))
				for i, x := range v.Variants {
					variants[i] = VariantCounts{SKU: x.SKU, Available: x.Available, Pending: x.Pending, Confirmed: x.Confirmed}
				}
				w.History.Begin(&Op{Client: clientID, Kind: ReadVariants, Call: call, Return: ret, Outcome: OutRead, Variants: variants})
			}
		}
		sleep(ctx, 150*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
