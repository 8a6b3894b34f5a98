// Package loadtest is `flashline loadtest`: a load generator and scenario
// runner that speaks only the HTTP contract, prints a summary table, and
// verifies at the end, from the admin API, that nothing was oversold or
// duplicated.
//
// Scenarios:
//   - northline: 500 buyers at once for 200 units, then a retry storm in which
//     about 15% of first attempts are abandoned after a few milliseconds and
//     retried with the same key.
//   - hot: closed loop; Clients concurrent buyers reserve one hot SKU as fast
//     as they can for Duration: the most successful reservations per second.
//   - overload: open loop at Rate requests/s for Duration (vegeta paces it),
//     with /healthz probed alongside: does goodput hold and the store stay up?
//   - crowd: Clients customers through a waiting-room sale of Stock units that
//     opens OpenIn after the start (half arrive before): tickets, polls at the
//     server's pace, the challenge, reserve once admitted. How is admission
//     paced, and what did the crowd cost?
package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/flashline/flashline/auth"
)

// Config is one load test.
type Config struct {
	// Targets are base URLs of flashline instances; requests are spread over
	// them round-robin.
	Targets    []string
	AdminToken string
	JWTSecret  string
	Scenario   string
	Clients    int           // hot: concurrent buyers
	Rate       int           // overload: requests per second
	Duration   time.Duration // hot, overload
	Checkouts  int           // northline: checkouts in the retry storm
	Stock      int           // hot, overload: units on sale
	Buckets    int
	// crowd: when the sale opens, its fairness policy and challenge.
	OpenIn        time.Duration
	Fairness      string
	ChallengeBits int
	Progress      bool // draw a progress bar on Err
	Out, Err      io.Writer
}

func (c *Config) setDefaults() error {
	if len(c.Targets) == 0 {
		return errors.New("loadtest: at least one target URL is required")
	}
	for i, t := range c.Targets {
		c.Targets[i] = strings.TrimRight(t, "/")
	}
	if c.AdminToken == "" || c.JWTSecret == "" {
		return errors.New("loadtest: the admin token and the JWT secret are required (to create the sale and mint customers)")
	}
	if c.Clients == 0 {
		c.Clients = 128
		if c.Scenario == "crowd" {
			c.Clients = 2000
		}
	}
	if c.Rate == 0 {
		c.Rate = 2000
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
		if c.Scenario == "crowd" {
			c.Duration = time.Minute
		}
	}
	if c.OpenIn <= 0 {
		c.OpenIn = 3 * time.Second
	}
	if c.Fairness == "" {
		c.Fairness = "randomized_at_open"
	}
	if c.Checkouts == 0 {
		c.Checkouts = 9000
	}
	if c.Stock == 0 {
		c.Stock = 10_000_000
		if c.Scenario == "crowd" {
			c.Stock = 200
		}
	}
	if c.Buckets == 0 {
		c.Buckets = 1
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Err == nil {
		c.Err = io.Discard
	}
	if c.Clients < 1 || c.Rate < 1 || c.Duration <= 0 || c.Checkouts < 1 || c.Stock < 1 {
		return errors.New("loadtest: clients, rate, duration, checkouts and stock must be positive")
	}
	return nil
}

// Result is what a scenario measured.
type Result struct {
	Scenario  string
	SaleID    string
	Elapsed   time.Duration
	Requests  int
	Outcomes  map[string]int // "201", "409 sold_out", "503 overloaded", "error", ...
	Latencies []time.Duration
	Reserved  int // distinct reservations the clients were given
	Health    []time.Duration
	Batches   BatchStats // the targets' purchase-path batches during the run
	Notes     []string   // scenario-specific lines of the summary ("name\tvalue")
	Verified  string     // what the final check found
	// Timeline is the run over time, by when each answer arrived.
	Timeline []Bucket
	// Phases are earlier parts of the run, summarised before this one
	// (northline's race before its retry storm).
	Phases []*Result
}

// Throughput is the answers per second.
func (res *Result) Throughput() float64 { return float64(res.Requests) / res.Elapsed.Seconds() }

// Goodput is the successful reservations per second.
func (res *Result) Goodput() float64 { return float64(res.Reserved) / res.Elapsed.Seconds() }

// BatchStats sums the targets' flashline_reserve_batch_size histograms.
type BatchStats struct {
	Count, Sum float64
	Buckets    map[string]float64 // cumulative count by upper bound ("le")
}

func (b BatchStats) minus(o BatchStats) BatchStats {
	d := BatchStats{Count: b.Count - o.Count, Sum: b.Sum - o.Sum, Buckets: map[string]float64{}}
	for le, n := range b.Buckets {
		d.Buckets[le] = n - o.Buckets[le]
	}
	return d
}

// String is the mean batch size and the histogram, e.g.
// "mean 41.3 over 120 batches; <=1: 3, <=2: 0, ...".
func (b BatchStats) String() string {
	if b.Count == 0 {
		return "none seen (the targets' /metrics has no flashline_reserve_batch_size)"
	}
	les := slices.SortedFunc(maps.Keys(b.Buckets), func(x, y string) int {
		fx, _ := strconv.ParseFloat(x, 64)
		fy, _ := strconv.ParseFloat(y, 64)
		return cmp.Compare(fx, fy)
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "mean %.1f over %.0f batches;", b.Sum/b.Count, b.Count)
	prev := 0.0
	for _, le := range les {
		if le == "+Inf" {
			continue
		}
		fmt.Fprintf(&sb, " <=%s: %.0f", le, b.Buckets[le]-prev)
		prev = b.Buckets[le]
	}
	return sb.String()
}

// batchStats reads the batch-size histogram from every target's /metrics (the
// admin's); a target that does not answer counts as zero.
func (r *runner) batchStats(ctx context.Context) BatchStats {
	st := BatchStats{Buckets: map[string]float64{}}
	for _, t := range r.cfg.Targets {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t+"/metrics", nil)
		if err != nil {
			continue
		}
		req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
		resp, err := r.http.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.Lines(string(body)) {
			name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
			v, err := strconv.ParseFloat(value, 64)
			if !ok || err != nil {
				continue
			}
			switch {
			case name == "flashline_reserve_batch_size_count":
				st.Count += v
			case name == "flashline_reserve_batch_size_sum":
				st.Sum += v
			case strings.HasPrefix(name, `flashline_reserve_batch_size_bucket{le="`):
				st.Buckets[strings.TrimSuffix(strings.TrimPrefix(name, `flashline_reserve_batch_size_bucket{le="`), `"}`)] += v
			}
		}
	}
	return st
}

// Run runs the configured scenario and prints its summary to cfg.Out.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	// Customers are new in every run: idempotency keys are scoped per
	// customer, so a key reused across runs would be "reused" for real.
	r := &runner{cfg: cfg, http: newHTTPClient(cfg.Clients), run: strconv.FormatInt(time.Now().UnixNano(), 36)}
	var res *Result
	var err error
	before := r.batchStats(ctx)
	switch cfg.Scenario {
	case "hot":
		res, err = r.hot(ctx)
	case "overload":
		res, err = r.overload(ctx)
	case "northline":
		res, err = r.northline(ctx)
	case "crowd":
		res, err = r.crowd(ctx)
	default:
		return nil, fmt.Errorf("loadtest: unknown scenario %q (northline, hot, overload, crowd)", cfg.Scenario)
	}
	if err != nil {
		return res, err
	}
	res.Scenario = cfg.Scenario
	res.Batches = r.batchStats(ctx).minus(before)
	verr := r.verify(ctx, res)
	res.print(cfg.Out)
	return res, verr
}

type runner struct {
	cfg  Config
	http *http.Client
	run  string
}

func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, IdleConnTimeout: 30 * time.Second}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func (r *runner) target(i int) string { return r.cfg.Targets[i%len(r.cfg.Targets)] }

// answer is one HTTP exchange.
type answer struct {
	status  int
	code    string // the contract's error code, if any
	body    []byte
	latency time.Duration
	done    time.Time // when the answer (or the error) arrived
	err     error
}

func (a answer) outcome() string {
	switch {
	case a.code == "abandoned":
		return "abandoned by the client"
	case a.err != nil:
		return "error"
	case a.code != "":
		return fmt.Sprintf("%d %s", a.status, a.code)
	}
	return fmt.Sprint(a.status)
}

func (r *runner) do(ctx context.Context, method, url, token, body string, headers ...string) answer {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	resp, err := r.http.Do(req)
	if err != nil {
		done := time.Now()
		return answer{err: err, latency: done.Sub(start), done: done}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	done := time.Now()
	a := answer{status: resp.StatusCode, body: b, err: err, latency: done.Sub(start), done: done}
	if resp.StatusCode >= 300 {
		a.code = errorCode(b)
	}
	return a
}

// decode unmarshals a's body into v if a is an answer with the given status,
// and says what went wrong otherwise.
func (a answer) decode(status int, v any) error {
	if a.err != nil || a.status != status {
		return fmt.Errorf("%v %d %s", a.err, a.status, a.body)
	}
	return json.Unmarshal(a.body, v)
}

func (r *runner) reserve(ctx context.Context, i int, saleID, token, key string) answer {
	return r.do(ctx, http.MethodPost, r.target(i)+"/sales/"+saleID+"/reservations", token, `{"quantity":1}`, "Idempotency-Key", key)
}

func (r *runner) token(customer string) string {
	tok, err := auth.Mint(r.cfg.JWTSecret, r.run+"-"+customer, 2*time.Hour, time.Time{})
	if err != nil {
		panic(err) // HS256 signing of a fixed claim set cannot fail
	}
	return tok
}

// createSale creates the scenario's sale through the admin API. extra is
// more fields of the sale's JSON, each after a comma, or "".
func (r *runner) createSale(ctx context.Context, sku string, stock int, extra string) (string, error) {
	body := fmt.Sprintf(`{"sku":%q,"initialStock":%d,"perCustomerLimit":1,"reservationTtlSeconds":3600,"buckets":%d%s}`, sku, stock, r.cfg.Buckets, extra)
	a := r.do(ctx, http.MethodPost, r.target(0)+"/admin/sales", r.cfg.AdminToken, body)
	var s struct{ SaleID string }
	if err := a.decode(http.StatusCreated, &s); err != nil {
		return "", fmt.Errorf("loadtest: create sale: %w", err)
	}
	return s.SaleID, nil
}

// tally collects answers from many goroutines.
type tally struct {
	mu        sync.Mutex
	start     time.Time // the run's start: answers are placed in time from here
	outcomes  map[string]int
	latencies []time.Duration
	at        []time.Duration // when each answer arrived, after start; parallel to latencies
	// reservedAt is when each distinct reservation was first given, after start.
	reservedAt []time.Duration
	ids        map[string]int
}

func newTally() *tally {
	return &tally{start: time.Now(), outcomes: map[string]int{}, ids: map[string]int{}}
}

func (t *tally) add(a answer) {
	var id struct{ ReservationID string }
	if a.status == http.StatusCreated {
		_ = json.Unmarshal(a.body, &id)
	}
	done := a.done
	if done.IsZero() {
		done = time.Now()
	}
	at := max(0, done.Sub(t.start))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outcomes[a.outcome()]++
	t.latencies = append(t.latencies, a.latency)
	t.at = append(t.at, at)
	if id.ReservationID != "" {
		if t.ids[id.ReservationID] == 0 {
			t.reservedAt = append(t.reservedAt, at)
		}
		t.ids[id.ReservationID]++ // replays name the same id: counted once
	}
}

func (t *tally) result(elapsed time.Duration) *Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &Result{
		Elapsed:   elapsed,
		Requests:  len(t.latencies), // each answer adds one latency and one outcome
		Outcomes:  t.outcomes,
		Latencies: t.latencies,
		Reserved:  len(t.ids),
		Timeline:  timeline(elapsed, t.at, t.latencies, t.reservedAt),
	}
}

func (r *runner) bar(max int64, what string) *progressbar.ProgressBar {
	if !r.cfg.Progress {
		return progressbar.DefaultSilent(max)
	}
	return progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(r.cfg.Err),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
}

// verify checks, from the admin API, that the sale adds up and that the
// clients hold exactly the reservations the sale counts.
func (r *runner) verify(ctx context.Context, res *Result) error {
	a := r.do(ctx, http.MethodGet, r.target(0)+"/admin/sales/"+res.SaleID, r.cfg.AdminToken, "")
	var s struct {
		InitialStock, Available, Pending, Confirmed int
		Invariant                                   struct{ OK bool }
	}
	if err := a.decode(http.StatusOK, &s); err != nil {
		return fmt.Errorf("loadtest: verify: %w", err)
	}
	held := s.Pending + s.Confirmed
	// A request the client gave up on (timeout, no answer) may still have
	// reserved: the sale may hold up to that many more than clients were told.
	unanswered := res.Outcomes["error"]
	var problems []string
	if s.Available < 0 || held > s.InitialStock {
		problems = append(problems, fmt.Sprintf("OVERSOLD: %d held of %d", held, s.InitialStock))
	}
	if s.Available+held != s.InitialStock || !s.Invariant.OK {
		problems = append(problems, fmt.Sprintf("invariant broken: available %d + held %d != %d", s.Available, held, s.InitialStock))
	}
	if held < res.Reserved || held > res.Reserved+unanswered {
		problems = append(problems, fmt.Sprintf("clients were given %d distinct reservations (%d requests unanswered), the sale holds %d", res.Reserved, unanswered, held))
	}
	if len(problems) > 0 {
		res.Verified = strings.Join(problems, "; ")
		return errors.New("loadtest: " + res.Verified)
	}
	res.Verified = fmt.Sprintf("ok: %d reserved, %d held, %d available of %d, invariant ok, no duplicates", res.Reserved, held, s.Available, s.InitialStock)
	if held > res.Reserved {
		res.Verified += fmt.Sprintf(" (%d made by requests the client gave up on)", held-res.Reserved)
	}
	return nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// row is one line of the summary: a name and its value.
type row struct {
	Name, Value string
}

// summary is the summary's lines, for the text table and the HTML report.
func (res *Result) summary() []row {
	lat := slices.Clone(res.Latencies)
	slices.Sort(lat)
	rows := []row{
		{"scenario", res.Scenario},
		{"sale", res.SaleID},
		{"requests", fmt.Sprintf("%d in %v", res.Requests, res.Elapsed.Round(time.Millisecond))},
		{"throughput", fmt.Sprintf("%.0f requests/s", res.Throughput())},
		{"successful reservations", fmt.Sprintf("%d (%.0f/s)", res.Reserved, res.Goodput())},
		{"latency p50 / p90 / p99 / max", fmt.Sprintf("%v / %v / %v / %v",
			percentile(lat, .5).Round(time.Microsecond), percentile(lat, .9).Round(time.Microsecond),
			percentile(lat, .99).Round(time.Microsecond), percentile(lat, 1).Round(time.Microsecond))},
	}
	if len(res.Health) > 0 {
		h := slices.Clone(res.Health)
		slices.Sort(h)
		rows = append(rows, row{"/healthz p50 / p99 / max", fmt.Sprintf("%v / %v / %v (%d probes)",
			percentile(h, .5).Round(time.Microsecond), percentile(h, .99).Round(time.Microsecond), percentile(h, 1).Round(time.Microsecond), len(h))})
	}
	for _, k := range slices.Sorted(maps.Keys(res.Outcomes)) {
		rows = append(rows, row{"  " + k, strconv.Itoa(res.Outcomes[k])})
	}
	for _, n := range res.Notes {
		name, value, _ := strings.Cut(n, "\t")
		rows = append(rows, row{name, value})
	}
	return append(rows,
		row{"reserve batches", res.Batches.String()},
		row{"verified", res.Verified})
}

func (res *Result) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range res.summary() {
		fmt.Fprintf(tw, "%s\t%s\t\n", r.Name, r.Value)
	}
	_ = tw.Flush()
}

// errorCode is the contract's error code in an error body.
func errorCode(body []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}
