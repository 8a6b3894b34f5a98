package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline/internal/devdb"
	"github.com/flashline/flashline/migrations"
)

// BaseURL is the URL of the server tests use (its database is only used to
// create others).
func BaseURL(t testing.TB) string {
	t.Helper()
	for _, v := range []string{"FLASHLINE_TEST_DATABASE_URL", "DATABASE_URL"} {
		if u := os.Getenv(v); u != "" {
			return u
		}
	}
	if root, err := RepoRoot(); err == nil {
		if u, ok := devdb.URL(filepath.Join(root, ".devdb")); ok {
			return u
		}
	}
	t.Fatal("testdb: no database: set FLASHLINE_TEST_DATABASE_URL, or run the tests with 'make test' (it starts a development PostgreSQL)")
	return ""
}

// RepoRoot is the folder holding go.mod, found from the working directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// template makes sure a migrated template database exists on the server and
// returns its name. Several test processes (one per package) may race here; an
// advisory lock on the server serialises them.
func template(ctx context.Context, base string) (string, error) {
	templateOnce.Do(func() {
		templateName, templateErr = makeTemplate(ctx, base)
	})
	return templateName, templateErr
}

func makeTemplate(ctx context.Context, base string) (string, error) {
	fp, err := migrations.Fingerprint()
	if err != nil {
		return "", err
	}
	name := "flashline_tmpl_" + fp
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("testdb: connect to %s: %w", base, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7461736864620001)"); err != nil {
		return "", err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7461736864620001)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// A half-made template from an interrupted run is dropped and remade.
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(base, name))
	if err != nil {
		return "", err
	}
	err = migrations.Up(ctx, pool)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("testdb: migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", err
	}
	return name, nil
}

func withDatabase(base, db string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("testdb: bad URL %q: %v", base, err))
	}
	u.Path = "/" + db
	return u.String()
}

// New creates a fresh, migrated database for this test, dropped when the test
// ends, and returns its URL.
func New(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := BaseURL(t)
	tmpl, err := template(ctx, base)
	if err != nil {
		t.Fatalf("testdb: template: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "flashline_test_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testdb: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("testdb: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("testdb: drop %s: %v", name, err)
		}
	})
	return withDatabase(base, name)
}

// NewPool is New plus a pool on the new database, closed when the test ends.
func NewPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := New(t)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, u
}
