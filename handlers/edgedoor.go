package handlers

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/edge"
)

// The edge's front door answers what a crowd asks of an edge most, before
// the web framework sees the request, as the origin's front door
// (frontdoor.go) answers its status polls: a new ticket and a status poll
// cost the edge little more than its /healthz.
//
//   - a status poll (GET /sales/{id}/status?token=...) that memory answers
//     (waitroom's StatusFromMemory), for the customer its token proves
//     (auth's FastCustomer): 200, the route's JSON;
//   - a ticket (GET /sales/{id}/ticket[?token=...]) that memory answers
//     (waitroom's TicketFromMemory: the ticket given back, or a new one
//     placed by the draw before the open) for the customer its token
//     proves: 200, the route's JSON, signed and counted as the route's.
//
// Both only for a sale the edge answers itself (edge.Client's Knows; any
// other is passed on to an origin by the routes), and only while the
// limiter would not shed a poll. Such an answer holds no slot of the
// limiter and is not counted in its customer's in-flight allowance: it is
// answered from memory on the spot, and holds nothing another shopper
// needs. It is byte for byte what the routes would write (status, body,
// Content-Type, Cache-Control, the CORS headers of the customer routes).
// Whatever the door does not answer — another route, an escaped path or
// query, an id of the wrong shape, a token it does not decide, a ticket or
// room memory does not answer for — goes on to the routes as it came.
type edgeDoor struct {
	next     http.Handler
	room     *waitroom.Room
	edge     *edge.Client
	limiter  *loadshed.Limiter
	verifier *auth.Verifier
	now      func() time.Time
	scratch  sync.Pool // *auth.Scratch
}

func newEdgeDoor(next http.Handler, d EdgeDeps) *edgeDoor {
	e := &edgeDoor{next: next, room: d.Room, edge: d.Edge, limiter: d.Limiter, verifier: d.Verifier, now: time.Now}
	e.scratch.New = func() any { return new(auth.Scratch) }
	return e
}

func (e *edgeDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if saleID, token, solution, ok := statusOf(r); ok && e.status(w, r, saleID, token, solution) {
		return
	}
	if saleID, previous, ok := ticketOf(r); ok && e.ticket(w, r, saleID, previous) {
		return
	}
	e.next.ServeHTTP(w, r)
}

// ours reports whether the door may answer for saleID: the edge answers its
// room itself, and the limiter would not shed a poll now.
func (e *edgeDoor) ours(saleID string) bool {
	return e.edge.Knows(saleID) && (e.limiter == nil || !e.limiter.Refuses(loadshed.PriorityPoll))
}

// status answers a status poll, as the route would, when memory answers it,
// and reports whether it did.
func (e *edgeDoor) status(w http.ResponseWriter, r *http.Request, saleID, token, solution string) bool {
	if !e.ours(saleID) {
		return false
	}
	s := e.scratch.Get().(*auth.Scratch)
	defer e.scratch.Put(s)
	customer, ok := e.customerOf(r, s)
	if !ok {
		return false
	}
	res, ok := e.room.StatusFromMemory(saleID, customer, token, solution)
	if !ok {
		return false
	}
	// The scratch's buffer is free again once the token is decided.
	body := appendStatus(s.Buf()[:0], &res)
	w.Header()["Cache-Control"] = headerNoStore
	write(w, http.StatusOK, contentLength(len(body)), body)
	return true
}

// ticket answers a ticket, as the route would, when memory answers it, and
// reports whether it did.
func (e *edgeDoor) ticket(w http.ResponseWriter, r *http.Request, saleID, previous string) bool {
	if !e.ours(saleID) {
		return false
	}
	s := e.scratch.Get().(*auth.Scratch)
	defer e.scratch.Put(s)
	customer, ok := e.customerOf(r, s)
	if !ok {
		return false
	}
	// customer is a view of s, which the ticket holds until it is written.
	res, ok := e.room.TicketFromMemory(saleID, customer, previous)
	if !ok {
		return false
	}
	body := appendTicket(s.Buf()[:0], &res)
	w.Header()["Cache-Control"] = headerNoStore
	write(w, http.StatusOK, contentLength(len(body)), body)
	return true
}

// ticketOf is the sale and the ticket held of a ticket request the door may
// answer: GET /sales/{id}/ticket, the path as sent, an id of the shape the
// service makes, and a query with nothing escaped (a ticket is base64url)
// that names token at most once. The route reads such a query the same
// (the first value of token, the other keys ignored); any other goes to it.
func ticketOf(r *http.Request) (saleID, previous string, ok bool) {
	if saleID, ok = saleOf(r, http.MethodGet, "/ticket"); !ok {
		return "", "", false
	}
	if !plainQuery(r.URL.RawQuery) {
		return "", "", false
	}
	seen := false
	for q := r.URL.RawQuery; q != ""; {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if key, value, _ := strings.Cut(pair, "="); key == "token" {
			if seen {
				return "", "", false
			}
			previous, seen = value, true
		}
	}
	return saleID, previous, true
}

// customerOf is the customer r's bearer token proves, when FastCustomer
// decides it (s is its scratch space).
func (e *edgeDoor) customerOf(r *http.Request, s *auth.Scratch) (string, bool) {
	// The header as net/http keys it (canonical): Get would canonicalise
	// the name again on every request.
	var authorization string
	if v := r.Header["Authorization"]; len(v) > 0 {
		authorization = v[0]
	}
	token, ok := auth.BearerToken(authorization)
	if !ok {
		return "", false
	}
	return e.verifier.FastCustomer(token, s, e.now())
}
