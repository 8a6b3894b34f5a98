package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/waitroom"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address from (127.0.0.2: another machine, as the server sees it).
func clientFrom(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestInFlightPerForwardedAddress: behind a trusted proxy, one client
// address (the right-most of X-Forwarded-For not a proxy's) holds at most
// InFlightPerAddr requests at once, status streams for as long as they are
// open: one more is answered 429 rate_limited, while another forwarded
// address is still served, and a stream ended gives its place back. An
// untrusted peer's X-Forwarded-For counts for nothing: its requests are
// not the named address's (its own connections are the listener's to
// bound). Before, a trusted proxy's requests were not bounded at all.
func TestInFlightPerForwardedAddress(t *testing.T) {
	t.Parallel()
	const perAddr = 3
	s := newWaitroomServerWith(t, func(d *handlers.Deps) {
		d.InFlightPerAddr = perAddr
		d.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	sale := s.createSale(t, `{"sku":"sku_fwd","initialStock":1,"admission":"waiting_room"}`).SaleID
	requireSale(t, s.do(t, http.MethodPost, "/admin/sales/"+sale+"/open", adminAuth, ""), 200)
	// Held: nobody is let in, and every stream stays open.
	r := s.do(t, http.MethodPost, "/admin/sales/"+sale+"/queue/hold", adminAuth, `{"operator":"ops","reason":"test"}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	ivan := customer(t, "ivan")
	tk := s.ticket(t, sale, ivan, "")
	streamPath := "/sales/" + sale + "/status/stream?token=" + url.QueryEscape(tk.Token)
	pollPath := "/sales/" + sale + "/status?token=" + url.QueryEscape(tk.Token)

	proxy, stranger := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	t.Cleanup(proxy.CloseIdleConnections)
	t.Cleanup(stranger.CloseIdleConnections)
	// get asks path through c with X-Forwarded-For forwarded, as ivan
	// (getAs: as who): a stream answered 200 is held open (cancel ends it),
	// any other answer read whole.
	var getAs func(c *http.Client, who, path, forwarded string) (reply, context.CancelFunc)
	get := func(c *http.Client, path, forwarded string) (reply, context.CancelFunc) {
		t.Helper()
		return getAs(c, ivan, path, forwarded)
	}
	getAs = func(c *http.Client, who, path, forwarded string) (reply, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.api.BaseURL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", who)
		req.Header.Set("X-Forwarded-For", forwarded)
		resp, err := c.Do(req)
		require.NoError(t, err)
		if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "text/event-stream" {
			t.Cleanup(func() { cancel(); resp.Body.Close() })
			return reply{Status: resp.StatusCode, Header: resp.Header}, func() { cancel(); resp.Body.Close() }
		}
		defer cancel()
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return reply{Status: resp.StatusCode, Header: resp.Header, Body: body}, cancel
	}
	// Each stream is another waiter's: one customer keeps only two streams
	// for a sale open (a third ends the oldest, stream.go), and an address
	// a proxy forwards for is many customers'.
	waiters := 0
	requireStream := func(c *http.Client, forwarded string) context.CancelFunc {
		t.Helper()
		waiters++
		who := customer(t, fmt.Sprintf("waiter-%d", waiters))
		tk := s.ticket(t, sale, who, "")
		r, end := getAs(c, who, "/sales/"+sale+"/status/stream?token="+url.QueryEscape(tk.Token), forwarded)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return end
	}
	requireRefused := func(r reply) {
		t.Helper()
		requireError(t, r, http.StatusTooManyRequests, "rate_limited")
		require.Contains(t, string(r.Body), "this address has too many requests in flight")
		require.Contains(t, []string{"1", "2"}, r.Header.Get("Retry-After"))
		require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
	}

	// A stranger's header, naming the address, takes none of its places.
	for range perAddr + 1 {
		requireStream(stranger, "203.0.113.7")
	}
	var first context.CancelFunc
	for i := range perAddr {
		end := requireStream(proxy, "203.0.113.7")
		if i == 0 {
			first = end
		}
	}
	// What the client wrote left of the proxy's own entry changes nothing.
	r, _ = get(proxy, streamPath, "198.51.100.1, 203.0.113.7")
	requireRefused(r)
	r, _ = get(proxy, pollPath, "203.0.113.7")
	requireRefused(r)
	requireStream(proxy, "203.0.113.8")
	r, _ = get(proxy, pollPath, "203.0.113.8")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// A stream ended gives its place back once the server has seen it end.
	first()
	require.Eventually(t, func() bool {
		r, _ := get(proxy, streamPath, "203.0.113.7")
		return r.Status == http.StatusOK
	}, 30*time.Second, 10*time.Millisecond)
}

// newWaitroomServerWith is a server with a waiting room, its Deps tweaked.
func newWaitroomServerWith(t *testing.T, tweak func(*handlers.Deps)) *server {
	return startServer(t, &waitroom.Options{}, tweak)
}
