package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"

	"github.com/flashline/flashline/internal/devdb"
)

// The failover faults' database: a primary and a streaming standby of the
// harness's own (two internal/devdb clusters in temporary folders, each on a
// loopback port of its own), the standby copied from the primary with
// pg_basebackup -R and following it through a toxiproxy proxy (its
// replication link, which a fault can slow or cut). With Sync the primary
// acknowledges a commit only once the standby has flushed it
// (synchronous_standby_names = '*', synchronous_commit on, the default).
// The instances reach both through a multi-host URL with
// target_session_attrs=read-write, each host through a proxy of the
// instance's own, and find the primary by themselves.
//
// A failover stops the primary (immediate: a crash), clears
// synchronous_standby_names on the standby (a promoted standby must not wait
// for a standby of its own; it was copied with the primary's settings), and
// promotes it. Rebuild then makes the old primary a standby of the new one
// (a fresh copy, as Patroni's pg_basebackup fallback does when pg_rewind is
// not set up), synchronous again in a synchronous pair, so that the next
// failover goes back the other way.

// Pair is a primary and its streaming standby.
type Pair struct {
	Sync bool

	nodes [2]devdb.Options
	ports [2]int
	// repl[i] is the replication link to node i: the standby of node i
	// streams from it.
	repl    [2]*toxiproxy.Proxy
	primary int
	log     io.Writer
}

// StartPair starts a primary and its standby (stopped and removed when the
// test ends), with track_commit_timestamp on (the checker times changes by
// their commit), and waits until the standby streams (and with sync, is the
// primary's synchronous standby).
func (c *Cluster) StartPair(t testing.TB, sync bool, log io.Writer) *Pair {
	t.Helper()
	p := &Pair{Sync: sync, log: log}
	for i := range p.nodes {
		// Under /var/tmp, which the postgres OS user can enter when we
		// are root (a test's TempDir is not).
		dir, err := os.MkdirTemp("/var/tmp", fmt.Sprintf("flashline-chaos-node%d-", i))
		if err != nil {
			t.Fatalf("chaos: %v", err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatalf("chaos: %v", err)
		}
		p.nodes[i] = devdb.Options{Dir: dir, MaxConnections: MaxConnections, Log: log}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := devdb.Stop(ctx, p.nodes[i], "immediate"); err != nil {
				t.Errorf("chaos: stopping node %d: %v", i, err)
			}
			_ = os.RemoveAll(dir)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u, err := devdb.Up(ctx, p.nodes[0])
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if err := execOn(ctx, u, "ALTER SYSTEM SET track_commit_timestamp = on"); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if err := devdb.Stop(ctx, p.nodes[0], "fast"); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if u, err = devdb.Up(ctx, p.nodes[0]); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if p.ports[0], err = portOf(u); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	p.repl[0], err = c.Proxy(fmt.Sprintf("%s-replication-0", t.Name()), p.addr(0))
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	t.Cleanup(p.repl[0].Stop)
	if err := p.follow(ctx, 1, 0); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	p.repl[1], err = c.Proxy(fmt.Sprintf("%s-replication-1", t.Name()), p.addr(1))
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	t.Cleanup(p.repl[1].Stop)
	return p
}

// follow makes node standby a standby of node primary, through the
// replication link to it, and waits until it streams (as the synchronous
// standby in a synchronous pair).
func (p *Pair) follow(ctx context.Context, standby, primary int) error {
	link, err := portOf("postgres://" + p.repl[primary].Listen)
	if err != nil {
		return err
	}
	u, err := devdb.Standby(ctx, p.nodes[standby], link)
	if err != nil {
		return fmt.Errorf("%w\n--- the server log of node %d (the primary) ---\n%s", err, primary, tailLines(p.Log(primary), 30))
	}
	port, err := portOf(u)
	if err != nil {
		return err
	}
	if p.ports[standby] != 0 && port != p.ports[standby] {
		// The instances' proxies stand in front of the old port.
		return fmt.Errorf("chaos: node %d came back on port %d, not %d", standby, port, p.ports[standby])
	}
	p.ports[standby] = port
	primaryURL := p.NodeURL(primary, devdb.DatabaseName)
	if p.Sync {
		if err := execOn(ctx, primaryURL, "ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"); err != nil {
			return err
		}
	}
	want := "async"
	if p.Sync {
		want = "sync"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		err := queryOn(ctx, primaryURL, `SELECT coalesce(max(sync_state), '') FROM pg_stat_replication WHERE state = 'streaming'`, &state)
		if err == nil && state == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: node %d does not stream from node %d as a %s standby within 30 s (sync_state %q, %v)", standby, primary, want, state, err)
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// Primary is the node that is the primary now (0 or 1).
func (p *Pair) Primary() int { return p.primary }

// Addrs are the nodes' addresses (host:port), node 0 first.
func (p *Pair) Addrs() []string { return []string{p.addr(0), p.addr(1)} }

func (p *Pair) addr(i int) string { return "127.0.0.1:" + strconv.Itoa(p.ports[i]) }

// NodeURL is database db on node i, direct.
func (p *Pair) NodeURL(i int, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", p.addr(i), db)
}

// MultiHostURL is database db on whichever of hosts (host:port each) takes
// writes: libpq's multi-host form, which pgx reads too. A client tries the
// hosts in order and keeps the first that accepts a connection and is not
// read-only (target_session_attrs=read-write); a standby says it is.
func MultiHostURL(hosts []string, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write", strings.Join(hosts, ","), db)
}

// Database creates a database for one run on the primary (the standby
// replays it) and returns its URL through both nodes (MultiHostURL).
func (p *Pair) Database(ctx context.Context, name string) (string, error) {
	if err := createDatabase(ctx, p.NodeURL(p.primary, devdb.DatabaseName), name); err != nil {
		return "", err
	}
	return MultiHostURL(p.Addrs(), name), nil
}

// ReplicationLink is the proxy the standby streams through.
func (p *Pair) ReplicationLink() *toxiproxy.Proxy { return p.repl[p.primary] }

// Failover stops the primary with pg_ctl stop -m immediate (a crash), waits
// for after, and promotes the standby, which is the primary from then on.
// It returns when the primary was stopped and when the promotion was done.
func (p *Pair) Failover(ctx context.Context, after time.Duration) (stopped, promoted time.Time, err error) {
	// Once begun, not cut short: a pair left without a primary is no
	// failover.
	ctx = context.WithoutCancel(ctx)
	old, next := p.primary, 1-p.primary
	if err := devdb.Stop(ctx, p.nodes[old], "immediate"); err != nil {
		return time.Time{}, time.Time{}, err
	}
	stopped = time.Now()
	sleep(ctx, after)
	// The standby was copied with the primary's settings, and is to be a
	// primary without a standby of its own (until Rebuild gives it one):
	// with synchronous_standby_names set it would make every commit wait
	// for a standby that is not there. ALTER SYSTEM on a hot standby only
	// writes postgresql.auto.conf; the reload applies it.
	if err := execOn(ctx, p.NodeURL(next, devdb.DatabaseName), "ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()"); err != nil {
		return stopped, time.Time{}, fmt.Errorf("chaos: clearing synchronous_standby_names on the standby: %w", err)
	}
	if err := devdb.Promote(ctx, p.nodes[next]); err != nil {
		return stopped, time.Time{}, err
	}
	p.primary = next
	return stopped, time.Now(), nil
}

// Rebuild makes the old primary (stopped by Failover) a standby of the new
// one: its data is replaced by a fresh copy, on the same port.
func (p *Pair) Rebuild(ctx context.Context) error {
	return p.follow(ctx, 1-p.primary, p.primary)
}

// Log is node i's server log so far.
func (p *Pair) Log(i int) []byte {
	b, _ := os.ReadFile(filepath.Join(p.nodes[i].Dir, "postgres.log"))
	return b
}

// Failover is one failover of a run, and how the service came back from it.
type Failover struct {
	// Stopped is when the primary was stopped, Promoted when the standby
	// had been promoted.
	Stopped, Promoted time.Time
	// FirstCreated is from the promotion to the end of the first attempt
	// answered 201 after it (a reservation on the new primary; 0: none),
	// FirstWrite to the first answered with a write of the new primary (a
	// 201, a confirm's or a cancel's 200: a sold-out sale has no 201 to
	// give), Ready to every instance answering /readyz 200 again.
	FirstCreated, FirstWrite, Ready time.Duration
}

// firstAnswerAfter is how long after t the first attempt of ops that wrote
// ended (0: none did).
func firstAnswerAfter(ops []*Op, t time.Time, wrote func(*Op, Attempt) bool) time.Duration {
	var first time.Time
	for _, op := range ops {
		for _, a := range op.Attempts {
			if wrote(op, a) && a.End.After(t) && (first.IsZero() || a.End.Before(first)) {
				first = a.End
			}
		}
	}
	if first.IsZero() {
		return 0
	}
	return first.Sub(t)
}

func answeredCreated(op *Op, a Attempt) bool { return op.Kind == Reserve && a.Status == 201 }

func answeredWrite(op *Op, a Attempt) bool {
	return answeredCreated(op, a) || (op.Kind == Confirm || op.Kind == Cancel) && a.Status == 200
}

// createDatabase (re)creates database name on the cluster of adminURL.
func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// execOn runs statements, in order, on one connection to u.
func execOn(ctx context.Context, u string, statements ...string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, s := range statements {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// queryOn scans one row of query on a connection of its own to u.
func queryOn(ctx context.Context, u, query string, dest ...any) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, query).Scan(dest...)
}

func portOf(u string) (int, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(pu.Port())
	if err != nil {
		return 0, errors.New("chaos: no port in " + u)
	}
	return port, nil
}

// tailLines is the last n lines of b.
func tailLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
