package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashline/flashline/internal/apiclient"
	"github.com/flashline/flashline/internal/client"
)

// no: what the answers that cost nothing should cost, measured against the
// cheapest route of the same instance, back to back. Three phases, taking
// turns a second at a time until each has had Duration, on the first target,
// with Clients keep-alive connections in a closed loop (each sends its
// request again as soon as the previous answer is read):
//   - GET /healthz, the mark;
//   - a reservation in a sold-out sale (one unit, bought first), each
//     connection a customer who never held one: 409 sold_out;
//   - a waiting-room status poll (a sale that has not opened), each
//     connection a customer polling its own ticket: 200 waiting.
//
// The generator is in process and as cheap as it can be, since it shares the
// machine with the service it measures: each connection writes a request
// prepared once and reads back only the status line, the headers' length
// and the body it skips (what wrk does), not through net/http's client.
func (r *runner) no(ctx context.Context) (*Result, error) {
	base, err := url.Parse(r.cfg.Targets[0])
	if err != nil || base.Host == "" || base.Scheme != "http" {
		return nil, fmt.Errorf("loadtest: no: target %q is not an http:// URL", r.cfg.Targets[0])
	}
	api := r.generated(0)
	host := base.Host

	// The sold-out sale: one unit, taken by a customer of its own.
	soldOut, err := r.createSale(ctx, client.NewSale{SKU: "sku_no", InitialStock: 1})
	if err != nil {
		return nil, err
	}
	holder := r.reserve(ctx, 0, r.token("no-holder"), client.ReserveRequest{SaleID: soldOut, IdempotencyKey: "k", Quantity: 1})
	if holder.status != http.StatusCreated {
		return nil, fmt.Errorf("loadtest: no: the sold-out sale's one unit: %d %s", holder.status, holder.body)
	}
	// Until this instance says sold_out (its cache hears of it within
	// milliseconds).
	for i := 0; ; i++ {
		a := r.reserve(ctx, 0, r.token("no-probe-"+strconv.Itoa(i)), client.ReserveRequest{SaleID: soldOut, IdempotencyKey: "k", Quantity: 1})
		if a.code == "sold_out" {
			break
		}
		if i == 100 || ctx.Err() != nil {
			return nil, fmt.Errorf("loadtest: no: the sold-out sale answered %d %s", a.status, a.body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The waiting room: a sale that waits for its open, a ticket per
	// connection.
	room, err := r.createSale(ctx, client.NewSale{SKU: "sku_no_room", InitialStock: 1000, Admission: "waiting_room", Fairness: "arrival_order"})
	if err != nil {
		return nil, err
	}
	n := r.cfg.Clients
	healthz, soldOutReqs, statusReqs := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i := range n {
		healthz[i] = []byte("GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
		body := `{"quantity":1}`
		soldOutReqs[i] = []byte("POST /sales/" + soldOut + "/reservations HTTP/1.1\r\nHost: " + host +
			"\r\nAuthorization: Bearer " + r.token("no-"+strconv.Itoa(i)) +
			"\r\nIdempotency-Key: k\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) +
			"\r\n\r\n" + body)
		token := r.token("no-room-" + strconv.Itoa(i))
		tr, err := api.TicketWithResponse(ctx, room, &apiclient.TicketParams{}, bearer(token))
		if err != nil {
			return nil, fmt.Errorf("loadtest: no: ticket: %w", err)
		}
		if tr.JSON200 == nil {
			return nil, fmt.Errorf("loadtest: no: ticket: %d %s", tr.StatusCode(), tr.Body)
		}
		statusReqs[i] = []byte("GET /sales/" + room + "/status?" + url.Values{"token": {tr.JSON200.Token}}.Encode() +
			" HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + token + "\r\n\r\n")
	}

	res, err := r.alternate(ctx, "no", host, []phase{
		{"/healthz", healthz, http.StatusOK},
		{"sold out", soldOutReqs, http.StatusConflict},
		{"status poll", statusReqs, http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	res.SaleID = soldOut
	res.Reserved = 1
	return res, nil
}

// phase is one kind of request the "no" and edge scenarios send in a closed
// loop: its pre-built requests, and the status that counts as an answer.
type phase struct {
	name   string
	reqs   [][]byte
	expect int
}

// alternate runs the phases in turns, a slice of a second each, until each
// has had Duration: the machine is shared, and what else runs on it changes
// from one second to the next, so each phase meets the same weather and the
// ratios hold even when the rates move. The first phase is the yardstick:
// every other rate is also given as a ratio of its.
func (r *runner) alternate(ctx context.Context, scenario, host string, phases []phase) (*Result, error) {
	slices := max(1, int(r.cfg.Duration/noSlice))
	totals := make([]loopResult, len(phases))
	start := time.Now()
	bar := r.bar(int64(slices), scenario)
	for i := range slices {
		for j, p := range phases {
			got, err := closedLoop(ctx, host, p.reqs, noSlice)
			if err != nil {
				return nil, fmt.Errorf("loadtest: %s: %s: %w", scenario, p.name, err)
			}
			if totals[j].statuses == nil {
				totals[j].statuses = map[int]int{}
			}
			for status, count := range got.statuses {
				totals[j].statuses[status] += count
			}
			totals[j].elapsed += got.elapsed
		}
		_ = bar.Set(i + 1)
	}
	_ = bar.Finish()
	var rates []float64
	res := &Result{Outcomes: map[string]int{}}
	for j, p := range phases {
		got := totals[j]
		for status, count := range got.statuses {
			res.Outcomes[fmt.Sprintf("%s %d", p.name, status)] += count
			res.Requests += count
		}
		rate := float64(got.statuses[p.expect]) / got.elapsed.Seconds()
		rates = append(rates, rate)
		line := fmt.Sprintf("%s answers/s\t%.0f", p.name, rate)
		if len(rates) > 1 && rates[0] > 0 {
			line += fmt.Sprintf(" (%.2fx /healthz)", rate/rates[0])
		}
		res.Notes = append(res.Notes, line)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// noSlice is how long one phase of the no scenario runs before the next
// takes its turn.
const noSlice = time.Second

// loopResult is what a closed loop counted.
type loopResult struct {
	statuses map[int]int
	elapsed  time.Duration
}

// closedLoop sends reqs[i] over connection i again and again for d, after a
// warm-up of a tenth of d that is not counted, and counts the answers by
// status. Every request must be answered with a Content-Length (the
// service's answers all are) and the connection kept open.
func closedLoop(ctx context.Context, host string, reqs [][]byte, d time.Duration) (loopResult, error) {
	conns := make([]net.Conn, len(reqs))
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for i := range reqs {
		c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", host)
		if err != nil {
			return loopResult{}, err
		}
		conns[i] = c
	}
	var counting atomic.Bool
	var stop atomic.Bool
	counts := make([]map[int]int, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, c := range conns {
		counts[i] = map[int]int{}
		wg.Go(func() {
			br := bufio.NewReaderSize(c, 16<<10)
			for !stop.Load() {
				if _, err := c.Write(reqs[i]); err != nil {
					errs[i] = err
					return
				}
				status, err := readAnswer(br)
				if err != nil {
					errs[i] = err
					return
				}
				if counting.Load() {
					counts[i][status]++
				}
			}
		})
	}
	warmup := d / 10
	time.Sleep(warmup)
	counting.Store(true)
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	counting.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	out := loopResult{statuses: map[int]int{}, elapsed: elapsed}
	for _, m := range counts {
		for s, n := range m {
			out.statuses[s] += n
		}
	}
	return out, errors.Join(errs...)
}

// readAnswer reads one HTTP/1.1 answer and returns its status.
func readAnswer(br *bufio.Reader) (int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	length := -1
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 { // the blank line
			break
		}
		const cl = "content-length:"
		if len(h) > len(cl) && asciiLowerEqual(h[:len(cl)], cl) {
			n, err := strconv.Atoi(string(trimSpace(h[len(cl):])))
			if err != nil {
				return 0, fmt.Errorf("malformed Content-Length %q", h)
			}
			length = n
		}
	}
	if length < 0 {
		return 0, errors.New("an answer without Content-Length")
	}
	if _, err := br.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}

func asciiLowerEqual(b []byte, lower string) bool {
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}
