package testredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL returns a Redis for this test: FLASHLINE_TEST_REDIS_URL (shared; the
// gate's keys are per sale, and every test makes its own sales), else a
// server of its own.
func URL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("FLASHLINE_TEST_REDIS_URL"); u != "" {
		return u
	}
	return Start(t).URL
}

// Server is a redis-server this test owns: it may kill and restart it.
type Server struct {
	URL  string
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// binary finds redis-server: FLASHLINE_REDIS_SERVER, else on PATH, else
// where Debian puts it.
func binary() (string, bool) {
	if b := os.Getenv("FLASHLINE_REDIS_SERVER"); b != "" {
		return b, true
	}
	if b, err := exec.LookPath("redis-server"); err == nil {
		return b, true
	}
	for _, b := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(b); err == nil {
			return b, true
		}
	}
	return "", false
}

// Start starts a redis-server for this test on a free loopback port.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, ok := binary()
	if !ok {
		msg := "testredis: no redis-server binary (install Redis's server, e.g. the redis-server package, or set FLASHLINE_TEST_REDIS_URL for tests that do not restart it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{t: t, bin: bin, port: port, dir: t.TempDir(), URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--protected-mode", "yes")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("testredis: start %s: %v", s.bin, err)
	}
	opts, _ := redis.ParseURL(s.URL)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatalf("testredis: redis-server on port %d did not answer: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server at once (SIGKILL): what it held is gone.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Client returns a client of the server, closed when the test ends.
func Client(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
