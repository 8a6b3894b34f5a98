package waitpage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// The page waits in line on the status stream (server-sent events read
// with fetch and the body's reader, in the modules the shop's button runs
// too), and falls back to its polls when the stream is refused.

// openAndReserve opens the page for a sale opening in a few seconds and
// waits until it holds a unit; it returns the page's requests to the room.
func openAndReserve(t *testing.T, b *browser, base, saleID, jwt string) []fetchEntry {
	t.Helper()
	openRoom(t, b, base, saleID, jwt)
	return reserved(t, b)
}

// openRoom opens the sale's waiting page as jwt's customer, recording its
// fetches, and waits for it to wait.
func openRoom(t *testing.T, b *browser, base, saleID, jwt string) {
	t.Helper()
	b.do("record fetches", 10*time.Second, func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fetchRecorder})
		return chromedp.Void{}, err
	})
	b.do("open the waiting room", 30*time.Second, chromedp.Navigate(base+"/sales/"+saleID+"/wait#token="+jwt))
	b.adoptLinkToken()
	b.waitState(30*time.Second, "waiting")
}

// reserved waits for the page to hold a reservation and returns its
// requests to the room (status polls and streams).
func reserved(t *testing.T, b *browser) []fetchEntry {
	t.Helper()
	b.waitState(120*time.Second, "reserved")
	return roomFetches(b)
}

func roomFetches(b *browser) []fetchEntry {
	var room []fetchEntry
	for _, e := range eval[[]fetchEntry](b, `window.__flashlineFetches || []`) {
		if strings.Contains(e.URL, "/status") {
			room = append(room, e)
		}
	}
	return room
}

func streamsAndPolls(room []fetchEntry) (streams []fetchEntry, polls int) {
	for _, e := range room {
		if strings.Contains(e.URL, "/status/stream") {
			streams = append(streams, e)
		} else {
			polls++
		}
	}
	return streams, polls
}

// TestWaitPageWaitsOnTheStream: from its ticket to its turn, the page holds
// one stream (it ends with the admission) instead of polling.
func TestWaitPageWaitsOnTheStream(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t)
	srv := testserver.Start(t, testdb.New(t))
	c := testserver.NewClient()
	opensAt := time.Now().Add(8 * time.Second).UTC().Format(time.RFC3339)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_stream","initialStock":2,"perCustomerLimit":1,`+
		`"opensAt":%q,"admission":"waiting_room","fairness":"arrival_order","confirmation":"customer"}`, opensAt))
	room := openAndReserve(t, b, srv.URL, saleID, testserver.Token(t, "stream-customer"))
	streams, polls := streamsAndPolls(room)
	if len(streams) == 0 || streams[0].Status != http.StatusOK {
		b.fail("no status stream answered 200: %+v", room)
	}
	// A stream may end early on a loaded machine (then one poll follows it
	// and a new stream): never a poll at every pollAfterMs.
	if polls > len(streams) {
		b.fail("%d status polls beside %d streams: the page polled instead of waiting on its stream (%+v)", polls, len(streams), room)
	}
	t.Logf("waitpage: %d stream(s), %d poll(s) from ticket to turn", len(streams), polls)
}

// TestWaitPageFallsBackToPolls: an instance that can hold one stream, and
// another waiter holding it: the page's stream is refused (503), and the
// page waits by polls at the server's pace, through to its hold.
func TestWaitPageFallsBackToPolls(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t)
	srv := testserver.Start(t, testdb.New(t), "--max-streams", "1")
	c := testserver.NewClient()
	// Opened by hand once the page has polled twice (a sale opening at a
	// set time would leave the page as many polls as a loaded machine let
	// it make before then): with no opening time, the server paces the
	// waiters near the front at about a second.
	saleID := c.CreateSale(t, srv.URL, `{"sku":"sku_polls","initialStock":3,"perCustomerLimit":1,`+
		`"admission":"waiting_room","fairness":"arrival_order","confirmation":"customer"}`)

	// The other waiter: first in line, holding the instance's one stream
	// until its turn.
	other := testserver.Token(t, "stream-holder")
	ticket, err := c.To(srv.URL).Ticket(context.Background(), other, saleID, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ticket.Status, "%s", ticket.Body)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
		srv.URL+"/sales/"+saleID+"/status/stream?"+url.Values{"token": {ticket.Value.Token}}.Encode(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+other)
	held, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { held.Body.Close() })
	require.Equal(t, http.StatusOK, held.StatusCode)

	openRoom(t, b, srv.URL, saleID, testserver.Token(t, "poll-customer"))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, polls := streamsAndPolls(roomFetches(b)); polls >= 2 {
			break
		}
		if time.Now().After(deadline) {
			b.fail("the page made fewer than 2 status polls in a minute while waiting: %+v", roomFetches(b))
		}
	}
	r, err := c.To(srv.URL).OpenSale(context.Background(), testserver.AdminToken, saleID)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	room := reserved(t, b)
	streams, polls := streamsAndPolls(room)
	if len(streams) != 1 || streams[0].Status != http.StatusServiceUnavailable {
		b.fail("want one stream, refused 503: %+v", room)
	}
	if polls < 2 {
		b.fail("%d status polls after the refused stream: the page did not fall back to polls (%+v)", polls, room)
	}
	checkPolling(b) // at the server's pace
	t.Logf("waitpage: stream refused, %d polls from ticket to turn", polls)
}
