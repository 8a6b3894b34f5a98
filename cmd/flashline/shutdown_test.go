package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/internal/testserver"
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
