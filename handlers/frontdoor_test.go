package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitroom"
)

// soldOutServer is a server whose one sale alice holds the only unit of,
// once its cache knows the sale is sold out; deps are what its routes were
// built from.
func soldOutServer(t testing.TB) (s *server, deps handlers.Deps, sale string) {
	s = startServer(t, nil, withSaleCache(t), func(d *handlers.Deps) { deps = *d })
	sale = s.createSale(t, `{"sku":"sku_door","initialStock":1}`).SaleID
	requireCreated(t, s.reserve(t, sale, customer(t, "alice"), "k", `{"quantity":1}`), sale, 1)
	// Only memory answers a body that is not JSON with 409 (the full path
	// says 400): a 409 to a well-formed one may be the database's sold_out,
	// heard before the cache's next read, and then the tests below would
	// meet a cache that does not know yet.
	require.Eventually(t, func() bool {
		return s.reserve(t, sale, customer(t, "bob"), "k", `not even json`).Status == http.StatusConflict
	}, 10*time.Second, 20*time.Millisecond)
	// A registry of its own: the routes below are built a second time.
	deps.Registry = prometheus.NewRegistry()
	return s, deps, sale
}

// recorder is a ResponseWriter that keeps what was written, with the
// read deadline net/http's own offers (the front door sets it).
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header                { return r.h }
func (r *recorder) WriteHeader(status int)             { r.status = status }
func (r *recorder) Write(b []byte) (int, error)        { return r.body.Write(b) }
func (r *recorder) SetReadDeadline(time.Time) error    { return nil }
func (r *recorder) reset()                             { clear(r.h); r.status = 0; r.body.Reset() }
func newRecorder() *recorder                           { return &recorder{h: http.Header{}} }
func (r *recorder) answer() (int, http.Header, []byte) { return r.status, r.h, r.body.Bytes() }

// TestFrontDoorAnswersAsTheRoutes: every refusal the front door makes is
// the routes' own answer, byte for byte (status, body, the headers a
// client reads), and what it does not decide it hands on unchanged.
func TestFrontDoorAnswersAsTheRoutes(t *testing.T) {
	t.Parallel()
	s, deps, sale := soldOutServer(t)
	door := handlers.Routes(deps)
	routes := handlers.BehindTheDoor(door)
	send := func(h http.Handler, path, authorization, body string) (int, http.Header, []byte) {
		return serve(t, h, http.MethodPost, path, authorization, body)
	}
	same := func(t *testing.T, path, authorization, body string, status int) {
		t.Helper()
		ds, dh, db := send(door, path, authorization, body)
		rs, rh, rb := send(routes, path, authorization, body)
		require.Equal(t, status, ds, "%s", db)
		require.Equal(t, rs, ds)
		require.Equal(t, string(rb), string(db))
		for _, k := range []string{"Content-Type", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Connection"} {
			require.Equal(t, rh.Values(k), dh.Values(k), k)
		}
		require.Equal(t, rh.Get("Retry-After") != "", dh.Get("Retry-After") != "", "Retry-After")
	}
	reservations := "/sales/" + sale + "/reservations"
	t.Run("SoldOut", func(t *testing.T) {
		same(t, reservations, customer(t, "carol"), `{"quantity":1}`, 409)
		same(t, reservations, customer(t, "carol"), `not even json`, 409)
	})
	t.Run("NotDecidedHere", func(t *testing.T) {
		// The holder reaches the database (limit_reached, by its key), a bad token its 401,
		// the admin its 403, an unknown sale its 404: the routes' answers.
		same(t, reservations, customer(t, "alice"), `{"quantity":1}`, 409) // limit_reached: her other key
		same(t, reservations, "Bearer nope", `{"quantity":1}`, 401)
		same(t, reservations, adminAuth, `{"quantity":1}`, 403)
		same(t, "/sales/sale_00000000000000000000000000/reservations", customer(t, "carol"), `{"quantity":1}`, 404)
		same(t, "/sales/not-an-id/reservations", customer(t, "carol"), `{"quantity":1}`, 404)
	})
	t.Run("LimiterFull", func(t *testing.T) {
		// A limiter with no room and no queue sheds every reservation:
		// the front door says so before the token or the body.
		d := deps
		d.Limiter, d.Registry = fullLimiter(t), prometheus.NewRegistry()
		door := handlers.Routes(d)
		open := s.createSale(t, `{"sku":"sku_door_open","initialStock":10}`).SaleID
		status, h, body := send(door, "/sales/"+open+"/reservations", "", `{"quantity":1}`)
		requireDoorOverloaded(t, status, h, body)
	})
}

// TestFrontDoorAnswersStatusAsTheRoutes: a status poll the front door
// answers from memory is the route's answer (status, the headers a client
// reads, the JSON but for its jittered poll interval and its estimate,
// which move between two asks), the door answers it alone, and what it
// does not decide is the routes' own answer.
func TestFrontDoorAnswersStatusAsTheRoutes(t *testing.T) {
	t.Parallel()
	deps, sale, alice, tk := waitingBeforeOpen(t, "sku_door_room")
	// Routes built twice more, each with a registry of its own.
	build := func() http.Handler {
		d := deps
		d.Registry = prometheus.NewRegistry()
		return handlers.Routes(d)
	}
	door, routes, alone := build(), handlers.BehindTheDoor(build()), handlers.TheDoorAlone(build())
	get := func(h http.Handler, path, authorization string) (int, http.Header, []byte) {
		return serve(t, h, http.MethodGet, path, authorization, "")
	}
	headers := []string{"Content-Type", "Cache-Control", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Connection"}
	statusPath := "/sales/" + sale + "/status?token=" + tk.Token

	t.Run("Waiting", func(t *testing.T) {
		ds, dh, db := get(alone, statusPath, alice)
		rs, rh, rb := get(routes, statusPath, alice)
		require.Equal(t, http.StatusOK, ds, "%s", db)
		require.Equal(t, rs, ds)
		for _, k := range headers {
			require.Equal(t, rh.Values(k), dh.Values(k), k)
		}
		require.Equal(t, strconv.Itoa(len(db)), dh.Get("Content-Length"))
		var dj, rj map[string]any
		require.NoError(t, json.Unmarshal(db, &dj))
		require.NoError(t, json.Unmarshal(rb, &rj))
		for _, k := range []string{"pollAfterMs", "estimatedWaitSeconds"} {
			require.Contains(t, dj, k)
			require.Contains(t, rj, k)
			delete(dj, k)
			delete(rj, k)
		}
		require.Equal(t, rj, dj)
		require.Equal(t, "waiting", dj["state"])
	})
	t.Run("NotDecidedHere", func(t *testing.T) {
		// A bad token, the admin, another customer's ticket, a ticket that
		// is not one, an escaped or repeated query, an unknown sale: the
		// routes' answers, which the door alone does not give.
		bob := customer(t, "bob")
		for _, c := range []struct {
			path, authorization string
			status              int
		}{
			{statusPath, "Bearer nope", 401},
			{statusPath, adminAuth, 403},
			{statusPath, bob, 403},
			{"/sales/" + sale + "/status?token=nope", alice, 403},
			{"/sales/" + sale + "/status?token=" + url.QueryEscape(tk.Token[:5]) + "%" + fmt.Sprintf("%02X", tk.Token[5]) + tk.Token[6:], alice, 200},
			{statusPath + "&token=" + tk.Token, alice, 200},
			{"/sales/sale_00000000000000000000000000/status?token=" + tk.Token, alice, 403},
			{"/sales/not-an-id/status?token=" + tk.Token, alice, 404},
		} {
			ds, dh, db := get(door, c.path, c.authorization)
			rs, rh, rb := get(routes, c.path, c.authorization)
			require.Equal(t, c.status, ds, "%s: %s", c.path, db)
			require.Equal(t, rs, ds, c.path)
			if ds != http.StatusOK {
				require.Equal(t, string(rb), string(db), c.path)
			}
			for _, k := range headers {
				require.Equal(t, rh.Values(k), dh.Values(k), k)
			}
			as, _, _ := get(alone, c.path, c.authorization)
			require.Equal(t, 599, as, "the door alone answered %s", c.path)
		}
	})
	t.Run("LimiterFull", func(t *testing.T) {
		// A limiter with no room and no queue sheds every poll: the front
		// door says so before the token.
		d := deps
		d.Limiter, d.Registry = fullLimiter(t), prometheus.NewRegistry()
		status, h, body := get(handlers.TheDoorAlone(handlers.Routes(d)), statusPath, "")
		requireDoorOverloaded(t, status, h, body)
	})
}

// BenchmarkSoldOutRefusal is what one "sold out" costs the service past
// net/http, for a flood of distinct buyers (a token each, none seen
// before): through the front door (a prepared answer before the routes)
// and through the routes (gin, its middleware, the handler chain). The
// request is the one a client sends: a bearer token, an Idempotency-Key,
// a small body.
func BenchmarkSoldOutRefusal(b *testing.B) {
	_, deps, sale := soldOutServer(b)
	door := handlers.Routes(deps)
	// More tokens than the verifier remembers (auth's memo), so that the
	// routes verify nearly every one as a flood's would be.
	tokens := make([]string, 1<<16)
	for i := range tokens {
		tokens[i] = customer(b, "flood-"+strconv.Itoa(i))
	}
	for _, h := range []struct {
		name    string
		handler http.Handler
	}{{"front-door", door}, {"routes", handlers.BehindTheDoor(door)}} {
		b.Run(h.name, func(b *testing.B) {
			body := []byte(`{"quantity":1}`)
			rd := bytes.NewReader(body)
			req, err := http.NewRequest(http.MethodPost, "/sales/"+sale+"/reservations", io.NopCloser(rd))
			require.NoError(b, err)
			req.ContentLength = int64(len(body))
			req.Header["Idempotency-Key"] = []string{"k1"}
			req.Header["Content-Type"] = []string{"application/json"}
			auth := []string{""}
			req.Header["Authorization"] = auth
			rec := newRecorder()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				auth[0] = tokens[i%len(tokens)]
				i++
				rd.Reset(body)
				rec.reset()
				h.handler.ServeHTTP(rec, req)
			}
			require.Equal(b, http.StatusConflict, rec.status, "%s", rec.body.Bytes())
			require.True(b, slices.Contains([]string{"sold_out"}, strings.Split(strings.Split(rec.body.String(), `"code":"`)[1], `"`)[0]))
		})
	}
}

// BenchmarkStatusPoll is what one waiting-room status poll costs the
// service past net/http, for a customer polling its ticket before the open:
// through the front door (memory's answer before the routes) and through
// the routes (gin, its middleware, the handler chain); and through the
// front door with serve's bound on a client address's requests in flight
// (256, loopback trusted), for a client polling directly (its address not
// a proxy's: the header is not read) and for one behind a trusted proxy
// (counted by its X-Forwarded-For).
func BenchmarkStatusPoll(b *testing.B) {
	deps, sale, alice, tk := waitingBeforeOpen(b, "sku_poll")
	deps.Registry = prometheus.NewRegistry()
	door := handlers.Routes(deps)
	bounded := deps
	bounded.Registry = prometheus.NewRegistry()
	bounded.InFlightPerAddr = 256
	bounded.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	boundedDoor := handlers.Routes(bounded)
	for _, h := range []struct {
		name      string
		handler   http.Handler
		peer      string
		forwarded []string
	}{
		{"front-door", door, "", nil},
		{"routes", handlers.BehindTheDoor(door), "", nil},
		{"front-door-bounded-direct", boundedDoor, "198.51.100.1:4711", []string{"203.0.113.7"}},
		{"front-door-bounded-forwarded", boundedDoor, "127.0.0.1:4711", []string{"198.51.100.1, 203.0.113.7"}},
	} {
		b.Run(h.name, func(b *testing.B) {
			req, err := http.NewRequest(http.MethodGet, "/sales/"+sale+"/status?token="+tk.Token, nil)
			require.NoError(b, err)
			req.Header["Authorization"] = []string{alice}
			req.RemoteAddr = h.peer
			if h.forwarded != nil {
				req.Header["X-Forwarded-For"] = h.forwarded
			}
			rec := newRecorder()
			b.ReportAllocs()
			for b.Loop() {
				rec.reset()
				h.handler.ServeHTTP(rec, req)
			}
			require.Equal(b, http.StatusOK, rec.status, "%s", rec.body.Bytes())
		})
	}
}

// serve is h's answer to method path with authorization (none if empty),
// body and an Idempotency-Key (which only a reservation reads).
func serve(t testing.TB, h http.Handler, method, path, authorization, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, path, strings.NewReader(body))
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	req.Header.Set("Idempotency-Key", "k1")
	rec := newRecorder()
	h.ServeHTTP(rec, req)
	return rec.answer()
}

// fullLimiter is a limiter with no room and no queue: it sheds every
// request.
func fullLimiter(t *testing.T) *loadshed.Limiter {
	t.Helper()
	full, err := loadshed.New(loadshed.Options{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueSize: -1})
	require.NoError(t, err)
	slot, err := full.Acquire(t.Context(), loadshed.PriorityReserve)
	require.NoError(t, err)
	t.Cleanup(func() { slot.Release(loadshed.Success) })
	return full
}

// requireDoorOverloaded checks the front door's 503 overloaded.
func requireDoorOverloaded(t *testing.T, status int, h http.Header, body []byte) {
	t.Helper()
	require.Equal(t, 503, status, "%s", body)
	require.JSONEq(t, `{"error":{"code":"overloaded","message":"too busy right now; retry shortly"}}`, string(body))
	require.Contains(t, []string{"1", "2"}, h.Get("Retry-After"))
	require.Equal(t, "*", h.Get("Access-Control-Allow-Origin"))
}

// waitingBeforeOpen starts a server with a waiting room and a sale of sku
// that opens in an hour, in whose line alice holds ticket tk: the server's
// Deps, the sale, alice's authorization and her ticket.
func waitingBeforeOpen(tb testing.TB, sku string) (deps handlers.Deps, sale, alice string, tk ticketJSON) {
	tb.Helper()
	s := startServer(tb, &waitroom.Options{}, func(d *handlers.Deps) { deps = *d })
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	sale = s.createSale(tb, `{"sku":"`+sku+`","initialStock":5,"admission":"waiting_room","opensAt":"`+later+`"}`).SaleID
	alice = customer(tb, "alice")
	return deps, sale, alice, s.ticket(tb, sale, alice, "")
}
