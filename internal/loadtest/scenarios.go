package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/flashline/flashline/internal/client"
)

// hot: Clients buyers in a closed loop, each reserving again as soon as it is
// answered (20-50 ms later after a 503), each time as a new customer.
func (r *runner) hot(ctx context.Context) (*Result, error) {
	sale, err := r.createSale(ctx, client.NewSale{SKU: "sku_hot", InitialStock: r.cfg.Stock})
	if err != nil {
		return nil, err
	}
	t := newTally()
	bar := r.bar(int64(r.cfg.Duration/time.Second), "hot")
	var seq atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	// No new request starts after the deadline; those in flight finish, so
	// every reservation made is one a client was told about.
	deadline := start.Add(r.cfg.Duration)
	for range r.cfg.Clients {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(seq.Add(1))
				a := r.reserve(ctx, i, r.token(fmt.Sprintf("hot-%d", i)), client.ReserveRequest{SaleID: sale, IdempotencyKey: "k", Quantity: 1})
				t.add(a)
				if a.status == http.StatusServiceUnavailable {
					// Back off as a client told to retry later would
					// (briefly: this measures capacity, not patience).
					time.Sleep(time.Duration(20+rand.IntN(30)) * time.Millisecond)
				}
			}
		})
	}
	pctx, stop := context.WithDeadline(ctx, deadline)
	tickProgress(pctx, bar, start)
	stop()
	wg.Wait()
	_ = bar.Finish()
	res := t.result(time.Since(start))
	res.SaleID = sale
	return res, nil
}

func tickProgress(ctx context.Context, bar interface{ Set(int) error }, start time.Time) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = bar.Set(int(time.Since(start) / time.Second))
		}
	}
}

// overloadInFlight bounds the overload scenario's requests in flight.
const overloadInFlight = 9000

// overload: an open loop at Rate reservations per second, each a new
// customer, whatever the service answers; /healthz is probed 20 times a
// second alongside.
func (r *runner) overload(ctx context.Context) (*Result, error) {
	sale, err := r.createSale(ctx, client.NewSale{SKU: "sku_overload", InitialStock: r.cfg.Stock})
	if err != nil {
		return nil, err
	}
	var seq atomic.Int64
	targeter := func(tgt *vegeta.Target) error {
		i := int(seq.Add(1))
		tgt.Method = http.MethodPost
		tgt.URL = r.cfg.Targets[i%len(r.cfg.Targets)] + "/sales/" + sale + "/reservations"
		tgt.Body = []byte(`{"quantity":1}`)
		tgt.Header = http.Header{
			"Authorization":   {"Bearer " + r.token(fmt.Sprintf("ol-%d", i))},
			"Idempotency-Key": {"k"},
			"Content-Type":    {"application/json"},
		}
		return nil
	}
	// Our own client: vegeta's default dialer binds every new connection to
	// 0.0.0.0 before connecting, and bind's search for a free port slows to
	// a crawl once earlier runs have left thousands of ports in TIME_WAIT
	// (seen: 91% of the generator's CPU in bind, starving the service it
	// measures on the same machine). connect picks ports without that cost.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 10000,
	}}
	// An open loop keeps sending while answers slow down: without the
	// limiter the service answers in seconds, and 4,096 requests in flight
	// (vegeta's usual bound) held the offered rate down to about 1,400/s.
	// 9,000 stays within serve's --max-conns (10,000) and a usual ulimit.
	attacker := vegeta.NewAttacker(vegeta.Client(hc), vegeta.MaxWorkers(overloadInFlight))
	pace := vegeta.Rate{Freq: r.cfg.Rate, Per: time.Second}

	t := newTally()
	var health []time.Duration // written by the prober alone, read after hwg.Wait
	hctx, stopHealth := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	hwg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-tick.C:
				start := time.Now()
				h, err := r.generated(rand.IntN(len(r.gen))).HealthzWithResponse(hctx)
				var a answer
				if h == nil {
					a = answered(start, 0, nil, err)
				} else {
					a = answered(start, h.StatusCode(), h.Body, err)
				}
				if hctx.Err() == nil {
					health = append(health, a.latency)
				}
			}
		}
	})
	bar := r.bar(int64(r.cfg.Duration/time.Second), "overload")
	pctx, stopProgress := context.WithCancel(ctx)
	go tickProgress(pctx, bar, time.Now())
	start := time.Now()
	// What the SLO counts: 201s answered within it, and when each request
	// was sent (the generator falls behind its rate when it cannot keep up:
	// then its row of a curve does not count).
	var created []time.Duration
	var first, last time.Time
	for res := range attacker.Attack(vegeta.Targeter(targeter), pace, r.cfg.Duration, "overload") {
		if first.IsZero() || res.Timestamp.Before(first) {
			first = res.Timestamp
		}
		if res.Timestamp.After(last) {
			last = res.Timestamp
		}
		if res.Code == http.StatusCreated {
			created = append(created, res.Latency)
		}
		a := answer{status: int(res.Code), body: res.Body, latency: res.Latency, done: res.End()}
		if res.Error != "" && res.Code == 0 {
			a.err = fmt.Errorf("%s", res.Error)
		}
		if a.status >= 300 {
			a.code = errorCode(res.Body)
		}
		t.add(a)
	}
	elapsed := time.Since(start)
	stopProgress()
	_ = bar.Finish()
	stopHealth()
	hwg.Wait()
	out := t.result(elapsed)
	out.SaleID = sale
	out.Health = health
	out.Notes = sloNotes(r.cfg, out.Requests, first, last, created)
	return out, nil
}

// sloNotes are the overload scenario's lines for a fair curve: the rate
// offered and the rate sent (the generator's own pace, by the requests'
// start times), the 201s within the SLO per second of the offered window,
// and the p99 of the 201s.
func sloNotes(cfg Config, sent int, first, last time.Time, created []time.Duration) []string {
	window := cfg.Duration.Seconds()
	sentRate := 0.0
	if span := last.Sub(first).Seconds(); sent > 1 && span > 0 {
		sentRate = float64(sent-1) / span
	}
	slices.Sort(created)
	within, _ := slices.BinarySearch(created, cfg.SLO+1)
	p99 := time.Duration(0)
	if len(created) > 0 {
		p99 = percentile(created, .99)
	}
	return []string{
		fmt.Sprintf("offered / sent\t%d/s / %.0f/s", cfg.Rate, sentRate),
		fmt.Sprintf("goodput within %v\t%d (%.0f/s)", cfg.SLO, within, float64(within)/window),
		fmt.Sprintf("p99 of 201s\t%v", p99.Round(time.Microsecond)),
	}
}

// northline: the case study's two failures, replayed.
func (r *runner) northline(ctx context.Context) (*Result, error) {
	// The race: 500 buyers at once for 200 units.
	sale, err := r.createSale(ctx, client.NewSale{SKU: "sku_991", InitialStock: 200})
	if err != nil {
		return nil, err
	}
	t := newTally()
	before := r.batchStats(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range 500 {
		wg.Go(func() {
			tok := r.token(fmt.Sprintf("buyer-%03d", i))
			<-gate
			for attempt := 0; ; attempt++ {
				a := r.reserve(ctx, i+attempt, tok, client.ReserveRequest{SaleID: sale, IdempotencyKey: "checkout", Quantity: 1})
				if a.status != http.StatusServiceUnavailable || attempt > 50 {
					t.add(a)
					return
				}
				time.Sleep(time.Duration(20+rand.IntN(50)) * time.Millisecond)
			}
		})
	}
	close(gate)
	wg.Wait()
	race := t.result(time.Since(start))
	race.SaleID = sale
	race.Scenario = "northline race"
	// Each phase reports its own batches: the race's would otherwise be
	// counted in the storm's line and its own would say none were seen.
	between := r.batchStats(ctx)
	race.Batches = between.minus(before)
	if err := r.verify(ctx, race); err != nil {
		race.print(r.cfg.Out)
		return race, err
	}
	if race.Reserved != 200 || race.Outcomes["409 sold_out"] != 300 {
		race.print(r.cfg.Out)
		return race, fmt.Errorf("loadtest: northline race: want 200 reserved and 300 sold out, got %v", race.Outcomes)
	}
	race.print(r.cfg.Out)
	fmt.Fprintln(r.cfg.Out)

	// The retry storm.
	res, err := r.retryStorm(ctx)
	if res != nil {
		res.Phases = []*Result{race}
		res.Batches = r.batchStats(ctx).minus(between)
	}
	return res, err
}

// retryStorm: Checkouts checkouts, 15% of first attempts abandoned after a
// few milliseconds and retried with the same key, 10% of successes retried
// again; one reservation per checkout, every replay the first answer's bytes.
// With Variants, the sale is that many variants (stormVariants) and checkout
// i names variant i mod Variants: each sells exactly its units.
func (r *runner) retryStorm(ctx context.Context) (*Result, error) {
	n := r.cfg.Checkouts
	newSale := client.NewSale{SKU: "sku_storm", InitialStock: n}
	skus := stormVariants(&newSale, n, r.cfg.Variants, r.cfg.Buckets)
	sale, err := r.createSale(ctx, newSale)
	if err != nil {
		return nil, err
	}
	t := newTally()
	bar := r.bar(int64(n), "retry storm")
	var mismatched atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(r.cfg.Clients, n) {
		wg.Go(func() {
			for i := range jobs {
				tok := r.token(fmt.Sprintf("storm-%d", i))
				key := fmt.Sprintf("key-%d", i)
				rng := rand.New(rand.NewPCG(uint64(i), 11))
				var first []byte
				for attempt := 0; attempt < 1000; attempt++ {
					actx, cancel := context.WithCancel(ctx)
					if attempt == 0 && rng.Float64() < 0.15 {
						actx, cancel = context.WithTimeout(ctx, time.Duration(1+rng.IntN(4))*time.Millisecond)
					}
					req := client.ReserveRequest{SaleID: sale, IdempotencyKey: key, Quantity: 1}
					if len(skus) > 0 {
						req.Variant = skus[i%len(skus)]
					}
					a := r.reserve(actx, i+attempt, tok, req)
					cancel()
					if a.err != nil && actx.Err() != nil {
						t.add(answer{err: a.err, code: "abandoned", done: a.done})
						continue
					}
					t.add(a)
					if a.status == http.StatusConflict && a.code == "request_in_progress" || a.status == http.StatusServiceUnavailable {
						time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
						continue
					}
					if a.status != http.StatusCreated {
						break
					}
					if first != nil && string(first) != string(a.body) {
						mismatched.Add(1)
					}
					if first == nil {
						first = a.body
						if rng.Float64() < 0.10 {
							continue // retried after success
						}
					}
					break
				}
				_ = bar.Add(1)
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	_ = bar.Finish()
	res := t.result(time.Since(start))
	res.SaleID = sale
	res.Scenario = "northline retry storm"
	if m := mismatched.Load(); m > 0 {
		return res, fmt.Errorf("loadtest: %d replays differed from the first answer", m)
	}
	if res.Reserved != n {
		return res, fmt.Errorf("loadtest: %d checkouts produced %d reservations", n, res.Reserved)
	}
	if len(skus) > 0 {
		line, err := r.variantsSoldOut(ctx, sale)
		res.Notes = append(res.Notes, "variants (held/initial)\t"+line)
		return res, err
	}
	return res, nil
}

// stormVariants makes sale one of variants variants (none: 0) of n units in
// all, as even as can be (v1 has the first of what is left over), each of
// buckets rows, and returns their SKUs in order: checkout i's is i mod
// variants.
func stormVariants(sale *client.NewSale, n, variants, buckets int) []string {
	if variants == 0 {
		return nil
	}
	skus := make([]string, variants)
	for j := range skus {
		skus[j] = fmt.Sprintf("v%d", j+1)
		stock := n / variants
		if j < n%variants {
			stock++
		}
		sale.Variants = append(sale.Variants, client.NewVariant{SKU: skus[j], Stock: stock, Buckets: buckets})
	}
	sale.InitialStock = 0
	return skus
}

// variantsSoldOut checks, through the admin API, that every variant of the
// storm's sale sold exactly its units: none left, its initial stock held;
// line is each one's held/initial, for the summary.
func (r *runner) variantsSoldOut(ctx context.Context, saleID string) (line string, err error) {
	got, err := r.admin.GetSaleWithResponse(ctx, saleID, bearer(r.cfg.AdminToken))
	switch {
	case err != nil:
		return "unknown", fmt.Errorf("loadtest: variants: %w", err)
	case got.JSON200 == nil:
		return "unknown", fmt.Errorf("loadtest: variants: %d %s", got.StatusCode(), got.Body)
	case got.JSON200.Variants == nil || len(*got.JSON200.Variants) != r.cfg.Variants:
		return "unknown", fmt.Errorf("loadtest: variants: the sale lists %s, want %d variants", got.Body, r.cfg.Variants)
	}
	var held, problems []string
	for _, v := range *got.JSON200.Variants {
		n := v.Pending + v.Confirmed
		held = append(held, fmt.Sprintf("%s %d/%d", v.Sku, n, v.InitialStock))
		if v.Available != 0 || n != v.InitialStock {
			problems = append(problems, fmt.Sprintf("variant %s: %d held, %d available of %d", v.Sku, n, v.Available, v.InitialStock))
		}
	}
	line = strings.Join(held, ", ")
	if len(problems) > 0 {
		return line, errors.New("loadtest: not every variant sold exactly its units: " + strings.Join(problems, "; "))
	}
	return line, nil
}
