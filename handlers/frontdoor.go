package handlers

import (
	"encoding/json"
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
	"github.com/flashline/flashline/waitroom"
)

// The front door answers the refusals the service decides without the
// database before the web framework sees the request: under a flood they
// are most of the requests, and what each costs is taken from the sales.
//
// First, for every request that comes through a trusted proxy: its client
// address (X-Forwarded-For) already has as many requests in flight as one
// address may (peraddr.go): 429 rate_limited, and the request counts there
// until it is answered (a status stream until it ends).
//
// For a reservation (POST /sales/{id}/reservations):
//
//   - its sale's purchase queue is full (flashline.Refusals' Overloaded),
//     or the admission limiter would shed it anyway (Limiter.Refuses): 503
//     overloaded, before its token is verified or its body read;
//   - memory refuses its sale (flashline.Refusals' FromMemory: sold out, not
//     open) for the customer its token proves (auth's FastCustomer): 409, its body
//     read and dropped within the usual bounds, so the connection carries
//     the client's next request.
//
// And for a waiting-room status poll (GET /sales/{id}/status?token=...),
// the "wait" a crowd hears every few seconds each:
//
//   - the limiter would shed a poll: 503 overloaded, before its token is
//     verified;
//   - memory answers it (waitroom's StatusFromMemory: the ticket good, the
//     room fresh in memory) for the customer its token proves: 200, the
//     route's JSON. It holds no slot of the limiter and is not counted in
//     its customer's in-flight allowance while it does: it is answered
//     from memory on the spot, and holds nothing another buyer needs.
//
// Each refusal is prepared once, and every answer is byte for byte what the
// routes would write (status, body, Content-Type, Retry-After,
// Cache-Control, the CORS headers of the customer routes), and counted in
// the same metrics. Whatever the front door cannot decide — another route,
// an escaped path or query, an id of the wrong shape, a token it does not
// decide, a sale memory does not refuse, a ticket or room memory does not
// answer for — goes on to the routes as it came.
type frontDoor struct {
	next     http.Handler
	refusals *flashline.Refusals
	room     *waitroom.Room // nil: no waiting room; polls go to the routes
	limiter  *loadshed.Limiter
	verifier *auth.Verifier
	now      func() time.Time
	// door bounds the requests in flight of trusted proxies' clients
	// (peraddr.go), its refusal counted here, and hands on to route.
	door addrDoor

	// The reservation's refusals, counted here (refusal.go).
	refusal refusalAnswers
	// The status poll's: the limiter's refusal; the answers from memory,
	// counted and timed.
	pollOverloaded prepared
	polled         prometheus.Counter
	pollLatency    prometheus.Observer

	scratch sync.Pool // *auth.Scratch
}

// prepared is one refusal, ready to write.
type prepared struct {
	code   string // the error's, the outcome the metrics record
	status int
	body   []byte
	length []string
	// retryAfter are the jittered Retry-After values, as writeError picks
	// them; none when the answer has none.
	retryAfter [][]string
	count      prometheus.Counter
	latency    prometheus.Observer
}

var (
	headerJSON    = []string{"application/json; charset=utf-8"}
	headerAny     = []string{"*"}
	headerExpose  = []string{CORSExposeHeaders}
	headerNoStore = []string{"no-store"}
)

const (
	reservationsRoute = "/sales/:saleId/reservations"
	statusRoute       = "/sales/:saleId/status"
	// beforeRouting is the route label of what the front door refuses
	// whatever its route.
	beforeRouting = "before_routing"
)

func newFrontDoor(next http.Handler, d Deps, m *Metrics) *frontDoor {
	f := &frontDoor{next: next, refusals: d.Refusals, room: d.Room, limiter: d.Limiter, verifier: d.Verifier, now: d.now(),
		polled: m.requests.WithLabelValues(statusRoute, "ok"), pollLatency: m.latency.WithLabelValues(statusRoute)}
	f.refusal = prepareRefusals(func(err error) prepared { return prepare(m, err, reservationsRoute) })
	f.pollOverloaded = prepare(m, flashline.ErrOverloaded, statusRoute)
	f.door = addrDoor{next: http.HandlerFunc(f.route), perAddr: newAddrBound(d.InFlightPerAddr, d.TrustedProxies),
		addrBusy: prepare(m, flashline.ErrAddressInFlight, beforeRouting)}
	f.scratch.New = func() any { return new(auth.Scratch) }
	return f
}

// Routes lists the routes behind the front door (the OpenAPI test compares
// them with the document).
func (f *frontDoor) Routes() gin.RoutesInfo { return f.next.(*gin.Engine).Routes() }

// prepare is err's answer on route, ready to write.
func prepare(m *Metrics, err error, route string) prepared {
	e := lookupError(err)
	return prepareError(e, m.requests.WithLabelValues(route, e.code), m.latency.WithLabelValues(route))
}

// prepareError is e's answer, counted in count and latency (nil: not
// counted).
func prepareError(e apiError, count prometheus.Counter, latency prometheus.Observer) prepared {
	body, jerr := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: e.code, Message: e.message}})
	if jerr != nil {
		panic(jerr)
	}
	p := prepared{code: e.code, status: e.status, body: body, length: []string{strconv.Itoa(len(body))}, count: count, latency: latency}
	for s := e.retryAfter; e.retryAfter > 0 && s <= 2*e.retryAfter; s++ {
		p.retryAfter = append(p.retryAfter, []string{strconv.Itoa(s)})
	}
	return p
}

func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.door.ServeHTTP(w, r) }

// route is what the front door does with a request its client address's
// bound let through.
func (f *frontDoor) route(w http.ResponseWriter, r *http.Request) {
	if saleID, ok := reservationOf(r); ok {
		f.reservation(w, r, saleID)
		return
	}
	if f.room != nil {
		if saleID, token, solution, ok := statusOf(r); ok && f.status(w, r, saleID, token, solution) {
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

func (f *frontDoor) reservation(w http.ResponseWriter, r *http.Request, saleID string) {
	start := time.Now()
	if f.refusals.Overloaded(saleID) || (f.limiter != nil && f.limiter.Refuses(loadshed.PriorityReserve)) {
		refuse(w, &f.refusal.overloaded, start)
		return
	}
	s := f.scratch.Get().(*auth.Scratch)
	defer f.scratch.Put(s)
	customer, ok := f.customerOf(r, s)
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	p := f.refusal.of(f.refusals.FromMemory(r.Context(), saleID, customer))
	if p == nil {
		f.next.ServeHTTP(w, r)
		return
	}
	if !drainRequest(w, r, s.Buf()) {
		w.Header()["Connection"] = []string{"close"}
	}
	refuse(w, p, start)
}

// status answers a status poll, as the route would, when the limiter sheds
// it or memory answers it, and reports whether it did.
func (f *frontDoor) status(w http.ResponseWriter, r *http.Request, saleID, token, solution string) bool {
	start := time.Now()
	if f.limiter != nil && f.limiter.Refuses(loadshed.PriorityPoll) {
		refuse(w, &f.pollOverloaded, start)
		return true
	}
	s := f.scratch.Get().(*auth.Scratch)
	defer f.scratch.Put(s)
	customer, ok := f.customerOf(r, s)
	if !ok {
		return false
	}
	res, ok := f.room.StatusFromMemory(saleID, customer, token, solution)
	if !ok {
		return false
	}
	// The scratch's buffer is free again once the token is decided.
	body := appendStatus(s.Buf()[:0], &res)
	w.Header()["Cache-Control"] = headerNoStore
	write(w, http.StatusOK, contentLength(len(body)), body)
	f.polled.Inc()
	f.pollLatency.Observe(time.Since(start).Seconds())
	return true
}

// customerOf is the customer r's bearer token proves, when FastCustomer
// decides it (s is its scratch space).
func (f *frontDoor) customerOf(r *http.Request, s *auth.Scratch) (string, bool) {
	token, ok := auth.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	return f.verifier.FastCustomer(token, s, f.now())
}

// refuse writes p, and counts it if p is counted. A body left unread is
// net/http's to deal with (it reads a small one on, or closes the
// connection): an overloaded answer does not wait for a body it will not use.
func refuse(w http.ResponseWriter, p *prepared, start time.Time) {
	if n := len(p.retryAfter); n > 0 {
		w.Header()["Retry-After"] = p.retryAfter[rand.IntN(n)]
	}
	write(w, p.status, p.length, p.body)
	if p.count != nil {
		p.count.Inc()
		p.latency.Observe(time.Since(start).Seconds())
	}
}

// write answers status with the JSON body (length: its Content-Length), and
// the headers every customer route's answer has (Content-Type, CORS).
func write(w http.ResponseWriter, status int, length []string, body []byte) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Content-Length"] = length
	h["Access-Control-Allow-Origin"] = headerAny
	h["Access-Control-Expose-Headers"] = headerExpose
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// contentLengths are the Content-Length header values of the bodies the
// doors write from memory (a status, a ticket: a few hundred bytes), made
// once: a value made per answer was two allocations. They are shared, and
// never written to (net/http copies a handler's header when it writes it).
var contentLengths = func() [][]string {
	v := make([][]string, 2048)
	for n := range v {
		v[n] = []string{strconv.Itoa(n)}
	}
	return v
}()

// contentLength is the Content-Length header value of a body of n bytes.
func contentLength(n int) []string {
	if n < len(contentLengths) {
		return contentLengths[n]
	}
	return []string{strconv.Itoa(n)}
}

// reservationOf is the sale of a reservation request that the front door
// may answer: POST /sales/{id}/reservations, the path as sent (no escapes),
// an id of the shape the service makes.
func reservationOf(r *http.Request) (string, bool) {
	return saleOf(r, http.MethodPost, "/reservations")
}

// saleOf is the sale of a request method /sales/{id}{suffix}, the path as
// sent (no escapes), with an id of the shape the service makes.
func saleOf(r *http.Request, method, suffix string) (string, bool) {
	if r.Method != method || r.URL.RawPath != "" {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/sales/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, suffix)
	if !ok || !flashline.ValidID(flashline.SaleIDPrefix, id) {
		return "", false
	}
	return id, true
}

// statusOf is the sale, ticket and solution of a status poll the front
// door may answer: GET /sales/{id}/status, the path as sent, an id of the
// shape the service makes, and a query with nothing escaped (a ticket is
// base64url, a solution digits) that names token and solution at most once
// each. The route reads such a query the same (the first value of each, the
// other keys ignored); any other goes to it.
func statusOf(r *http.Request) (saleID, token, solution string, ok bool) {
	if saleID, ok = saleOf(r, http.MethodGet, "/status"); !ok {
		return "", "", "", false
	}
	if !plainQuery(r.URL.RawQuery) {
		return "", "", "", false
	}
	var seenToken, seenSolution bool
	for q := r.URL.RawQuery; q != ""; {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		key, value, _ := strings.Cut(pair, "=")
		switch {
		case key == "token" && !seenToken:
			token, seenToken = value, true
		case key == "solution" && !seenSolution:
			solution, seenSolution = value, true
		case key == "token", key == "solution":
			return "", "", "", false
		}
	}
	return saleID, token, solution, true
}

// plainQuery reports whether q has nothing escaped, no space written '+' and
// no ';' (which the routes' parser refuses): it reads as it is written. A
// ticket is a few hundred bytes: IndexByte looks at many at a time.
func plainQuery(q string) bool {
	return strings.IndexByte(q, '%') < 0 && strings.IndexByte(q, '+') < 0 && strings.IndexByte(q, ';') < 0
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
