package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// floodSockets is how many silent connections the flood opens: as many as
// serve's --max-conns, by default.
const floodSockets = 10000

// TestConnectionFloodFromOneAddress: 10,000 silent connections from
// 127.0.0.2, held open, do not keep a buyer on 127.0.0.1 from taking a
// waiting-room ticket and reserving, against a serve with its default
// limits (the per-address bound resets all but 256 of them at accept), and
// against one without the per-address bound (--max-conns-per-addr 0: the
// flood takes every slot, and the first-byte wait, shortened to a second on
// a full server, lets the oldest go for the buyer). Before, they took every
// one of --max-conns' 10,000 slots for the minute of their first-byte wait,
// and the buyer's first request timed out in the backlog (its client's 30
// s): the first case fails so. The second one's buyer would also get
// through before if opening the flood took more than half of that minute
// (on a loaded machine it can: the full server stops accepting and the
// flood's connects wait in a full backlog), so the wait's shortening is
// proven by TestListenShortensFirstByteWaitWhenFull. The buyer's time with
// the flood and without it is logged: docs/measured.md has it.
func TestConnectionFloodFromOneAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes and opens 10,000 sockets: not in -short")
	}
	raiseOpenFiles(t, floodSockets+1000)
	dbURL := testdb.New(t)
	t.Run("per-address bound", func(t *testing.T) {
		_, refused := floodAndBuy(t, dbURL, "sku_flood_bound")
		require.Positive(t, refused, "the flood met the per-address bound")
	})
	t.Run("no per-address bound", func(t *testing.T) {
		held, _ := floodAndBuy(t, dbURL, "sku_flood_unbound", "--max-conns-per-addr", "0")
		require.Positive(t, held)
	})
}

// floodAndBuy starts serve with flags, times a buyer alone, opens
// floodSockets silent connections from 127.0.0.2, times a buyer beside
// them, and returns the connections the server held then and the flood's it
// had reset at accept.
func floodAndBuy(t *testing.T, dbURL, sku string, flags ...string) (held, refused float64) {
	srv := testserver.StartPlain(t, dbURL, append([]string{"--no-workers"}, flags...)...)
	admin := testserver.NewClient()
	ctx := context.Background()
	sale := admin.CreateSale(t, srv.URL, `{"sku":"`+sku+`","initialStock":10,"admission":"waiting_room","fairness":"arrival_order","confirmation":"customer"}`)
	r, err := admin.To(srv.URL).OpenSale(ctx, testserver.AdminToken, sale)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// buy takes a ticket, asks until admitted and reserves, on connections
	// of its own, and says how long that took.
	buy := func(customer string) time.Duration {
		c := testserver.NewClient()
		defer c.HTTP.CloseIdleConnections()
		jwt := testserver.Token(t, customer)
		start := time.Now()
		ticket := getTicket(t, c, srv.URL, sale, jwt)
		st := getStatus(t, c, srv.URL, sale, jwt, url.QueryEscape(ticket))
		for st.State != "admitted" {
			require.Equal(t, "waiting", st.State, "%+v", st)
			require.Less(t, time.Since(start), 30*time.Second, "never admitted")
			time.Sleep(20 * time.Millisecond) // the page's poll, quicker
			st = getStatus(t, c, srv.URL, sale, jwt, url.QueryEscape(ticket))
		}
		res, err := c.Do(ctx, http.MethodPost, srv.URL+"/sales/"+sale+"/reservations", jwt, `{"quantity":1}`,
			"Idempotency-Key", customer, "X-Admission-Token", st.AdmissionToken)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		return time.Since(start)
	}
	buy(sku + "-warm-up") // the sale cache and the pools warm, as in a sale under way
	alone := buy(sku + "-alone")

	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	// The flood's sockets stay open on its side until the test ends: those
	// the server took wait for their first byte (a minute), the rest it
	// reset at accept, some so soon that their connect saw it.
	flood, resetAtConnect := openSilent(t, "127.0.0.2", u.Host, floodSockets)
	flooded := buy(sku + "-flooded")
	held = metric(t, admin, srv.URL, "flashline_http_connections_open")
	refused = metric(t, admin, srv.URL, `flashline_http_connections_closed_total{reason="per_address"}`)
	t.Logf("serve %s: buyer (ticket, admission, reservation): alone %s, beside %d silent sockets from 127.0.0.2 %s (x%.2f); "+
		"the flood's connects: %d open on its side, %d reset before connect returned; the server held %.0f connections and reset %.0f at accept",
		strings.Join(append([]string{"--no-workers"}, flags...), " "), alone.Round(time.Millisecond), floodSockets, flooded.Round(time.Millisecond), flooded.Seconds()/alone.Seconds(),
		len(flood), resetAtConnect, held, refused)
	return held, refused
}

// raiseOpenFiles raises this process's limit on open files to at least
// need (serve's is its own: Go raises it to the hard limit at start), or
// skips the test when the hard limit is lower.
func raiseOpenFiles(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur >= need {
		return
	}
	if lim.Max < need {
		t.Skipf("needs %d open files and RLIMIT_NOFILE's hard limit is %d: raise it (ulimit -Hn) to run this test", need, lim.Max)
	}
	lim.Cur = lim.Max
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
}

// openSilent opens n connections to addr from the address from and sends
// nothing on them; they are closed when the test ends. A connection the
// server resets so soon that the reset ends the dial (on loopback, before
// connect returns) is counted in reset and not kept.
func openSilent(t *testing.T, from, addr string, n int) (conns []net.Conn, reset int) {
	t.Helper()
	conns = make([]net.Conn, n)
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
	next := make(chan int)
	errs := make(chan error, n)
	var resets atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				c, err := d.Dial("tcp", addr)
				if errors.Is(err, syscall.ECONNRESET) {
					resets.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					continue
				}
				conns[i] = c
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a flood connection")
	}
	opened := conns[:0]
	for _, c := range conns {
		if c != nil {
			opened = append(opened, c)
		}
	}
	return opened, int(resets.Load())
}
