package devdb

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// These tests run the real PostgreSQL server binaries. They are skipped
// when none are installed.

// newDir returns a fresh cluster folder that the postgres OS user can reach
// and registers Down for it. t.TempDir makes 0700 folders (the per-test
// parent and the folder itself), which the server user could not enter
// when we run as root, so those are opened up to 0755.
func newDir(t *testing.T) (Options, *bytes.Buffer) {
	t.Helper()
	if _, err := findBinDir(); err != nil {
		t.Skip(err)
	}
	tmp := t.TempDir()
	root := filepath.Clean(os.TempDir())
	for p := tmp; strings.HasPrefix(p, root+string(filepath.Separator)); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	opts := Options{Dir: filepath.Join(tmp, ".devdb"), Log: &syncWriter{w: &log}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := Down(ctx, opts); err != nil {
			t.Errorf("Down: %v", err)
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("devdb log:\n%s", log.String())
		}
	})
	return opts, &log
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func up(t *testing.T, opts Options) (string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	url, err := Up(ctx, opts)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	return url, time.Since(start)
}

func selectOne(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	var one int
	var db string
	if err := conn.QueryRow(ctx, "SELECT 1, current_database()").Scan(&one, &db); err != nil {
		t.Fatalf("SELECT 1: %v", err)
	}
	if one != 1 || db != "flashline" {
		t.Fatalf("got %d, %q; want 1, flashline", one, db)
	}
}

func postmasterPID(t *testing.T, opts Options) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(opts.Dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestUpReuseDownUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters: not in -short")
	}
	t.Parallel()
	opts, log := newDir(t)

	if _, ok := URL(opts.Dir); ok {
		t.Fatal("URL reported a cluster before Up")
	}

	url, d := up(t, opts)
	t.Logf("first Up (initdb + start): %v", d)
	if !strings.HasPrefix(url, "postgres://postgres@127.0.0.1:") || !strings.HasSuffix(url, "/flashline?sslmode=disable") {
		t.Fatalf("unexpected URL %q", url)
	}
	selectOne(t, url)
	for _, want := range []string{"devdb: initialising cluster in ", "devdb: started on 127.0.0.1:"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if got, ok := URL(opts.Dir); !ok || got != url {
		t.Fatalf("URL = %q, %v; want %q, true", got, ok, url)
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{opts.Dir, filepath.Join(opts.Dir, "data")} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
				t.Errorf("%s is still owned by root", p)
			}
		}
	}

	pid := postmasterPID(t, opts)
	url2, d := up(t, opts)
	t.Logf("second Up (reuse): %v", d)
	if url2 != url {
		t.Fatalf("second Up returned %q, want %q", url2, url)
	}
	if pid2 := postmasterPID(t, opts); pid2 != pid {
		t.Fatalf("second Up restarted the server: pid %d -> %d", pid, pid2)
	}
	if d > 3*time.Second {
		t.Errorf("reusing a running cluster took %v", d)
	}
	selectOne(t, url2)

	start := time.Now()
	if err := Down(t.Context(), opts); err != nil {
		t.Fatalf("Down: %v", err)
	}
	t.Logf("Down: %v", time.Since(start))
	if _, err := os.Stat(filepath.Join(opts.Dir, "data", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("postmaster.pid still there after Down: %v", err)
	}
	if err := Down(t.Context(), opts); err != nil {
		t.Fatalf("second Down: %v", err)
	}
	if got, ok := URL(opts.Dir); !ok || got != url {
		t.Fatalf("URL after Down = %q, %v; want %q, true", got, ok, url)
	}

	url3, d := up(t, opts)
	t.Logf("Up after Down (start only): %v", d)
	if url3 != url {
		t.Fatalf("Up after Down returned %q, want %q (same port while free)", url3, url)
	}
	selectOne(t, url3)
}

func TestStalePostmaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters: not in -short")
	}
	t.Parallel()
	opts, _ := newDir(t)
	url, _ := up(t, opts)
	selectOne(t, url)

	pid := postmasterPID(t, opts)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: mustEval(t, opts.Dir)}
	deadline := time.Now().Add(10 * time.Second)
	for c.postmasterAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("postmaster %d still alive after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}

	url2, d := up(t, opts)
	t.Logf("Up after kill -9 of the postmaster: %v", d)
	selectOne(t, url2)
	if pid2 := postmasterPID(t, opts); pid2 == pid {
		t.Fatalf("postmaster pid unchanged (%d)", pid)
	}
}

func TestStalePidFileDeadProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters: not in -short")
	}
	t.Parallel()
	opts, _ := newDir(t)
	url, _ := up(t, opts)
	if err := Down(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	// A postmaster.pid naming a PID that is not running (as after a crash
	// and reboot).
	pidFile := filepath.Join(opts.Dir, "data", "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte("999999\n"+filepath.Join(opts.Dir, "data")+"\n0\n1\n\n\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url2, _ := up(t, opts)
	if url2 != url {
		t.Fatalf("got %q, want %q", url2, url)
	}
	selectOne(t, url2)
}

func TestConcurrentUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters: not in -short")
	}
	t.Parallel()
	opts, log := newDir(t)
	const n = 4
	urls := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			urls[i], errs[i] = Up(t.Context(), opts)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Up #%d: %v", i, errs[i])
		}
		if urls[i] != urls[0] {
			t.Fatalf("Up #%d returned %q, #0 returned %q", i, urls[i], urls[0])
		}
	}
	if c := strings.Count(log.String(), "initialising cluster"); c != 1 {
		t.Fatalf("cluster initialised %d times:\n%s", c, log.String())
	}
	selectOne(t, urls[0])
}

func TestPortTakenPicksNewOne(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters: not in -short")
	}
	t.Parallel()
	opts, _ := newDir(t)
	url, _ := up(t, opts)
	if err := Down(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	port, err := readPortFile(filepath.Join(opts.Dir, "port"))
	if err != nil {
		t.Fatal(err)
	}
	// Occupy the recorded port.
	l, err := listenLoopback(port)
	if err != nil {
		t.Skipf("cannot occupy port %d: %v", port, err)
	}
	defer l.Close()
	url2, _ := up(t, opts)
	if url2 == url {
		t.Fatalf("Up reused port %d although it is taken", port)
	}
	selectOne(t, url2)
	if got, ok := URL(opts.Dir); !ok || got != url2 {
		t.Fatalf("URL = %q, %v; want %q (new port recorded)", got, ok, url2)
	}
}

func TestURLNoCluster(t *testing.T) {
	if _, ok := URL(t.TempDir()); ok {
		t.Fatal("URL reported a cluster in an empty folder")
	}
	if _, ok := URL(""); ok {
		t.Fatal("URL reported a cluster for an empty dir")
	}
	if err := Down(t.Context(), Options{Dir: t.TempDir()}); err != nil {
		t.Fatalf("Down without a cluster: %v", err)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func listenLoopback(port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// A postmaster that is alive but does not answer where postmaster.pid says
// it listens is stopped (pg_ctl stop -m immediate) and started again.
func TestUnresponsivePostmaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters: not in -short")
	}
	t.Parallel()
	opts, log := newDir(t)
	url, _ := up(t, opts)
	pid := postmasterPID(t, opts)

	// Point postmaster.pid (line 4, the port) at a port nobody serves.
	l, err := listenLoopback(0)
	if err != nil {
		t.Fatal(err)
	}
	deadPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	pidFile := filepath.Join(opts.Dir, "data", "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	lines[3] = strconv.Itoa(deadPort)
	if err := os.WriteFile(pidFile, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}

	url2, d := up(t, opts)
	t.Logf("Up with an unresponsive postmaster: %v", d)
	if !strings.Contains(log.String(), "not answering") {
		t.Fatalf("Up did not treat the postmaster as unresponsive:\n%s", log.String())
	}
	if pid2 := postmasterPID(t, opts); pid2 == pid {
		t.Fatalf("postmaster %d was not restarted", pid)
	}
	if url2 != url {
		t.Fatalf("got %q, want %q", url2, url)
	}
	selectOne(t, url2)
}

func TestTransientStartFailure(t *testing.T) {
	for log, want := range map[string]bool{
		`LOG:  could not bind IPv4 address "127.0.0.1": Address already in use`:                   true,
		`FATAL:  pre-existing shared memory block (key 123, ID 4) is still in use`:                true,
		`FATAL:  lock file "postmaster.pid" already exists`:                                       true,
		`FATAL:  300000 is outside the valid range for parameter "max_connections" (1 .. 262143)`: false,
		``: false,
	} {
		if got := transientStartFailure(log); got != want {
			t.Errorf("transientStartFailure(%q) = %v, want %v", log, got, want)
		}
	}
}
