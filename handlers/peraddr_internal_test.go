package handlers

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

var proxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// The client of a request is the right-most address of X-Forwarded-For that
// is not a trusted proxy's, when the request came from a trusted proxy;
// otherwise the header is nobody's word and the request is its peer's.
func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxy := netip.MustParseAddr("10.0.0.1")
	for _, c := range []struct {
		name      string
		peer      netip.Addr
		forwarded []string
		want      string // "": no forwarded client
	}{
		{"one hop", proxy, []string{"203.0.113.7"}, "203.0.113.7"},
		{"the client's own prefix is not believed", proxy, []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"proxies of the chain are skipped", proxy, []string{"198.51.100.1, 203.0.113.7, 10.1.2.3,10.4.5.6"}, "203.0.113.7"},
		{"across header lines, the last last", proxy, []string{"198.51.100.1", "203.0.113.7", "10.1.2.3"}, "203.0.113.7"},
		{"IPv6 and a mapped IPv4", netip.MustParseAddr("::1"), []string{"2001:db8::1, ::ffff:203.0.113.7"}, "203.0.113.7"},
		{"IPv6", netip.MustParseAddr("::1"), []string{"2001:db8::1"}, "2001:db8::1"},
		{"an untrusted peer's header says nothing", netip.MustParseAddr("203.0.113.9"), []string{"198.51.100.1"}, ""},
		{"no header", proxy, nil, ""},
		{"only proxies", proxy, []string{"10.9.9.9, 10.8.8.8"}, ""},
		{"not an address before any client", proxy, []string{"203.0.113.7, junk, 10.1.2.3"}, ""},
		{"not an address left of the client is the client's", proxy, []string{"junk, 203.0.113.7"}, "203.0.113.7"},
		{"an address with a port is not an address", proxy, []string{"203.0.113.7:4711"}, ""},
		{"empty", proxy, []string{""}, ""},
	} {
		got, ok := ClientAddr(c.peer, c.forwarded, proxies)
		if c.want == "" {
			require.False(t, ok, "%s: %v", c.name, got)
			continue
		}
		require.True(t, ok, c.name)
		require.Equal(t, c.want, got.String(), c.name)
	}
	require.Equal(t, "2001:db8:0:1::/64", ClientKey(netip.MustParseAddr("2001:db8:0:1:aa::1")).String())
	require.Equal(t, "203.0.113.7/32", ClientKey(netip.MustParseAddr("::ffff:203.0.113.7")).String())
}

// forwardedRequest is a request from proxy for client.
func forwardedRequest(proxy, client string) *http.Request {
	r, err := http.NewRequest(http.MethodGet, "/sales/s/status", nil)
	if err != nil {
		panic(err)
	}
	r.RemoteAddr = proxy + ":4711"
	r.Header["X-Forwarded-For"] = []string{client}
	return r
}

// One forwarded address has at most max requests counted at once, another
// address its own max; a request answered gives its place back, and an
// address with none in flight is forgotten.
func TestAddrBoundLimitAndRelease(t *testing.T) {
	t.Parallel()
	require.Nil(t, newAddrBound(0, proxies), "0: no bound")
	require.Nil(t, newAddrBound(3, nil), "no proxy trusted: no bound")
	b := newAddrBound(3, proxies)
	key := func(r *http.Request) netip.Prefix {
		t.Helper()
		k, ok := b.keyOf(r)
		require.True(t, ok)
		return k
	}
	alice := key(forwardedRequest("10.0.0.1", "203.0.113.7"))
	require.Equal(t, alice, key(forwardedRequest("10.0.0.2", "198.51.100.1, 203.0.113.7")), "whichever proxy it came through")
	bob := key(forwardedRequest("10.0.0.1", "2001:db8::1"))
	require.Equal(t, bob, key(forwardedRequest("10.0.0.1", "2001:db8::2")), "an IPv6 address counts by its /64")
	_, ok := b.keyOf(forwardedRequest("203.0.113.9", "203.0.113.7"))
	require.False(t, ok, "a request not from a trusted proxy is not counted by its header")

	for range 3 {
		require.True(t, b.acquire(alice))
	}
	require.False(t, b.acquire(alice), "the fourth of one address is refused")
	require.True(t, b.acquire(bob), "another address is not")
	require.Equal(t, 2, b.tracked())
	b.release(alice)
	require.True(t, b.acquire(alice), "an answered request gives its place back")
	require.False(t, b.acquire(alice))
	for range 3 {
		b.release(alice)
	}
	b.release(bob)
	require.Zero(t, b.tracked(), "an address with nothing in flight is forgotten")
}

// A flood of distinct addresses, each request answered before the next few
// come, holds no more than the requests in flight: the counts never hold
// more addresses than requests, none once they are answered, and counting
// takes no allocation, so the maps do not grow with the addresses seen.
// Not parallel: testing.AllocsPerRun counts every goroutine's allocations.
func TestAddrBoundMemoryIsTheRequestsInFlight(t *testing.T) {
	b := newAddrBound(2, proxies)
	const inFlight = 64
	var window [inFlight]netip.Prefix
	n := 0
	flood := func(count int) {
		for range count {
			n++
			var a [16]byte
			a[0], a[1] = 0x20, 0x01
			a[4], a[5], a[6], a[7] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n) // a /64 each
			if n%2 == 0 {
				a = netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).As16()
			}
			k := ClientKey(netip.AddrFrom16(a))
			slot := &window[n%inFlight]
			if slot.IsValid() {
				b.release(*slot)
			}
			if !b.acquire(k) {
				panic("a new address refused")
			}
			*slot = k
		}
	}
	flood(inFlight)
	require.Equal(t, inFlight, b.tracked())
	allocs := testing.AllocsPerRun(20, func() { flood(10_000) })
	require.Zero(t, allocs, "200,000 distinct addresses, %d in flight at a time", inFlight)
	require.Equal(t, inFlight, b.tracked())
	for _, k := range window {
		b.release(k)
	}
	require.Zero(t, b.tracked())

	// And a forwarded request's whole count, header read to place given
	// back, allocates nothing either.
	r := forwardedRequest("10.0.0.1", "198.51.100.1, 203.0.113.7, 10.1.2.3")
	allocs = testing.AllocsPerRun(1000, func() {
		k, ok := b.keyOf(r)
		if !ok || !b.acquire(k) {
			panic("not counted")
		}
		b.release(k)
	})
	require.Zero(t, allocs)
	require.Zero(t, b.tracked())
}

// BenchmarkAddrBound is one forwarded request's count: its client read
// from X-Forwarded-For, counted, and given back, by parallel requests of
// distinct addresses.
func BenchmarkAddrBound(b *testing.B) {
	bound := newAddrBound(256, proxies)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rs := make([]*http.Request, 256)
		for i := range rs {
			rs[i] = forwardedRequest("10.0.0.1", "198.51.100."+strconv.Itoa(i))
		}
		i := 0
		for pb.Next() {
			k, ok := bound.keyOf(rs[i%len(rs)])
			if !ok || !bound.acquire(k) {
				panic("not counted")
			}
			bound.release(k)
			i++
		}
	})
}

// An edge's routes have no front door: boundPerAddr puts the same bound in
// front of them, with the same refusal.
func TestBoundPerAddrOfAnEdge(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		held <- struct{}{}
		<-release
		w.WriteHeader(http.StatusOK)
	})
	_, wrapped := boundPerAddr(next, nil).(*addrDoor)
	require.False(t, wrapped, "no bound: the routes alone")
	h := boundPerAddr(next, newAddrBound(1, proxies))
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, forwardedRequest("10.0.0.1", "203.0.113.7"))
		done <- rec.Code
	}()
	<-held
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, forwardedRequest("10.0.0.2", "203.0.113.7"))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.JSONEq(t, `{"error":{"code":"rate_limited","message":"this address has too many requests in flight; wait for their answers"}}`, rec.Body.String())
	require.Contains(t, []string{"1", "2"}, rec.Header().Get("Retry-After"))
	close(release)
	require.Equal(t, http.StatusOK, <-done)
	rec = httptest.NewRecorder()
	go func() { <-held }()
	h.ServeHTTP(rec, forwardedRequest("10.0.0.2", "203.0.113.7"))
	require.Equal(t, http.StatusOK, rec.Code, "the place was given back")
}
