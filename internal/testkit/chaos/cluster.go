package chaos

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/flashline/flashline/internal/devdb"
	"github.com/flashline/flashline/internal/testkit/testredis"
)

// Upstreams are the services the instances reach through a proxy each, by
// name: PostgreSQL always, and in the gated runs (Fault.Gate) the Redis of
// the gate (its URL in FLASHLINE_REDIS_URL), with faults of its own.
var Upstreams = []string{"postgres", "redis"}

// Cluster is a PostgreSQL cluster of the harness's own, in a temporary
// folder on a free port, so that restarting it touches nothing other tests
// use, and the toxiproxy server the instances' proxies belong to.
type Cluster struct {
	opts devdb.Options
	dir  string
	// URL is the cluster's "flashline" database, direct (no proxy): the
	// harness's own checking connections use it.
	URL  string
	port string

	toxi *toxiproxy.ApiServer

	t     testing.TB
	redis *testredis.Server // started by the first gated run
}

// MaxConnections is the cluster's max_connections: three instances of 14
// connections (serve's default budget) and a migration's, and the harness's
// checks, with room to spare; small enough that the
// connection-exhaustion fault can take every slot.
const MaxConnections = 120

// StartCluster initialises and starts the harness's cluster (stopped and
// removed when the test ends) with track_commit_timestamp on: the checker
// times the sweeper's expirations by their commit.
func StartCluster(t testing.TB, log io.Writer) *Cluster {
	t.Helper()
	// Under /var/tmp, which the postgres OS user can enter when we are root
	// (a test's TempDir is not).
	dir, err := os.MkdirTemp("/var/tmp", "flashline-chaos-")
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	c := &Cluster{t: t, dir: dir, opts: devdb.Options{Dir: dir, MaxConnections: MaxConnections, Log: log}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := devdb.Down(ctx, c.opts); err != nil {
			t.Errorf("chaos: stopping the cluster: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u, err := devdb.Up(ctx, c.opts)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET track_commit_timestamp = on")
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if err := devdb.Stop(ctx, c.opts, "fast"); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if u, err = devdb.Up(ctx, c.opts); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	c.URL = u
	pu, _ := url.Parse(u)
	c.port = pu.Port()

	// Toxics log through zerolog's global logger, at trace level, once per
	// interrupted connection: thousands of lines in a test's output.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	c.toxi = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	return c
}

// Addr is the cluster's address, host:port.
func (c *Cluster) Addr() string { return "127.0.0.1:" + c.port }

// Redis is the gate's redis-server, a private one on a loopback port
// (internal/testkit/testredis: no persistence, so a restart comes back empty),
// started the first time a gated run asks and stopped when the test ends.
func (c *Cluster) Redis() *testredis.Server {
	c.t.Helper()
	if c.redis == nil {
		c.redis = testredis.Start(c.t)
	}
	return c.redis
}

// RedisAddr is the gate's Redis address, host:port.
func (c *Cluster) RedisAddr() string {
	u, err := url.Parse(c.Redis().URL)
	if err != nil {
		panic(err)
	}
	return u.Host
}

// Restart stops the cluster with pg_ctl's mode ("fast": sessions are
// terminated and it shuts down cleanly; "immediate": a crash, recovered from
// the WAL at the next start), leaves it down for down, and starts it again on
// the same port.
func (c *Cluster) Restart(ctx context.Context, mode string, down time.Duration) error {
	if err := devdb.Stop(ctx, c.opts, mode); err != nil {
		return err
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
	}
	u, err := devdb.Up(context.WithoutCancel(ctx), c.opts)
	if err != nil {
		return err
	}
	if u != c.URL {
		return fmt.Errorf("chaos: the cluster came back on %s, not %s", u, c.URL)
	}
	return nil
}

// Database creates a database for one run and returns its direct URL.
func (c *Cluster) Database(ctx context.Context, name string) (string, error) {
	if err := createDatabase(ctx, c.URL, name); err != nil {
		return "", err
	}
	return withDatabase(c.URL, name), nil
}

// Proxy starts a toxiproxy proxy on a loopback port chosen by the OS in
// front of upstream (host:port).
func (c *Cluster) Proxy(name, upstream string) (*toxiproxy.Proxy, error) {
	p := toxiproxy.NewProxy(c.toxi, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Toxic adds a toxic to p: typ is toxiproxy's ("latency", "timeout",
// "bandwidth", "reset_peer", ...), stream "upstream" or "downstream",
// attributes its JSON attributes.
func Toxic(p *toxiproxy.Proxy, name, typ, stream string, attributes string) error {
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attributes)
	_, err := p.Toxics.AddToxicJson(strings.NewReader(body))
	return err
}

// ClearToxics removes every toxic of p.
func ClearToxics(p *toxiproxy.Proxy) {
	p.Toxics.ResetToxics(context.Background())
}

func withDatabase(base, db string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

// viaProxy is the URL of database db reached through the proxy at addr.
func viaProxy(direct, addr string) string {
	u, err := url.Parse(direct)
	if err != nil {
		panic(err)
	}
	u.Host = addr
	return u.String()
}
