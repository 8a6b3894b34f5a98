package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/loadshed"
)

// The front door answers the refusals the service decides without the
// database before the web framework sees the request: under a flood they
// are most of the requests, and what each costs is taken from the sales.
// For a reservation (POST /sales/{id}/reservations):
//
//   - its sale's purchase queue is full (Store.SaleBusy), or the admission
//     limiter would shed it anyway (Limiter.Refuses): 503 overloaded, before
//     its token is verified or its body read;
//   - memory refuses its sale (Store.RefuseFromMemory: sold out, not open)
//     for the customer its token proves (auth's FastCustomer): 409, its body
//     read and dropped within the usual bounds, so the connection carries
//     the client's next request.
//
// Each answer is prepared once, byte for byte what the routes would write
// (status, body, Content-Type, Retry-After, the CORS headers of the
// customer routes), and counted in the same metrics. Whatever the front
// door cannot decide — another route, an escaped path, an id of the wrong
// shape, a token it does not decide, a sale memory does not refuse — goes
// on to the routes as it came.
type frontDoor struct {
	next     http.Handler
	store    flashline.Store
	limiter  *loadshed.Limiter
	verifier *auth.Verifier
	now      func() time.Time

	overloaded, soldOut, notOpen prepared
	requests                     *prometheus.CounterVec
	latency                      prometheus.Observer
	scratch                      sync.Pool // *auth.Scratch
}

// prepared is one refusal, ready to write.
type prepared struct {
	status int
	body   []byte
	length []string
	// retryAfter are the jittered Retry-After values, as writeError picks
	// them; none when the answer has none.
	retryAfter [][]string
	count      prometheus.Counter
}

var (
	headerJSON   = []string{"application/json; charset=utf-8"}
	headerAny    = []string{"*"}
	headerExpose = []string{CORSExposeHeaders}
)

const reservationsRoute = "/sales/:saleId/reservations"

func newFrontDoor(next http.Handler, d Deps, m *Metrics) *frontDoor {
	f := &frontDoor{next: next, store: d.Store, limiter: d.Limiter, verifier: d.Verifier, now: d.now(),
		requests: m.requests, latency: m.latency.WithLabelValues(reservationsRoute)}
	f.overloaded = f.prepare(flashline.ErrOverloaded)
	f.soldOut = f.prepare(flashline.ErrSoldOut)
	f.notOpen = f.prepare(flashline.ErrSaleNotOpen)
	f.scratch.New = func() any { return new(auth.Scratch) }
	return f
}

// Routes lists the routes behind the front door (the OpenAPI test compares
// them with the document).
func (f *frontDoor) Routes() gin.RoutesInfo { return f.next.(*gin.Engine).Routes() }

func (f *frontDoor) prepare(err error) prepared {
	e := lookupError(err)
	body, jerr := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: e.code, Message: e.message}})
	if jerr != nil {
		panic(jerr)
	}
	p := prepared{status: e.status, body: body, length: []string{strconv.Itoa(len(body))},
		count: f.requests.WithLabelValues(reservationsRoute, e.code)}
	for s := e.retryAfter; e.retryAfter > 0 && s <= 2*e.retryAfter; s++ {
		p.retryAfter = append(p.retryAfter, []string{strconv.Itoa(s)})
	}
	return p
}

func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	saleID, ok := reservationOf(r)
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	if f.store.SaleBusy(saleID) || (f.limiter != nil && f.limiter.Refuses(loadshed.PriorityReserve)) {
		f.refuse(w, &f.overloaded, start)
		return
	}
	token, ok := auth.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	s := f.scratch.Get().(*auth.Scratch)
	defer f.scratch.Put(s)
	customer, ok := f.verifier.FastCustomer(token, s, f.now())
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	var p *prepared
	switch err := f.store.RefuseFromMemory(r.Context(), saleID, customer); {
	case errors.Is(err, flashline.ErrSoldOut):
		p = &f.soldOut
	case errors.Is(err, flashline.ErrSaleNotOpen):
		p = &f.notOpen
	default:
		f.next.ServeHTTP(w, r)
		return
	}
	if !drainRequest(w, r, s.Buf()) {
		w.Header()["Connection"] = []string{"close"}
	}
	f.refuse(w, p, start)
}

// refuse writes p. A body left unread is net/http's to deal with (it reads
// a small one on, or closes the connection): an overloaded answer does not
// wait for a body it will not use.
func (f *frontDoor) refuse(w http.ResponseWriter, p *prepared, start time.Time) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Content-Length"] = p.length
	h["Access-Control-Allow-Origin"] = headerAny
	h["Access-Control-Expose-Headers"] = headerExpose
	if n := len(p.retryAfter); n > 0 {
		h["Retry-After"] = p.retryAfter[rand.IntN(n)]
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(p.body)
	p.count.Inc()
	f.latency.Observe(time.Since(start).Seconds())
}

// reservationOf is the sale of a reservation request that the front door
// may answer: POST /sales/{id}/reservations, the path as sent (no escapes),
// an id of the shape the service makes.
func reservationOf(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost || r.URL.RawPath != "" {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/sales/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/reservations")
	if !ok || !flashline.ValidID(flashline.SaleIDPrefix, id) {
		return "", false
	}
	return id, true
}

// drainRequest reads and drops r's body, into buf, within MaxBodyBytes and
// bodyReadTimeout (as a route's drainBody does), and reports whether the
// connection may carry another request.
func drainRequest(w http.ResponseWriter, r *http.Request, buf []byte) bool {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return true
	}
	if r.ContentLength > MaxBodyBytes {
		return false
	}
	// net/http's own response sets its connection's deadlines; a wrapper
	// of it (gin's) through http.ResponseController, which unwraps it at
	// the cost of an allocation.
	d, ok := w.(interface{ SetReadDeadline(time.Time) error })
	if !ok {
		d = http.NewResponseController(w)
	}
	_ = d.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer func() { _ = d.SetReadDeadline(time.Time{}) }()
	total := 0
	for {
		n, err := r.Body.Read(buf)
		total += n
		switch {
		case total > MaxBodyBytes:
			return false
		case err == io.EOF:
			return true
		case err != nil:
			return false
		}
	}
}
