package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/salecache"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/edge"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// edgeServer is an edge (serve --role edge, in process) in front of one
// origin on its own database, wired as serve wires it: an edge.Client
// pulling the origin's document, the sale cache and the waiting room on it.
type edgeServer struct {
	origin *server
	deps   handlers.EdgeDeps
	client *edge.Client
}

// startEdge starts an origin with a waiting room and an edge in front of
// it, both kept current until the test ends.
func startEdge(t testing.TB) *edgeServer {
	t.Helper()
	origin := startServer(t, &waitroom.Options{})
	srv := httptest.NewServer(origin.handler)
	t.Cleanup(srv.Close)
	keys := roomtoken.DeriveKeyring(jwtSecret)
	client, err := edge.NewClient(keys, edge.Options{Origins: []string{srv.URL}, Interval: 50 * time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
	cache := salecache.New(client, salecache.Options{Logger: testLogger(t), RefreshInterval: 50 * time.Millisecond, StaleAfter: time.Second})
	keys = keys.WithClock(cache.Now)
	room := waitroom.NewRoom(cache, client, keys, nil, waitroom.Options{Logger: testLogger(t), Registry: prometheus.NewRegistry(), Now: cache.Now})
	verifier, err := auth.NewVerifier(jwtSecret, adminToken)
	require.NoError(t, err)
	limiter, err := loadshed.New(loadshed.Options{InitialLimit: 4096, MinLimit: 4096, MaxLimit: 4096, QueueSize: -1, PollShare: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = client.Run(ctx) })
	wg.Go(func() { _ = cache.Run(ctx) })
	wg.Go(func() { _ = room.RunCounts(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &edgeServer{origin: origin, client: client, deps: handlers.EdgeDeps{
		Room: room, Edge: client, Verifier: verifier, Limiter: limiter, Logger: testLogger(t),
		Origins: []string{srv.URL}, Registry: prometheus.NewRegistry(),
	}}
}

// routes is the edge's handler, built from its deps (each with a registry
// of its own, so that it can be built again).
func (e *edgeServer) routes() http.Handler {
	d := e.deps
	d.Registry = prometheus.NewRegistry()
	return handlers.EdgeRoutes(d)
}

// preopenRoom creates a randomized_at_open room of sku on the origin, opening
// in an hour, and waits until the edge answers its tickets itself.
func (e *edgeServer) preopenRoom(t testing.TB, h http.Handler, sku string) string {
	t.Helper()
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	sale := e.origin.createSale(t, `{"sku":"`+sku+`","initialStock":5,"admission":"waiting_room","fairness":"randomized_at_open","opensAt":"`+later+`"}`).SaleID
	probe := customer(t, "probe")
	require.Eventually(t, func() bool {
		if !e.client.Knows(sale) {
			return false
		}
		status, _, _ := serve(t, h, http.MethodGet, "/sales/"+sale+"/ticket", probe, "")
		return status == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	return sale
}

// BenchmarkEdge is what the edge's answers cost past net/http, each against
// the same handler's /healthz (the mark scripts/capacity.sh measures them
// by): /healthz; a new pre-open ticket (randomized_at_open, a ticket asked
// for without the one held, by 64 customers in turn, as loadtest's edge
// scenario asks); a status poll of a customer's ticket (waiting). Through
// the edge's front door (edgedoor.go) and through its routes alone (gin,
// its middleware, the handler chain).
func BenchmarkEdge(b *testing.B) {
	e := startEdge(b)
	door := e.routes()
	sale := e.preopenRoom(b, door, "sku_edge_bench")
	customers := make([]string, 64)
	for i := range customers {
		customers[i] = customer(b, "edge-bench-"+strconv.Itoa(i))
	}
	tk := decodeTicket(b, door, sale, customers[0])
	for _, h := range []struct {
		name    string
		handler http.Handler
	}{{"front-door", door}, {"routes", handlers.BehindTheEdgeDoor(door)}} {
		for _, c := range []struct {
			name, path string
			auth       []string
		}{
			{"healthz", "/healthz", nil},
			{"ticket", "/sales/" + sale + "/ticket", customers},
			{"status", "/sales/" + sale + "/status?token=" + tk.Token, customers[:1]},
		} {
			b.Run(h.name+"/"+c.name, func(b *testing.B) {
				req, err := http.NewRequest(http.MethodGet, c.path, nil)
				require.NoError(b, err)
				authorization := []string{""}
				if c.auth != nil {
					req.Header["Authorization"] = authorization
				}
				rec := newRecorder()
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					if c.auth != nil {
						authorization[0] = c.auth[i%len(c.auth)]
						i++
					}
					rec.reset()
					h.handler.ServeHTTP(rec, req)
				}
				require.Equal(b, http.StatusOK, rec.status, "%s", rec.body.Bytes())
			})
		}
	}
}

// decodeTicket is authorization's ticket in sale, asked of h.
func decodeTicket(t testing.TB, h http.Handler, sale, authorization string) ticketJSON {
	t.Helper()
	status, _, body := serve(t, h, http.MethodGet, "/sales/"+sale+"/ticket", authorization, "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var tk ticketJSON
	require.NoError(t, json.Unmarshal(body, &tk))
	return tk
}

// TestEdgeDoorAnswersAsTheRoutes: a ticket or status poll the edge's front
// door answers from memory is the routes' answer (status, the headers a
// client reads, the JSON but for the estimate and the jittered poll
// interval, which move between two asks; a ticket's token the same, and
// verifiable as the route's), the door answers it alone, and what it does
// not decide is the routes' own answer.
func TestEdgeDoorAnswersAsTheRoutes(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	door, routes, alone := e.routes(), handlers.BehindTheEdgeDoor(e.routes()), handlers.TheEdgeDoorAlone(e.routes())
	sale := e.preopenRoom(t, door, "sku_edge_door")
	get := func(h http.Handler, path, authorization string) (int, http.Header, []byte) {
		return serve(t, h, http.MethodGet, path, authorization, "")
	}
	headers := []string{"Content-Type", "Cache-Control", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers", "Connection"}
	// same compares the door's answer (alone) with the routes', the moving
	// fields aside, and returns the door's JSON.
	same := func(t *testing.T, path, authorization string) map[string]any {
		t.Helper()
		ds, dh, db := get(alone, path, authorization)
		rs, rh, rb := get(routes, path, authorization)
		require.Equal(t, http.StatusOK, ds, "%s", db)
		require.Equal(t, rs, ds)
		for _, k := range headers {
			require.Equal(t, rh.Values(k), dh.Values(k), k)
		}
		require.Equal(t, strconv.Itoa(len(db)), dh.Get("Content-Length"))
		dj := withoutMoving(t, db)
		require.Equal(t, withoutMoving(t, rb), dj)
		return dj
	}
	alice := customer(t, "alice")
	ticketPath := "/sales/" + sale + "/ticket"
	var tk ticketJSON
	t.Run("NewTicket", func(t *testing.T) {
		dj := same(t, ticketPath, alice)
		require.Equal(t, "randomized_at_open", dj["policy"])
		require.Contains(t, dj, "challenge") // null, as the route writes it
		tk = decodeTicket(t, alone, sale, alice)
		// An origin reads it as its own.
		r := e.origin.do(t, http.MethodGet, "/sales/"+sale+"/status?token="+url.QueryEscape(tk.Token), alice, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})
	t.Run("PresentedTicket", func(t *testing.T) {
		dj := same(t, ticketPath+"?token="+tk.Token, alice)
		require.Equal(t, tk.Token, dj["token"])
	})
	t.Run("Status", func(t *testing.T) {
		dj := same(t, "/sales/"+sale+"/status?token="+tk.Token, alice)
		require.Equal(t, "waiting", dj["state"])
	})
	t.Run("NotDecidedHere", func(t *testing.T) {
		// A bad token, the admin, another customer's ticket, an escaped or
		// repeated query, a sale the edge does not answer for, an id of
		// the wrong shape: the routes' answers, which the door alone does
		// not give.
		bob := customer(t, "bob")
		statusPath := "/sales/" + sale + "/status?token=" + tk.Token
		for _, c := range []struct {
			path, authorization string
		}{
			{statusPath, "Bearer nope"},
			{statusPath, adminAuth},
			{statusPath, bob},
			{ticketPath, "Bearer nope"},
			{ticketPath, adminAuth},
			{ticketPath, ""},
			{ticketPath + "?token=" + url.QueryEscape(tk.Token[:5]) + "%" + fmt.Sprintf("%02X", tk.Token[5]) + tk.Token[6:], alice},
			{ticketPath + "?token=" + tk.Token + "&token=" + tk.Token, alice},
			{"/sales/not-an-id/ticket", alice},
			{"/sales/sale_00000000000000000000000000/ticket", alice}, // passed on: an origin answers
			{"/sales/sale_00000000000000000000000000/status?token=" + tk.Token, alice},
		} {
			ds, dh, db := get(door, c.path, c.authorization)
			rs, rh, rb := get(routes, c.path, c.authorization)
			require.Equal(t, rs, ds, c.path)
			require.Equal(t, withoutMoving(t, rb), withoutMoving(t, db), c.path)
			for _, k := range headers {
				require.Equal(t, rh.Values(k), dh.Values(k), k)
			}
			as, _, _ := get(alone, c.path, c.authorization)
			require.Equal(t, 599, as, "the door alone answered %s", c.path)
		}
	})
}

// withoutMoving is a JSON answer with the fields that move between two asks
// (the estimate, the jittered poll interval) only said to be there.
func withoutMoving(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var j map[string]any
	require.NoError(t, json.Unmarshal(body, &j), "%s", body)
	for _, k := range []string{"pollAfterMs", "estimatedWaitSeconds", "position", "positionRange"} {
		if _, ok := j[k]; ok {
			j[k] = "present"
		}
	}
	return j
}

// TestEdgeStatusCarriesTheVariants: through an edge a sale's status answers
// (a poll and the stream) carry the variants the origin's do, built from
// the watermarks document (each one's sku, title and availability, never a
// count), and a variant that sells out is told sold out through the edge
// as from the origin.
func TestEdgeStatusCarriesTheVariants(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	door := e.routes()
	sale := e.origin.createSale(t, `{"sku":"sku_edge_variants","admission":"waiting_room","fairness":"arrival_order",
		"variants":[{"sku":"S","title":"Small & <narrow>","stock":1},{"sku":"M","title":"Médium","stock":40},{"sku":"L","stock":40}]}`).SaleID
	requireSale(t, e.origin.do(t, http.MethodPost, "/admin/sales/"+sale+"/open", adminAuth, ""), 200)
	require.Eventually(t, func() bool { return e.client.Knows(sale) }, 10*time.Second, 20*time.Millisecond, "the edge knows the sale")
	ivan := customer(t, "ivan")
	var tk ticketJSON
	require.Eventually(t, func() bool {
		status, _, body := serve(t, door, http.MethodGet, "/sales/"+sale+"/ticket", ivan, "")
		return status == http.StatusOK && json.Unmarshal(body, &tk) == nil
	}, 10*time.Second, 20*time.Millisecond, "a ticket at the edge")
	statusPath := "/sales/" + sale + "/status?token=" + url.QueryEscape(tk.Token)
	// variants is an answer's "variants", as written.
	variants := func(body []byte) string {
		var v struct{ Variants json.RawMessage }
		require.NoError(t, json.Unmarshal(body, &v), "%s", body)
		return string(v.Variants)
	}
	atEdge := func() string {
		status, _, body := serve(t, door, http.MethodGet, statusPath, ivan, "")
		require.Equal(t, http.StatusOK, status, "%s", body)
		return variants(body)
	}
	atOrigin := func() string {
		r := e.origin.do(t, http.MethodGet, statusPath, ivan, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return variants(r.Body)
	}
	want := `[{"sku":"S","title":"Small \u0026 \u003cnarrow\u003e","availability":"available"},` +
		`{"sku":"M","title":"Médium","availability":"available"},{"sku":"L","title":"L","availability":"available"}]`
	require.Equal(t, want, atOrigin(), "the origin's answer")
	require.Equal(t, want, atEdge(), "the edge's poll: the origin's variants")

	// The stream through the edge says the same.
	edgeSrv := httptest.NewServer(door)
	t.Cleanup(edgeSrv.Close)
	req, err := http.NewRequest(http.MethodGet, edgeSrv.URL+"/sales/"+sale+"/status/stream?token="+url.QueryEscape(tk.Token), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", ivan)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			require.Equal(t, want, variants([]byte(data)), "the edge's stream: the origin's variants")
			break
		}
	}
	require.NoError(t, sc.Err())
	cancel()

	// S sells out (its one unit held): sold out through the edge, as from
	// the origin, and the others still available; no count in either.
	keys := roomtoken.DeriveKeyring(jwtSecret)
	admission := keys.SignAdmission(roomtoken.Admission{ID: "adm-hana-variants", SaleID: sale, CustomerID: "hana", ExpiresAt: time.Now().Add(time.Minute)})
	requireReservation(t, e.origin.do(t, http.MethodPost, "/sales/"+sale+"/reservations", customer(t, "hana"), `{"variant":"S","quantity":1}`,
		"Idempotency-Key", "edge-variants-1", "X-Admission-Token", admission), http.StatusCreated)
	soldOut := strings.Replace(want, `"availability":"available"`, `"availability":"sold_out"`, 1)
	require.Eventually(t, func() bool { return atOrigin() == soldOut }, 10*time.Second, 20*time.Millisecond, "S sold out at the origin")
	require.Eventually(t, func() bool { return atEdge() == soldOut }, 10*time.Second, 20*time.Millisecond, "S sold out through the edge")
	require.Equal(t, atOrigin(), atEdge())
}
