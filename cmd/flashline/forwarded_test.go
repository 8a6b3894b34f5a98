package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// serve bounds the requests in flight of one client address behind its
// trusted proxies (loopback by default) with --max-conns-per-addr, by the
// address the proxy forwards in X-Forwarded-For: a third status stream
// of one forwarded address is refused 429 rate_limited while another
// address is served. Before, a trusted proxy's requests were not bounded.
func TestServeBoundsForwardedAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flashline serve process: not in -short")
	}
	t.Parallel()
	srv := testserver.Start(t, testdb.New(t), "--max-conns-per-addr", "2")
	c := testserver.NewClient()
	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sale := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_forwarded","initialStock":1,"admission":"waiting_room","opensAt":%q}`,
		opensAt.Format(time.RFC3339)))
	jwt := testserver.Token(t, "forwarded")
	ticket := edgeTicket(t, c, srv.URL, sale, jwt, 5*time.Second)

	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	// stream opens a status stream as a proxy on loopback would pass it on
	// for forwarded; one answered 200 stays open until the test ends.
	stream := func(forwarded string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/sales/"+sale+"/status/stream?token="+ticket, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+jwt)
		req.Header.Set("X-Forwarded-For", forwarded)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		if resp.StatusCode == http.StatusOK {
			t.Cleanup(func() { cancel(); resp.Body.Close() })
			return resp.StatusCode, ""
		}
		defer cancel()
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	for range 2 {
		status, body := stream("203.0.113.7")
		require.Equal(t, http.StatusOK, status, body)
	}
	status, body := stream("203.0.113.7")
	require.Equal(t, http.StatusTooManyRequests, status, body)
	require.JSONEq(t, `{"error":{"code":"rate_limited","message":"this address has too many requests in flight; wait for their answers"}}`, body)
	status, body = stream("203.0.113.8")
	require.Equal(t, http.StatusOK, status, body)
}
