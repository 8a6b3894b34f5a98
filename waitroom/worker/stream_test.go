package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// event is one server-sent event of a status stream: "status" with its
// data, "reconnect" with its retry, or "end" when the server closed it.
type event struct {
	Event string
	Data  string
	Retry int
}

// sse is an open status stream, its events read as they come.
type sse struct {
	t      *testing.T
	events chan event
	cancel context.CancelFunc
}

// openSSE opens a status stream at url as jwt's customer and checks it is
// one (200, text/event-stream); it is closed when the test ends.
func openSSE(t *testing.T, url, jwt string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	s := &sse{t: t, events: make(chan event, 64), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var e event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.Event != "" {
					s.events <- e
				}
				e = event{}
			case strings.HasPrefix(line, "event: "):
				e.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.Data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "retry: "):
				e.Retry, _ = strconv.Atoi(strings.TrimPrefix(line, "retry: "))
			case strings.HasPrefix(line, ":"): // the heartbeat
			default:
				s.events <- event{Event: "garbled", Data: line}
			}
		}
		s.events <- event{Event: "end"}
	}()
	return s
}

// next is the stream's next event, within settle.
func (s *sse) next() event {
	s.t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			return event{Event: "end"}
		}
		return e
	case <-time.After(settle):
		s.t.Fatal("no event on the status stream")
		return event{}
	}
}

// status is the stream's next event, which must be a status.
func (s *sse) status() status {
	s.t.Helper()
	e := s.next()
	require.Equal(s.t, "status", e.Event, "%+v", e)
	var st status
	require.NoError(s.t, json.Unmarshal([]byte(e.Data), &st), e.Data)
	return st
}

// until reads statuses until one is in state, and returns it.
func (s *sse) until(state string) status {
	s.t.Helper()
	for {
		st := s.status()
		if st.State == state {
			return st
		}
	}
}

// TestWorkerStatusStream: the Worker answers a waiting room's status
// stream itself, as the Go edge's (handlers/stream.go): a waiter hears its
// place (the one the origin's own stream gives; someone else's ticket is
// refused as a poll is, admission_invalid), then its admission when
// the sale opens, and the stream ends; waiters of a sale closed hear "sold
// out" for good and their streams end; a customer's third stream for a sale
// ends the oldest with event: reconnect and retry: 5000; the origin
// stopped, a waiter's stream says "stale" as the polls do, admits nobody,
// stays open, and hears the document again when the origin is back.
func TestWorkerStatusStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve and workerd: not in -short")
	}
	workerdBinary(t)
	dbURL := testdb.New(t)
	ctx := context.Background()
	addr := testserver.FreeAddr(t)
	origin := testserver.Start(t, dbURL, "--role", "origin", "--addr", addr)
	c := testserver.NewClient()
	// Three arrival_order rooms not open yet: one to open, one to close,
	// one whose document goes stale. The Worker starts after the origin
	// names them (a sale it does not know yet is passed on, and its stream
	// would be the origin's).
	// toOpen has variants: the Worker's answers carry them as the origin's.
	toOpen := c.CreateSale(t, origin.URL, `{"sku":"sku_stream_open","admission":"waiting_room","fairness":"arrival_order",
		"variants":[{"sku":"S","title":"Small & <narrow>  ","stock":1},{"sku":"M","title":"Médium","stock":9}]}`)
	toClose := c.CreateSale(t, origin.URL, `{"sku":"sku_stream_close","initialStock":10,"admission":"waiting_room","fairness":"arrival_order"}`)
	toStale := c.CreateSale(t, origin.URL, `{"sku":"sku_stream_stale","initialStock":10,"admission":"waiting_room","fairness":"arrival_order"}`)
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var out struct{ Document string }
		r, err := c.Do(ctx, http.MethodGet, origin.URL+"/edge/watermarks", "", "")
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(r.Body, &out))
		d, _, err := keys.OpenWatermarks(out.Document)
		require.NoError(t, err)
		return len(d.Sales) == 3
	}, settle, 100*time.Millisecond, "the origin's document names the three rooms")
	worker := startWorker(t, origin.URL)
	stream := func(base, sale, jwt, ticket string) *sse {
		return openSSE(t, base+"/sales/"+sale+"/status/stream?token="+ticket, jwt)
	}
	waiter := testserver.Token(t, "stream-waiter")
	held := ticket(t, c, worker, toOpen, waiter)
	var polled status
	require.Eventually(t, func() bool {
		r, err := c.Do(ctx, http.MethodGet, worker+"/sales/"+toOpen+"/status?token="+held, waiter, "")
		require.NoError(t, err)
		return r.Status == http.StatusOK && json.Unmarshal(r.Body, &polled) == nil && polled.State == "waiting"
	}, settle, 100*time.Millisecond, "the Worker answers the room's polls")

	// originStreams is how many status streams the origin holds open: the
	// Worker's own streams are none of them.
	originStreams := func() string {
		r, err := c.Do(ctx, http.MethodGet, origin.URL+"/metrics", testserver.AdminToken, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
		for line := range strings.SplitSeq(string(r.Body), "\n") {
			if v, ok := strings.CutPrefix(line, "flashline_status_streams "); ok {
				return v
			}
		}
		return "none"
	}

	// The place: the one the origin's own stream gives.
	s := stream(worker, toOpen, waiter, held)
	first := s.status()
	require.Equal(t, "waiting", first.State)
	require.False(t, first.Stale)
	require.Equal(t, "0", originStreams(), "the Worker's stream, not the origin's passed on")
	o := stream(origin.URL, toOpen, waiter, held)
	fromOrigin := o.status()
	require.Equal(t, fromOrigin.Position, first.Position, "the place the origin's stream gives")
	wantVariants := []variant{{"S", "Small & <narrow> \u2028", "available"}, {"M", "Médium", "available"}}
	require.Equal(t, wantVariants, fromOrigin.Variants, "the origin's stream names the variants")
	require.Equal(t, fromOrigin.Variants, first.Variants, "the variants the origin's stream gives")
	require.Equal(t, "1", originStreams(), "the origin counts its own stream")
	o.cancel()

	// Someone else's ticket: the poll's answer, admission_invalid.
	r, err := c.Do(ctx, http.MethodGet, worker+"/sales/"+toOpen+"/status/stream?token="+held, testserver.Token(t, "stream-other"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), "admission_invalid")

	// The sale opens: the waiter hears its admission, and the stream ends.
	res, err := c.To(origin.URL).OpenSale(ctx, testserver.AdminToken, toOpen)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	admitted := s.until("admitted")
	require.NotEmpty(t, admitted.AdmissionToken)
	require.EqualValues(t, 120, admitted.ExpiresIn)
	require.Equal(t, wantVariants, admitted.Variants, "the admission names the variants to choose from")
	require.Equal(t, "end", s.next().Event, "the stream ends after the admission")
	r, err = c.Do(ctx, http.MethodPost, worker+"/sales/"+toOpen+"/reservations", waiter, `{"variant":"S","quantity":1}`,
		"Idempotency-Key", "stream-buy-1", "X-Admission-Token", admitted.AdmissionToken)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "the streamed admission buys: %s", r.Body)
	// S's one unit held: the Worker's polls say S is sold out, as the
	// origin's do, byte for byte, and M still available.
	rawVariants := func(base string) string {
		r, err := c.Do(ctx, http.MethodGet, base+"/sales/"+toOpen+"/status?token="+held, waiter, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var v struct{ Variants json.RawMessage }
		require.NoError(t, json.Unmarshal(r.Body, &v))
		return string(v.Variants)
	}
	soldOutS := `[{"sku":"S","title":"Small \u0026 \u003cnarrow\u003e \u2028","availability":"sold_out"},` +
		`{"sku":"M","title":"Médium","availability":"available"}]`
	require.Eventually(t, func() bool { return rawVariants(origin.URL) == soldOutS }, settle, 100*time.Millisecond, "S sold out at the origin")
	require.Eventually(t, func() bool { return rawVariants(worker) == soldOutS }, settle, 100*time.Millisecond, "S sold out through the Worker")

	// Three streams of one customer for one sale: the oldest is told to
	// come back in 5 s; the other two stay open.
	tabs := testserver.Token(t, "stream-tabs")
	tabsTicket := ticket(t, c, worker, toClose, tabs)
	var open []*sse
	for range 3 {
		tab := stream(worker, toClose, tabs, tabsTicket)
		require.Equal(t, "waiting", tab.status().State)
		open = append(open, tab)
	}
	// And a waiter of the room whose document will go stale.
	stale := testserver.Token(t, "stream-stale")
	staleTicket := ticket(t, c, worker, toStale, stale)
	w := stream(worker, toStale, stale, staleTicket)
	require.Equal(t, "waiting", w.status().State)
	require.Eventually(t, func() bool { return originStreams() == "0" }, settle, 100*time.Millisecond,
		"the Worker's streams, not the origin's passed on")
	e := open[0].next()
	require.Equal(t, "reconnect", e.Event, "%+v", e)
	require.Equal(t, 5000, e.Retry)
	require.Equal(t, "end", open[0].next().Event)

	// The sale closes: every waiter hears "sold out" for good, and their
	// streams end.
	r, err = c.Do(ctx, http.MethodPost, origin.URL+"/admin/sales/"+toClose+"/close", testserver.AdminToken, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	for _, tab := range open[1:] {
		st := tab.until("sold_out")
		require.NotNil(t, st.QueueIsFull)
		require.True(t, *st.QueueIsFull)
		require.Equal(t, "end", tab.next().Event, "the stream ends after sold out for good")
	}

	// The origin stops: the stream says what the polls say, waiting and
	// stale, nobody admitted (fail closed), and stays open. The origin back
	// on its address: the stream hears the document again, and the
	// admission once the room opens.
	require.NoError(t, origin.Stop(t))
	st := w.until("waiting")
	for !st.Stale {
		st = w.until("waiting")
	}
	require.Empty(t, st.AdmissionToken)
	polled = getStatus(t, c, worker, toStale, stale, staleTicket)
	require.Equal(t, "waiting", polled.State)
	require.True(t, polled.Stale, "the poll says the same")
	origin = testserver.Start(t, dbURL, "--role", "origin", "--addr", addr)
	for st.Stale {
		st = w.status()
		require.Equal(t, "waiting", st.State, "nobody admitted before the room opens: %+v", st)
	}
	res, err = c.To(origin.URL).OpenSale(ctx, testserver.AdminToken, toStale)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotEmpty(t, w.until("admitted").AdmissionToken)
	require.Equal(t, "end", w.next().Event)
}
