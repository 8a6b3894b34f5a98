package handlers

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitroom/edge"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// The edge's proxy sends each customer's requests to one origin, its
// customer's (edge.CustomerOrigin), and the customers to every origin; the
// requests of nobody in turn. An origin a request could not reach is
// marked down and tried last, and is used again once a pull reaches it.
// The origins here answer {} to everything, naming themselves in a header.
func TestOriginProxySpreads(t *testing.T) {
	t.Parallel()
	origin := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("X-Test-Origin", name)
			_, _ = io.WriteString(w, "{}")
		})
	}
	a, b := httptest.NewServer(origin("0")), httptest.NewServer(origin("1"))
	t.Cleanup(b.Close)
	urls := []string{a.URL, b.URL}
	client, err := edge.NewClient(roomtoken.DeriveKeyring("a test's secret, long enough"), edge.Options{Origins: urls})
	require.NoError(t, err)
	p := newOriginProxy(urls, client, 0, slog.New(slog.DiscardHandler))
	do := func(method, authorization string) string {
		t.Helper()
		r := httptest.NewRequest(method, "/sales/sale_x/reservations", strings.NewReader(`{"quantity":1}`))
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		return w.Header().Get("X-Test-Origin")
	}

	at := map[string]int{}
	var first string // the first customer of origin 0
	for i := range 64 {
		key := "Bearer customer-" + strconv.Itoa(i)
		o := do(http.MethodGet, key)
		require.Equal(t, strconv.Itoa(edge.CustomerOrigin(key, 2)), o, "customer %d at its origin", i)
		require.Equal(t, o, do(http.MethodPost, key), "customer %d sticks to its origin", i)
		at[o]++
		if o == "0" && first == "" {
			first = key
		}
	}
	require.Len(t, at, 2, "the customers at both origins: %v", at)
	require.NotEqual(t, do(http.MethodGet, ""), do(http.MethodGet, ""), "nobody's requests in turn")

	// Origin 0 stopped: its customer's GET goes on to origin 1, and marks
	// it down; a POST without a key is then sent to origin 1 first.
	addr := a.Listener.Addr().String()
	a.Close()
	require.False(t, client.OriginDown(0))
	require.Equal(t, "1", do(http.MethodGet, first))
	require.True(t, client.OriginDown(0), "marked down")
	require.Equal(t, "1", do(http.MethodPost, first), "the origin marked down tried last")

	// Back on its address: still down until a pull reaches it (the
	// document it answers is none, but it answered), then its customer's
	// again.
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	back := httptest.NewUnstartedServer(origin("0"))
	back.Listener.Close()
	back.Listener = ln
	back.Start()
	t.Cleanup(back.Close)
	require.Equal(t, "1", do(http.MethodGet, first))
	require.Error(t, client.Sync(context.Background()), "no document from origins that answer {}")
	require.False(t, client.OriginDown(0), "up again: a pull reached it")
	require.Equal(t, "0", do(http.MethodGet, first))
}
