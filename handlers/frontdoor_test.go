package handlers_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
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
		req, err := http.NewRequest(http.MethodPost, path, strings.NewReader(body))
		require.NoError(t, err)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		req.Header.Set("Idempotency-Key", "k1")
		rec := newRecorder()
		h.ServeHTTP(rec, req)
		return rec.answer()
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
		full, err := loadshed.New(loadshed.Options{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, QueueSize: -1})
		require.NoError(t, err)
		slot, err := full.Acquire(t.Context(), loadshed.PriorityReserve)
		require.NoError(t, err)
		t.Cleanup(func() { slot.Release(loadshed.Success) })
		d := deps
		d.Limiter, d.Registry = full, prometheus.NewRegistry()
		door := handlers.Routes(d)
		open := s.createSale(t, `{"sku":"sku_door_open","initialStock":10}`).SaleID
		status, h, body := send(door, "/sales/"+open+"/reservations", "", `{"quantity":1}`)
		require.Equal(t, 503, status, "%s", body)
		require.JSONEq(t, `{"error":{"code":"overloaded","message":"too busy right now; retry shortly"}}`, string(body))
		require.Contains(t, []string{"1", "2"}, h.Get("Retry-After"))
		require.Equal(t, "*", h.Get("Access-Control-Allow-Origin"))
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
