package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/internal/apiclient"
	"github.com/flashline/flashline/internal/client"
)

// Run runs the configured scenario and prints its summary to cfg.Out.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	// Customers are new in every run: idempotency keys are scoped per
	// customer, so a key reused across runs would be "reused" for real.
	r := &runner{cfg: cfg, run: strconv.FormatInt(time.Now().UnixNano(), 36)}
	hc := newHTTPClient(cfg.Clients)
	if cfg.Transport != nil {
		hc.Transport = cfg.Transport(hc.Transport)
	}
	for _, t := range cfg.Targets {
		gen, err := apiclient.NewClientWithResponses(t, apiclient.WithHTTPClient(hc))
		if err != nil {
			return nil, fmt.Errorf("loadtest: target %s: %w", t, err)
		}
		r.gen = append(r.gen, gen)
	}
	r.admin = r.gen[0]
	if cfg.Admin != "" {
		var err error
		if r.admin, err = apiclient.NewClientWithResponses(strings.TrimRight(cfg.Admin, "/"), apiclient.WithHTTPClient(hc)); err != nil {
			return nil, fmt.Errorf("loadtest: admin target %s: %w", cfg.Admin, err)
		}
	}
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
	case "storm":
		res, err = r.retryStorm(ctx)
	case "crowd":
		res, err = r.crowd(ctx)
	case "no":
		res, err = r.no(ctx)
	case "edge":
		res, err = r.edge(ctx)
	default:
		return nil, fmt.Errorf("loadtest: unknown scenario %q (northline, storm, hot, overload, crowd, no, edge)", cfg.Scenario)
	}
	if err != nil {
		return res, err
	}
	res.Scenario = cfg.Scenario
	if len(res.Phases) == 0 { // a scenario of phases counts each phase's
		res.Batches = r.batchStats(ctx).minus(before)
	}
	verr := r.verify(ctx, res)
	res.print(cfg.Out)
	return res, verr
}

// runner runs a scenario. Every request but the overload scenario's open
// loop (vegeta's) goes through the client generated from the OpenAPI
// document (internal/apiclient), one per target, sharing one pool of
// connections.
type runner struct {
	cfg   Config
	gen   []*apiclient.ClientWithResponses
	admin *apiclient.ClientWithResponses // Config.Admin's, or gen[0]
	run   string
}

func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, IdleConnTimeout: 30 * time.Second}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// generated is the generated client of the i-th target, round-robin.
func (r *runner) generated(i int) *apiclient.ClientWithResponses { return r.gen[i%len(r.gen)] }

// bearer sends token as the request's bearer credential.
func bearer(token string) apiclient.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// errorCode is the contract's error code in body ("" when body is not an
// error).
func errorCode(body []byte) string { return client.Response{Body: body}.Code() }

// answer is one HTTP exchange.
type answer struct {
	status        int
	code          string // the contract's error code, if any
	body          []byte
	reservationID string // of a 201 to a reservation, when the client decoded it
	latency       time.Duration
	done          time.Time // when the answer (or the error) arrived
	err           error
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

// answered is the answer to a call that started at start and has just
// returned: its status and body (zero when there was no answer).
func answered(start time.Time, status int, body []byte, err error) answer {
	done := time.Now()
	a := answer{status: status, body: body, err: err, latency: done.Sub(start), done: done}
	if status >= 300 {
		a.code = errorCode(body)
	}
	return a
}

// reserve asks the i-th target for a reservation, timed.
func (r *runner) reserve(ctx context.Context, i int, token string, req client.ReserveRequest) answer {
	params := &apiclient.ReserveParams{IdempotencyKey: req.IdempotencyKey}
	if req.AdmissionToken != "" {
		params.XAdmissionToken = &req.AdmissionToken
	}
	body := apiclient.ReserveJSONRequestBody{Quantity: &req.Quantity}
	if req.PaymentInstrument != "" {
		body.PaymentInstrument = &req.PaymentInstrument
	}
	if req.Variant != "" {
		body.Variant = &req.Variant
	}
	start := time.Now()
	res, err := r.generated(i).ReserveWithResponse(ctx, req.SaleID, params, body, bearer(token))
	if res == nil {
		return answered(start, 0, nil, err)
	}
	a := answered(start, res.StatusCode(), res.Body, err)
	if res.JSON201 != nil {
		a.reservationID = res.JSON201.ReservationId
	}
	return a
}

func (r *runner) token(customer string) string {
	tok, err := auth.Mint(r.cfg.JWTSecret, r.run+"-"+customer, 2*time.Hour, time.Time{})
	if err != nil {
		panic(err) // HS256 signing of a fixed claim set cannot fail
	}
	return tok
}

// createSale creates the scenario's sale through the admin API: sale, with
// one unit per customer, an hour's hold and the configured buckets (a sale
// with variants: each variant's) and gate.
// Its customers confirm (nobody does: the load test measures reservations),
// so a target without a payment webhook secret takes it too.
func (r *runner) createSale(ctx context.Context, sale client.NewSale) (string, error) {
	sale.PerCustomerLimit, sale.ReservationTTLSeconds, sale.Buckets = 1, 3600, r.cfg.Buckets
	if len(sale.Variants) > 0 {
		sale.Buckets = 0 // each variant has its own (stormVariants)
	}
	sale.Gate = r.cfg.Gate
	sale.Confirmation = "customer"
	body, err := json.Marshal(sale)
	if err != nil {
		return "", err
	}
	if len(sale.Variants) > 0 {
		// Sent without initialStock: each variant has its own.
		var fields map[string]any
		if err := json.Unmarshal(body, &fields); err != nil {
			return "", err
		}
		delete(fields, "initialStock")
		if body, err = json.Marshal(fields); err != nil {
			return "", err
		}
	}
	res, err := r.admin.CreateSaleWithBodyWithResponse(ctx, "application/json", bytes.NewReader(body), bearer(r.cfg.AdminToken))
	if err != nil {
		return "", fmt.Errorf("loadtest: create sale: %w", err)
	}
	if res.JSON201 == nil {
		return "", fmt.Errorf("loadtest: create sale: %d %s", res.StatusCode(), res.Body)
	}
	return res.JSON201.SaleId, nil
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
	got, err := r.admin.GetSaleWithResponse(ctx, res.SaleID, bearer(r.cfg.AdminToken))
	switch {
	case err != nil:
		return fmt.Errorf("loadtest: verify: %w", err)
	case got.JSON200 == nil:
		return fmt.Errorf("loadtest: verify: %d %s", got.StatusCode(), got.Body)
	}
	s := got.JSON200
	held := s.Pending + s.Confirmed
	// A request the client gave up on (timeout, no answer) may still have
	// reserved: the sale may hold up to that many more than clients were told.
	unanswered := res.Outcomes["error"]
	var problems []string
	if s.Available < 0 || held > s.InitialStock {
		problems = append(problems, fmt.Sprintf("OVERSOLD: %d held of %d", held, s.InitialStock))
	}
	if s.Available+held != s.InitialStock || !s.Invariant.Ok {
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
	if g := s.Gate; g.Kind == apiclient.SaleGateKindRedis && g.Counter != nil && g.Drift != nil {
		// Units given back just now may still be on their way to it.
		res.Verified += fmt.Sprintf("; Redis gate counter %d, drift %d", *g.Counter, *g.Drift)
	}
	return nil
}
