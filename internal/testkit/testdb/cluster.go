package testdb

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline/internal/devdb"
)

// Cluster is a PostgreSQL cluster of a test's own (internal/devdb in a
// temporary folder, on a free loopback port), for tests whose subject is the
// server itself: its connection limit, its log.
type Cluster struct {
	// URL is its "flashline" database, empty, for serve to migrate.
	URL string
	dir string
}

// StartCluster starts a cluster with max_connections maxConns, stopped and
// removed when the test ends.
func StartCluster(t testing.TB, maxConns int) *Cluster {
	t.Helper()
	// Under /var/tmp, which the postgres OS user can enter when we are root
	// (a test's TempDir is not).
	dir, err := os.MkdirTemp("/var/tmp", "flashline-test-cluster-")
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	opts := devdb.Options{Dir: dir, MaxConnections: maxConns}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := devdb.Stop(ctx, opts, "immediate"); err != nil {
			t.Errorf("testdb: stopping the cluster in %s: %v", dir, err)
		}
		_ = os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u, err := devdb.Up(ctx, opts)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return &Cluster{URL: u, dir: dir}
}

// Pool is a small pool on the cluster's database for the test's own checks,
// closed when the test ends.
func (c *Cluster) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Log is the server's log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	return string(b)
}
