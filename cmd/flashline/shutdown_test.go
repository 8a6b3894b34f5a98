package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestShutdownDrainsInFlight: SIGTERM while reservations are in flight (held
// up on the stock row by a transaction of the test's own) lets every one of
// them finish and answer, then the process exits 0.
func TestShutdownDrainsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--no-workers")
	c := testserver.NewClient()
	sale := c.CreateSale(t, srv.URL, `{"sku":"sku_drain","initialStock":100,"perCustomerLimit":1}`)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT quantity FROM stock WHERE sale_id = $1 FOR UPDATE`, sale)
	require.NoError(t, err)

	const n = 10
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := c.Reserve(ctx, srv.URL, sale, testserver.Token(t, fmt.Sprintf("d%d", i)), "k", 1)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			statuses[i] = r.Status
		})
	}
	time.Sleep(time.Second) // all ten are waiting on the row lock

	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(t) }()
	time.Sleep(500 * time.Millisecond) // the server is draining
	require.NoError(t, tx.Rollback(ctx))
	wg.Wait()
	require.NoError(t, <-stopped, "flashline serve exits 0 after draining")
	for i, st := range statuses {
		require.Equal(t, 201, st, "request %d", i)
	}
}

// TestStopSignalAlwaysStops: serve ends within its drain deadline after
// SIGTERM whatever the database is doing: still starting against a database
// that never answers, or serving while every connection to it has stalled
// mid-request (a partition: nothing refused, nothing answered). A drain that
// cannot finish gives up, says what it abandoned, and exits non-zero.
// Orchestrators send SIGTERM, then kill.
func TestStopSignalAlwaysStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	const drain = 2 * time.Second
	// The deadline, and room for a loaded machine to end a process.
	const limit = drain + 8*time.Second

	t.Run("WhileStarting", func(t *testing.T) {
		t.Parallel()
		// A database that takes connections and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		connected := make(chan struct{}, 1)
		var held []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
				select {
				case connected <- struct{}{}:
				default:
				}
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				c.Close()
			}
		})
		srv := testserver.Spawn(t, "postgres://postgres@"+ln.Addr().String()+"/flashline?sslmode=disable&connect_timeout=60",
			"--shutdown-timeout", drain.String())
		select {
		case <-connected: // serve waits for the database's answer
		case <-time.After(time.Minute):
			t.Fatalf("serve never connected\n%s", srv.Logs())
		}
		took, err := srv.Terminate(t, limit)
		t.Logf("stopped %v after SIGTERM while starting", took.Round(time.Millisecond))
		require.NoError(t, err, "a stop signal while starting is a clean stop\n%s", srv.Logs())
		require.Contains(t, srv.Logs(), "stopped while starting")
	})

	t.Run("DatabaseStalled", func(t *testing.T) {
		t.Parallel()
		dbURL := testdb.New(t)
		u, err := url.Parse(dbURL)
		require.NoError(t, err)
		server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
		proxy := toxiproxy.NewProxy(server, "postgres", "127.0.0.1:0", u.Host)
		require.NoError(t, proxy.Start())
		t.Cleanup(proxy.Stop)
		u.Host = proxy.Listen
		srv := testserver.Start(t, u.String(), "--shutdown-timeout", drain.String())
		c := testserver.NewClient()
		sale := c.CreateSale(t, srv.URL, `{"sku":"sku_stall","initialStock":10,"perCustomerLimit":1,"confirmation":"customer"}`)
		tok := testserver.Token(t, "stalled")
		r, err := c.Reserve(context.Background(), srv.URL, sale, tok, "k", 1)
		require.NoError(t, err)
		require.Equal(t, 201, r.Status, "%s", r.Body)
		id := strings.Split(strings.Split(string(r.Body), `"reservationId":"`)[1], `"`)[0]

		// Every byte either way is held from now on.
		for _, stream := range []string{"upstream", "downstream"} {
			_, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"type":"timeout","stream":"` + stream + `","attributes":{"timeout":0}}`))
			require.NoError(t, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		for range 3 {
			go func() { _, _ = c.Do(ctx, http.MethodPost, srv.URL+"/reservations/"+id+"/cancel", tok, "") }()
		}
		time.Sleep(500 * time.Millisecond) // the cancels wait on the stalled database
		took, err := srv.Terminate(t, limit)
		t.Logf("stopped %v after SIGTERM with the database stalled: %v", took.Round(time.Millisecond), err)
		require.Error(t, err, "a drain that could not finish exits non-zero")
		require.Contains(t, srv.Logs(), "abandoned")
	})
}

// TestShutdownEndsStatusStreams: SIGTERM with a thousand waiting clients'
// status streams open, on an edge and on the instance behind it: every
// stream is sent its instruction to reconnect (an "event: reconnect" with a
// "retry:" field, the last thing on it) and then closed, and the process
// exits 0 before its drain deadline instead of holding the drain to it with
// the streams and abandoning the HTTP server (exit 1).
func TestShutdownEndsStatusStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	const streams = 1000
	const drain = 15 * time.Second
	// The deadline, and room for a loaded machine to end a process.
	const limit = drain + 15*time.Second
	dbURL := testdb.New(t)
	// One customer's ticket on every stream: the per-customer cap
	// (--customer-in-flight) is lifted, as in TestStatusStreamMemory. Built
	// without the race detector, which would make a thousand streams the
	// work of a busy machine's two cores.
	origin := testserver.StartPlain(t, dbURL, "--role", "origin", "--no-workers", "--customer-in-flight", "0",
		"--shutdown-timeout", drain.String())
	edge := testserver.StartEdgePlain(t, []string{origin.URL}, "--customer-in-flight", "0", "--shutdown-timeout", drain.String())
	c := testserver.NewClient()
	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sale := c.CreateSale(t, origin.URL, fmt.Sprintf(`{"sku":"sku_stream_stop","initialStock":10,"admission":"waiting_room","opensAt":%q}`,
		opensAt.Format(time.RFC3339)))
	jwt := testserver.Token(t, "streamer")
	ticket := edgeTicket(t, c, edge.URL, sale, jwt, 10*time.Second)

	// The edge first: it pulls from the origin.
	for _, srv := range []*testserver.Server{edge, origin} {
		ended := openStatusStreams(t, srv.URL+"/sales/"+sale+"/status/stream?token="+ticket, jwt, streams)
		took, err := srv.Terminate(t, limit)
		t.Logf("%s stopped %v after SIGTERM with %d status streams open", srv.URL, took.Round(time.Millisecond), streams)
		require.NoError(t, err, "serve exits 0 with status streams open\n%s", lastLines(srv.Logs(), 20))
		require.Less(t, took, drain, "serve stops before its drain deadline")
		for range streams {
			require.NoError(t, <-ended)
		}
	}
}

// openStatusStreams opens n status streams at url, each through a
// connection of its own, and returns once every one has had its first
// event. Each then says on ended how it ended: nil if the server closed it
// right after its instruction to reconnect (a complete "event: reconnect"
// with a "retry:" of milliseconds, nothing after it).
func openStatusStreams(t *testing.T, url, jwt string, n int) <-chan error {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
	t.Cleanup(hc.CloseIdleConnections)
	opened := make(chan error, n)
	ended := make(chan error, n)
	for range n {
		go func() {
			var resp *http.Response
			var err error
			// A stream refused (503: a busy machine's edge between two
			// pulls of its watermarks) is asked again, as the page would.
			for try := 0; ; try++ {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+jwt)
				if resp, err = hc.Do(req); err == nil && resp.StatusCode != http.StatusOK {
					resp.Body.Close()
					err = fmt.Errorf("status %d", resp.StatusCode)
					if resp.StatusCode == http.StatusServiceUnavailable && try < 20 {
						time.Sleep(250 * time.Millisecond)
						continue
					}
				}
				break
			}
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			body := bufio.NewReader(resp.Body)
			var event string
			var retry, events int
			reconnect := false // the last event was the instruction to reconnect
			for {
				line, err := body.ReadString('\n')
				if err != nil {
					switch {
					case events == 0:
						opened <- fmt.Errorf("no first event: %w", err)
					case !errors.Is(err, io.EOF):
						ended <- fmt.Errorf("the stream broke: %w", err)
					case line != "" || !reconnect:
						ended <- fmt.Errorf("the stream ended without the instruction to reconnect (after %d events; last %q, then %q)", events, event, line)
					default:
						ended <- nil
					}
					return
				}
				line = strings.TrimSuffix(line, "\n")
				switch {
				case line == "" && event != "":
					if events++; events == 1 {
						opened <- nil
					}
					reconnect = event == "reconnect" && retry > 0
					event, retry = "", 0
				case strings.HasPrefix(line, "event: "):
					event = strings.TrimPrefix(line, "event: ")
				case strings.HasPrefix(line, "retry: "):
					retry, _ = strconv.Atoi(strings.TrimPrefix(line, "retry: "))
				case strings.HasPrefix(line, "data: "):
					reconnect = false
				}
			}
		}()
	}
	for range n {
		require.NoError(t, <-opened)
	}
	return ended
}

// lastLines is the last n lines of logs.
func lastLines(logs string, n int) string {
	lines := strings.SplitAfter(logs, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
