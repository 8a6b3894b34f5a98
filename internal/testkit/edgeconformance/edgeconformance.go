package edgeconformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// Start starts an edge in front of origins (base URLs) whose clock is off by
// skew (0: not at all), waits until it answers, and returns its base URL;
// it is stopped when the test ends. An edge that cannot run with its clock
// off skips the test it is given when skew is not 0.
type Start func(t *testing.T, origins []string, skew time.Duration) string

// settle bounds each wait for a document to reach an edge, or an answer to
// follow from one; a wait ends as soon as its condition holds. It is long
// because the suite runs beside the others on a saturated machine.
const settle = 60 * time.Second

// skew is the clock skew of the edge the skewed-clock step starts, as
// TestEdgeWithSkewedClock's.
const skew = -90 * time.Second

// Run checks, through an edge start starts in front of two origins of a
// database of the test's own, in steps that run one after another on the
// same origins and sales (a step that fails does not stop the next):
//
//   - PreopenTickets: pre-open tickets of a randomized_at_open room signed by
//     the edge, in the origins' format, the same one given back, counted by
//     the origins from the edge's reports and written nowhere; places that
//     agree with the draw's and the origin's; someone else's ticket refused;
//   - PassedOn: the page, the policy, a direct sale's ticket and a
//     reservation passed on to an origin; the admin's routes not served;
//   - Spread: customers' reservations passed on reach both origins, each
//     reservation one (the origins' metrics);
//   - Stream: a waiter's status stream, its place the poll's, then its
//     admission when the room opens, and its end;
//   - Draw: the open freezes the crowd with the edge's tickets; the first in
//     the draw (by the final seed) is admitted through the edge and buys
//     once; the committed crowd holds the edge's customers;
//   - Admission: an open room's challenge, a wrong solution, the admission
//     token (120 s, the ticket's admission id), one purchase with it;
//   - ClockSkew: an edge whose clock is 90 s behind admits, and the origin
//     takes its admission;
//   - OriginDown: one origin stopped, the other answers, never stale; a
//     purchase sent first to the stopped one (its customer's) is sent on
//     to the other;
//   - StaleDocument: both stopped, status polls stale and nobody admitted
//     (fail closed), new tickets refused but those placed by the draw
//     alone, passed-on requests 503; an origin back on its address, admitted
//     again.
func Run(t *testing.T, start Start) {
	if testing.Short() {
		t.Skip("starts flashline serve processes and an edge: not in -short")
	}
	ctx := context.Background()
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	addrs := []string{testserver.FreeAddr(t), testserver.FreeAddr(t)}
	origins := []*testserver.Server{
		testserver.Start(t, dbURL, "--role", "origin", "--addr", addrs[0]),
		testserver.Start(t, dbURL, "--role", "origin", "--addr", addrs[1]),
	}
	originURLs := []string{origins[0].URL, origins[1].URL}
	c := testserver.NewClient()
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)
	s := &suite{t: t, c: c, keys: keys}

	// Every room the steps use exists, and the open ones are open, in the
	// origins' document before the edge starts: an edge passes on what its
	// document does not name, and the origin would answer for it (a ticket
	// signed and counted by the origin, not the edge).
	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	drawn := c.CreateSale(t, origins[0].URL, fmt.Sprintf(`{"sku":"sku_conf_draw","initialStock":10,"admission":"waiting_room",
		"fairness":"randomized_at_open","opensAt":%q,"confirmation":"customer"}`, opensAt))
	later := c.CreateSale(t, origins[0].URL, fmt.Sprintf(`{"sku":"sku_conf_later","initialStock":10,"admission":"waiting_room",
		"fairness":"randomized_at_open","opensAt":%q}`, opensAt))
	toOpen := c.CreateSale(t, origins[0].URL, `{"sku":"sku_conf_stream","initialStock":10,"admission":"waiting_room","fairness":"arrival_order"}`)
	challenged := c.CreateSale(t, origins[0].URL, `{"sku":"sku_conf_challenge","initialStock":10,"admission":"waiting_room",
		"fairness":"arrival_order","challengeBits":6,"confirmation":"customer"}`)
	open := c.CreateSale(t, origins[0].URL, `{"sku":"sku_conf_open","initialStock":10,"admission":"waiting_room",
		"fairness":"arrival_order","confirmation":"customer"}`)
	direct := c.CreateSale(t, origins[0].URL, `{"sku":"sku_conf_direct","initialStock":10}`)
	spread := c.CreateSale(t, origins[0].URL, `{"sku":"sku_conf_spread","initialStock":64}`)
	for _, sale := range []string{challenged, open} {
		r, err := c.To(origins[0].URL).OpenSale(ctx, testserver.AdminToken, sale)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	for _, o := range originURLs {
		eventually(t, func() bool {
			d := s.document(o)
			for _, sale := range []string{drawn, later, toOpen, challenged, open} {
				if _, ok := d[sale]; !ok {
					return false
				}
			}
			return d[challenged].State == "open" && d[open].State == "open"
		}, "%s's document names the five rooms, two of them open", o)
	}
	edge := start(t, originURLs, 0)
	eventually(t, func() bool { return s.ready(edge) }, "the edge has a document")

	const customers = 24
	jwts := make([]string, customers)
	tickets := make([]string, customers)
	t.Run("PreopenTickets", func(t *testing.T) {
		s := s.in(t)
		for i := range jwts {
			id := fmt.Sprintf("conf-%03d", i)
			if i%10 == 3 {
				id = fmt.Sprintf("cönf-%03d-ü", i) // not ASCII: JSON writes it as it is, on every edge
			}
			jwts[i] = testserver.Token(t, id)
			tickets[i] = s.ticket(edge, drawn, jwts[i])
			tk, err := keys.ParseTicket(tickets[i])
			require.NoError(t, err, "the origins' keys read the edge's ticket")
			require.True(t, tk.PreOpen)
			require.Equal(t, tickets[i], keys.SignTicket(tk), "the ticket is the one roomtoken signs, byte for byte")
		}
		require.Equal(t, tickets[0], s.ticket(edge, drawn, jwts[0]), "asking again gives the same ticket")
		s.ticket(edge, later, testserver.Token(t, "conf-later-0"))

		// Both origins count the edge's tickets from its reports, and
		// neither writes them before the open.
		for _, o := range originURLs {
			var got int64
			eventually(t, func() bool {
				got = s.document(o)[drawn].PreopenTickets
				return got == customers
			}, "%s counts the edge's %d tickets: %v", o, customers, seen(&got))
		}
		var written int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_tickets FROM waiting_rooms WHERE sale_id = $1`, drawn).Scan(&written))
		require.Zero(t, written, "a pre-open ticket through the edge is written nowhere")

		// Places: the draw's share of the whole crowd, on the edge (once it
		// has heard the count) and on both origins.
		for i := 0; i < customers; i += 5 {
			tk, err := keys.ParseTicket(tickets[i])
			require.NoError(t, err)
			want := waitroom.Rank(tk, "randomized_at_open", customers)
			var st Status
			eventually(t, func() bool {
				st = s.status(edge, drawn, jwts[i], tickets[i])
				return st.Position == want
			}, "customer %d's place on the edge: %v, want %d", i, seen(&st), want)
			require.Equal(t, "waiting", st.State)
			require.False(t, st.Stale)
			require.LessOrEqual(t, st.PositionRange.P25, st.Position)
			require.GreaterOrEqual(t, st.PositionRange.P75, st.Position)
			for _, o := range originURLs {
				require.Equal(t, want, s.status(o, drawn, jwts[i], tickets[i]).Position, "customer %d on %s", i, o)
			}
		}
		r, err := c.Do(ctx, http.MethodGet, edge+"/sales/"+drawn+"/status?token="+tickets[1], jwts[0], "")
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, r.Status, "someone else's ticket: %s", r.Body)
		require.Contains(t, string(r.Body), "admission_invalid")
	})

	t.Run("PassedOn", func(t *testing.T) {
		page, err := c.Do(ctx, http.MethodGet, edge+"/sales/"+drawn+"/wait", "", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, page.Status)
		require.Contains(t, string(page.Body), "<html")
		pol, err := c.Do(ctx, http.MethodGet, edge+"/sales/"+drawn+"/policy", "", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, pol.Status, "%s", pol.Body)
		require.Contains(t, string(pol.Body), `"drawCommitment"`)
		jwt := testserver.Token(t, "conf-direct")
		r, err := c.Do(ctx, http.MethodGet, edge+"/sales/"+direct+"/ticket", jwt, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, r.Status, "a direct sale's ticket, the origin's answer: %s", r.Body)
		r, err = c.Reserve(ctx, edge, direct, jwt, "conf-direct-1", 1)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		// Not served, whatever the token (sent without the contract's
		// check: the document says what an origin answers there).
		for _, path := range []string{"/admin/sales/" + drawn, "/metrics", "/edge/watermarks"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, edge+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+testserver.AdminToken)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		}
	})

	t.Run("Spread", func(t *testing.T) {
		s := s.in(t)
		// A customer's requests go to one origin, the customers to both:
		// customers reserve, eight at a time, until both origins have
		// answered some (a batch all at one origin is 1 in 128; eight such
		// batches, 1 in 2^63), and no reservation reached two.
		before := []int{s.reservations(originURLs[0]), s.reservations(originURLs[1])}
		var got []int
		for n := 8; n <= 64; n += 8 {
			for i := n - 8; i < n; i++ {
				id := fmt.Sprintf("conf-spread-%02d", i)
				r, err := c.Reserve(ctx, edge, spread, testserver.Token(t, id), id, 1)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			}
			eventually(t, func() bool {
				got = []int{s.reservations(originURLs[0]) - before[0], s.reservations(originURLs[1]) - before[1]}
				return got[0]+got[1] >= n
			}, "the origins count %d reservations: %v", n, seen(&got))
			require.Equal(t, n, got[0]+got[1], "each reservation reached one origin: %v", got)
			if got[0] > 0 && got[1] > 0 {
				break
			}
		}
		require.True(t, got[0] > 0 && got[1] > 0, "reservations through the edge reach both origins: %v", got)
	})

	t.Run("Stream", func(t *testing.T) {
		s := s.in(t)
		jwt := testserver.Token(t, "conf-streamer")
		held := s.ticket(edge, toOpen, jwt)
		var polled Status
		eventually(t, func() bool {
			polled = s.status(edge, toOpen, jwt, held)
			return polled.State == "waiting"
		}, "the edge answers the room's polls: %v", seen(&polled))
		stream := openStream(t, edge+"/sales/"+toOpen+"/status/stream?token="+held, jwt)
		first := stream.status()
		require.Equal(t, "waiting", first.State)
		require.False(t, first.Stale)
		require.Equal(t, polled.Position, first.Position, "the stream's place is the poll's")
		r, err := c.To(origins[1].URL).OpenSale(ctx, testserver.AdminToken, toOpen)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		admitted := stream.until("admitted")
		require.NotEmpty(t, admitted.AdmissionToken)
		require.EqualValues(t, 120, admitted.ExpiresIn)
		require.Equal(t, "end", stream.next().Event, "the stream ends after the admission")
	})

	t.Run("Draw", func(t *testing.T) {
		s := s.in(t)
		r, err := c.To(origins[0].URL).OpenSale(ctx, testserver.AdminToken, drawn)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var finalSeed []byte
		eventually(t, func() bool {
			require.NoError(t, pool.QueryRow(ctx, `SELECT final_seed FROM waiting_rooms WHERE sale_id = $1`, drawn).Scan(&finalSeed))
			return finalSeed != nil
		}, "the crowd committed")
		var frozen int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_count FROM waiting_rooms WHERE sale_id = $1`, drawn).Scan(&frozen))
		require.EqualValues(t, customers, frozen, "the pre-open crowd as frozen counts the edge's tickets")
		// The first in the draw: the customer of the lowest rank by the
		// final seed (ranks are drawn, not dealt: rank 1 may be nobody's).
		first, best := -1, int64(customers+1)
		for i, tok := range tickets {
			tk, err := keys.ParseTicket(tok)
			require.NoError(t, err)
			if r := waitroom.RankIn(tk, "randomized_at_open", customers, 0, finalSeed); r < best {
				first, best = i, r
			}
		}
		require.GreaterOrEqual(t, first, 0, "someone is first in the draw")
		var st Status
		eventually(t, func() bool {
			st = s.status(edge, drawn, jwts[first], tickets[first])
			return st.State == "admitted"
		}, "the first in the draw admitted through the edge: %v", seen(&st))
		s.buysOnce(edge, drawn, jwts[first], st.AdmissionToken, "conf-draw")

		var transcript struct {
			Status          string
			RegistrantCount int64
		}
		d, err := c.Do(ctx, http.MethodGet, origins[1].URL+"/sales/"+drawn+"/draw", "", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, d.Status, "%s", d.Body)
		require.NoError(t, json.Unmarshal(d.Body, &transcript))
		require.Equal(t, "drawn", transcript.Status)
		require.EqualValues(t, customers, transcript.RegistrantCount, "the committed crowd holds every customer of the edge")
	})

	t.Run("Admission", func(t *testing.T) {
		s := s.in(t)
		jwt := testserver.Token(t, "conf-buyer")
		held := s.ticket(edge, challenged, jwt)
		tk, err := keys.ParseTicket(held)
		require.NoError(t, err)
		require.False(t, tk.PreOpen, "a ticket of an arrival_order room takes a position")
		var st Status
		eventually(t, func() bool {
			st = s.status(edge, challenged, jwt, held)
			return st.State == "challenge_required"
		}, "the challenge: %v", seen(&st))
		require.Equal(t, keys.ChallengeNonce(tk), st.Challenge.Nonce, "the origins' nonce")
		require.Equal(t, 6, st.Challenge.Bits)
		require.Equal(t, "challenge_required", s.status(edge, challenged, jwt, held+"&solution="+wrongSolution(st.Challenge.Nonce, 6)).State,
			"a wrong solution")
		st = s.status(edge, challenged, jwt, held+"&solution="+roomtoken.Solve(st.Challenge.Nonce, 6))
		require.Equal(t, "admitted", st.State, "%+v", st)
		require.False(t, st.Stale)
		require.EqualValues(t, 120, st.ExpiresIn)
		a, err := keys.ParseAdmission(st.AdmissionToken)
		require.NoError(t, err)
		require.Equal(t, roomtoken.AdmissionID(tk), a.ID, "the admission id is the ticket's")
		s.buysOnce(edge, challenged, jwt, st.AdmissionToken, "conf-admission")
	})

	t.Run("ClockSkew", func(t *testing.T) {
		skewed := start(t, originURLs, skew)
		s := s.in(t)
		eventually(t, func() bool { return s.ready(skewed) }, "the skewed edge has a document")
		// A token dated by the edge's clock: the step is about what the edge
		// judges by the database's clock (its requests, openings, admission
		// tokens), not about a customer's token issued in its future, which
		// a Worker whose own clock is behind leaves to the origins, and the
		// Go edge's test hook does not skew.
		jwt := tokenAt(t, "conf-skewed", time.Now().Add(skew))
		held := s.ticket(skewed, challenged, jwt)
		tk, err := keys.ParseTicket(held)
		require.NoError(t, err)
		held += "&solution=" + roomtoken.Solve(keys.ChallengeNonce(tk), 6)
		var st Status
		eventually(t, func() bool {
			st = s.status(skewed, challenged, jwt, held)
			require.False(t, st.Stale, "stale with its origins up")
			return st.State == "admitted"
		}, "admitted by the skewed edge: %v", seen(&st))
		s.buysOnce(skewed, challenged, jwt, st.AdmissionToken, "conf-skew")
	})

	// The last two steps stop the origins: the customers they poll for
	// take their tickets and are admitted while both answer. The buyer's
	// origin is the one stopped first: its purchase is sent there first,
	// reaches nobody, and is sent on to the other (the Worker sends on a
	// request that did not reach an origin only with an Idempotency-Key).
	buyer, waiter := customerAt(t, "conf-failover", 0, len(originURLs)), testserver.Token(t, "conf-waiter")
	buyerTicket, waiterTicket := s.ticket(edge, open, buyer), s.ticket(edge, open, waiter)
	t.Run("OriginDown", func(t *testing.T) {
		s := s.in(t)
		require.NoError(t, origins[0].Stop(t))
		var st Status
		eventually(t, func() bool {
			st = s.status(edge, open, buyer, buyerTicket)
			require.False(t, st.Stale, "stale with an origin left")
			return st.State == "admitted"
		}, "admitted with one origin down: %v", seen(&st))
		s.buysOnce(edge, open, buyer, st.AdmissionToken, "conf-failover")
		// Never stale over a few more pulls.
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			require.False(t, s.status(edge, open, waiter, waiterTicket).Stale, "stale with an origin left")
		}
		eventually(t, func() bool { return s.status(edge, open, waiter, waiterTicket).State == "admitted" },
			"the waiter admitted with one origin down")
	})

	t.Run("StaleDocument", func(t *testing.T) {
		s := s.in(t)
		// The edge answers stale for its document's life, then may forget
		// the room and pass its polls on; an origin's stop can take longer
		// than that on a busy machine, so the polls start with the stop.
		stopped := make(chan error, 1)
		go func() { stopped <- origins[1].Stop(t) }()
		var st Status
		eventually(t, func() bool {
			st = s.status(edge, open, waiter, waiterTicket)
			return st.Stale
		}, "stale once no origin answers: %v", seen(&st))
		require.Equal(t, "waiting", st.State, "fail closed: nobody admitted")
		require.Empty(t, st.AdmissionToken)
		r, err := c.Do(ctx, http.MethodGet, edge+"/sales/"+open+"/ticket", testserver.Token(t, "conf-late"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		require.Contains(t, string(r.Body), "sale_paused_fail_closed")
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		// Placed by the draw alone: still handed out.
		r, err = c.Do(ctx, http.MethodGet, edge+"/sales/"+later+"/ticket", testserver.Token(t, "conf-later-1"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "a ticket placed by the draw alone: %s", r.Body)
		require.NoError(t, <-stopped, "the second origin stopped")
		r, err = c.Do(ctx, http.MethodGet, edge+"/sales/"+drawn+"/policy", "", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "passed on to no origin: %s", r.Body)
		require.Contains(t, string(r.Body), "overloaded")
		require.Equal(t, "2", r.Header.Get("Retry-After"))
		require.False(t, s.ready(edge), "/readyz with no origin answering")
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			st = s.status(edge, open, waiter, waiterTicket)
			require.Equal(t, "waiting", st.State, "fail closed")
			require.True(t, st.Stale)
		}

		testserver.Start(t, dbURL, "--role", "origin", "--addr", addrs[1])
		eventually(t, func() bool {
			st = s.status(edge, open, waiter, waiterTicket)
			return st.State == "admitted" && !st.Stale
		}, "admitted again once an origin is back: %v", seen(&st))
	})
}
