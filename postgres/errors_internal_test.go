package postgres

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
)

// TestLinkClosedMidStatementIsUnavailable is the fault harness's finding
// under pg-restart-immediate and reset (internal/testkit/chaos): a connection that
// the database's side closes while a statement is under way (a crashed
// server, a proxy or load balancer going away) ends in io.EOF, which was
// not read as "unreachable", so a confirm answered 500 internal instead of
// 503 sale_paused_fail_closed with Retry-After: a client that does not retry
// a 500 never learns whether its order exists. The link here is a toxiproxy
// proxy that closes the link mid-statement.
func TestLinkClosedMidStatementIsUnavailable(t *testing.T) {
	ctx := context.Background()
	_, dbURL := testdb.NewPool(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(server, "postgres", "127.0.0.1:0", u.Host)
	require.NoError(t, proxy.Start())
	t.Cleanup(proxy.Stop)
	u.Host = proxy.Listen
	conn, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })

	_, err = conn.Exec(ctx, "SELECT 1")
	require.NoError(t, err)
	// The proxy closes the link (a FIN, no error message) when the answer
	// comes, as a server that crashed or a proxy that died would.
	_, err = proxy.Toxics.AddToxicJson(strings.NewReader(`{"type":"limit_data","stream":"downstream","attributes":{"bytes":1}}`))
	require.NoError(t, err)
	var slept string
	err = conn.QueryRow(ctx, "SELECT pg_sleep(0.2)::text").Scan(&slept)
	require.Error(t, err)
	require.ErrorIs(t, translate(err), flashline.ErrUnavailable, "%v", err)
}

// TestDeadlinePassedBeforeSendingIsOverload is CI's finding under a starved
// machine (TestOverloadSheds): a request whose deadline ran out while it
// waited for its turn reached pgx with its context already done, and pgx's
// error for that is "safe to retry", which unreachable read as an outage,
// so a flood was answered 503 sale_paused_fail_closed (the sale paused)
// instead of 503 overloaded. A deadline that ran out is overload wherever it
// runs out.
func TestDeadlinePassedBeforeSendingIsOverload(t *testing.T) {
	_, dbURL := testdb.NewPool(t)
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })

	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = conn.Exec(ctx, "SELECT 1")
	require.Error(t, err)
	require.ErrorIs(t, translate(err), flashline.ErrOverloaded, "%v", err)
	require.NotErrorIs(t, translate(err), flashline.ErrUnavailable, "%v", err)
}
