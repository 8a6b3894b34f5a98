package main

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// dialFrom opens a connection to addr from the loopback address from
// (127.0.0.2: another machine, as the listener sees it).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedFrom opens a connection to addr from the address from and says
// whether the server closed it: a reset may come before connect returns.
func refusedFrom(t *testing.T, from, addr string) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	require.NoError(t, err)
	defer c.Close()
	return closedByServer(c)
}

// acceptAll accepts from ln until it is closed, handing out what it accepts.
func acceptAll(ln net.Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// pendingCount is how many connections wait for their first byte.
func pendingCount(fb *firstByteListener) int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return len(fb.pending)
}

// closedByServer reads c until the server closes it (true), or 30 s pass
// (false): a reset or an EOF, not the read's own deadline.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// A client address holds at most --max-conns-per-addr connections: past
// it, its new ones are reset at accept, while another address's, and a
// trusted proxy's however many, are served. Before the bound one address
// could hold every slot.
func TestListenBoundsConnectionsPerAddress(t *testing.T) {
	ln, _, err := listen(serveConfig{addr: "127.0.0.1:0", maxConns: 100, maxConnsPerAddr: 2,
		trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}})
	require.NoError(t, err)
	defer ln.Close()
	fb := ln.(*firstByteListener)
	accepted := acceptAll(ln)
	addr := ln.Addr().String()

	dialFrom(t, "127.0.0.2", addr)
	dialFrom(t, "127.0.0.2", addr)
	require.Eventually(t, func() bool { return pendingCount(fb) == 2 }, 30*time.Second, 10*time.Millisecond)
	require.True(t, refusedFrom(t, "127.0.0.2", addr), "the address's third connection is refused at once")
	require.Equal(t, 2, pendingCount(fb), "its first two still wait for their first byte")

	for range 5 {
		dialFrom(t, "127.0.0.3", addr)
	}
	require.Eventually(t, func() bool { return pendingCount(fb) == 7 }, 30*time.Second, 10*time.Millisecond,
		"a trusted proxy's connections are not bounded")

	buyer := dialFrom(t, "127.0.0.1", addr)
	_, err = buyer.Write([]byte("G"))
	require.NoError(t, err)
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("another address's connection was not accepted")
	}
	require.EqualValues(t, 1, fb.refused.Load())
}

// When every slot is taken by connections that sent nothing, the oldest of
// them are let go after fullFirstByteWait rather than the minute a new
// connection may wait on a server with room, and a buyer's connection in
// the backlog is accepted. Before, it waited the whole minute.
func TestListenShortensFirstByteWaitWhenFull(t *testing.T) {
	ln, _, err := listen(serveConfig{addr: "127.0.0.1:0", maxConns: 4})
	require.NoError(t, err)
	defer ln.Close()
	fb := ln.(*firstByteListener)
	accepted := acceptAll(ln)
	addr := ln.Addr().String()

	silent := make([]net.Conn, 4)
	for i := range silent {
		silent[i] = dialFrom(t, "127.0.0.2", addr)
		// One at a time, so that the first is the oldest.
		require.Eventually(t, func() bool { return pendingCount(fb) == i+1 }, 30*time.Second, 10*time.Millisecond)
	}
	buyer := dialFrom(t, "127.0.0.1", addr)
	_, err = buyer.Write([]byte("G"))
	require.NoError(t, err)
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("a full server of silent connections kept the buyer out")
	}
	require.True(t, closedByServer(silent[0]), "the oldest silent connection was let go")
	require.Positive(t, fb.expired.Load())
}

func TestFirstByteWait(t *testing.T) {
	limits := connLimits{max: 100, wait: 61 * time.Second, fullWait: time.Second}
	for open, want := range map[int]time.Duration{
		0: 61 * time.Second, 50: 61 * time.Second, 75: 31 * time.Second, 99: time.Second + 1200*time.Millisecond,
		100: time.Second, 101: time.Second,
	} {
		require.Equal(t, want, firstByteWait(open, limits), "%d of 100 taken", open)
	}
}

// When the server is full, the keep-alive connection idle longest is closed
// to let a new one in, and the others stay open. Before, the new one waited
// in the backlog until an idle one's minute was up.
func TestListenClosesIdleFirstWhenFull(t *testing.T) {
	ln, _, err := listen(serveConfig{addr: "127.0.0.1:0", maxConns: 3})
	require.NoError(t, err)
	fb := ln.(*firstByteListener)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	running := newParts(slog.New(slog.DiscardHandler))
	startHTTP(running, slog.New(slog.DiscardHandler), srv, ln, nil, prometheus.NewRegistry(), false)
	defer running.stopWithin(10 * time.Second)
	addr := ln.Addr().String()

	get := func(c net.Conn) {
		t.Helper()
		_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		require.Equal(t, 200, readStatusKeep(t, c))
	}
	idle := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			fb.mu.Lock()
			defer fb.mu.Unlock()
			return len(fb.idle) == n
		}, 30*time.Second, 10*time.Millisecond, "%d wait for their next request", n)
	}
	// One after the other: the server marks a connection idle after its
	// answer is written, so the first is idle before the second asks.
	first, second := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)
	get(first)
	idle(1)
	get(second)
	idle(2)

	buyer := dialFrom(t, "127.0.0.1", addr)
	_ = buyer.SetDeadline(time.Now().Add(30 * time.Second))
	get(buyer)
	require.True(t, closedByServer(first), "the connection idle longest was closed")
	get(second)
	require.EqualValues(t, 1, fb.evicted.Load())
}

// readStatusKeep reads one answer (its status line, headers and a body of
// Content-Length bytes) off c, leaving c ready for the next.
func readStatusKeep(t *testing.T, c net.Conn) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "/", nil)
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, "ok", strings.TrimSpace(string(body)))
	return res.StatusCode
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := parseTrustedProxies(" 10.0.0.0/8, 192.168.1.7 ,::1,2001:db8::/32 ")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("2001:db8::/32")}, got)
	got, err = parseTrustedProxies("none")
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = parseTrustedProxies("10.0.0.0/8,proxy.internal")
	require.ErrorContains(t, err, "proxy.internal")
}

// An IPv6 client counts by its /64 (one host is commonly given a whole
// one, and could otherwise take a new address for every connection), an
// IPv4 one by its address, written IPv4-mapped or not; a trusted proxy's
// address is not counted.
func TestConnectionAddressKey(t *testing.T) {
	l := &firstByteListener{limits: connLimits{perAddr: 1, trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	key := func(ip string) string {
		k, bounded := l.addrKey(&net.TCPAddr{IP: net.ParseIP(ip), Port: 1})
		if !bounded {
			return "unbounded"
		}
		return k.String()
	}
	require.Equal(t, "2001:db8:1:2::/64", key("2001:db8:1:2:aaaa::1"))
	require.Equal(t, key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:bbbb::7"))
	require.Equal(t, "192.0.2.7/32", key("192.0.2.7"))
	require.Equal(t, "192.0.2.7/32", key("::ffff:192.0.2.7"))
	require.Equal(t, "unbounded", key("10.1.2.3"))
	l.limits.perAddr = 0
	require.Equal(t, "unbounded", key("192.0.2.7"), "no bound set")
}
