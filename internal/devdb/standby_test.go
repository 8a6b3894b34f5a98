package devdb

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A standby copied from a primary streams what the primary commits, refuses
// writes until it is promoted, and takes them after the primary crashed and
// it was promoted, with everything the primary had committed.
func TestStandbyPromote(t *testing.T) {
	t.Parallel()
	primary, _ := newDir(t)
	standby, _ := newDir(t)
	primaryURL, _ := up(t, primary)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	exec := func(u, sql string) error {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	count := func(u string) (n int, readOnly string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatalf("connect %s: %v", u, err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(ctx, "SELECT count(*), current_setting('transaction_read_only') FROM t").Scan(&n, &readOnly); err != nil {
			t.Fatalf("count: %v", err)
		}
		return n, readOnly
	}
	if err := exec(primaryURL, "CREATE TABLE t (n int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	standbyURL, err := Standby(ctx, standby, portOf(t, primaryURL))
	if err != nil {
		t.Fatalf("Standby: %v", err)
	}
	if standbyURL == primaryURL {
		t.Fatalf("the standby answers on the primary's URL %s", standbyURL)
	}
	if err := exec(primaryURL, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n, ro := count(standbyURL); n != 2 || ro != "on"; n, ro = count(standbyURL) {
		if time.Now().After(deadline) {
			t.Fatalf("the standby has %d rows (read-only %s); want 2 rows, read-only", n, ro)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := exec(standbyURL, "INSERT INTO t VALUES (3)"); err == nil {
		t.Fatal("the standby took a write before its promotion")
	}

	if err := Stop(ctx, primary, "immediate"); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := Promote(ctx, standby); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	if err := exec(standbyURL, "INSERT INTO t VALUES (3)"); err != nil {
		t.Fatalf("the promoted standby refused a write: %v", err)
	}
	if n, ro := count(standbyURL); n != 3 || ro != "off" {
		t.Fatalf("the promoted standby has %d rows (read-only %s); want 3, read-write", n, ro)
	}

	// Made a standby again, of the new primary: the old primary's data is
	// replaced by a copy of it.
	back, err := Standby(ctx, primary, portOf(t, standbyURL))
	if err != nil {
		t.Fatalf("Standby of the promoted one: %v", err)
	}
	if back != primaryURL {
		t.Logf("the old primary came back as a standby on %s, not %s (its port was taken)", back, primaryURL)
	}
	deadline = time.Now().Add(30 * time.Second)
	for n, ro := count(back); n != 3 || ro != "on"; n, ro = count(back) {
		if time.Now().After(deadline) {
			t.Fatalf("the rebuilt standby has %d rows (read-only %s); want 3 rows, read-only", n, ro)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// portOf is the port of a URL.
func portOf(t *testing.T, u string) int {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(pu.Port())
	if err != nil {
		t.Fatal(err)
	}
	return port
}
