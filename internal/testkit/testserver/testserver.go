package testserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/contract"
)

// Secrets every test server is started with: 32 bytes or more, as serve
// requires outside --demo.
const (
	AdminToken    = "test-admin-token-0123456789abcdef"
	JWTSecret     = "test-jwt-secret-0123456789abcdefg"
	WaitroomKeys  = "t1:test-waitroom-key-0123456789abcdef"
	PaymentSecret = "test-payment-webhook-secret-0123456789"
)

// Server is one running `flashline serve` process.
type Server struct {
	URL string
	// contract checks every exchange a Client has with the server against
	// the OpenAPI document, failing the test that started it on a mismatch.
	contract *contract.Recorder
	cmd      *exec.Cmd
	mu       sync.Mutex
	logs     bytes.Buffer
	done     chan struct{}
	err      error
	// listening takes the URL the process says it listens on.
	listening chan string
}

var listening = regexp.MustCompile(`msg="flashline: listening" url=(http://\S+)`)

// Start runs `flashline serve` on a free loopback port against databaseURL,
// with extra flags, and waits until /healthz answers. The process is stopped
// with SIGTERM when the test ends, and a data race it reports fails the test.
func Start(t testing.TB, databaseURL string, flags ...string) *Server {
	t.Helper()
	return start(t, Binary(t), databaseURL, nil, flags...)
}

// StartEnv is Start with extra environment variables ("NAME=value"), such as
// the test hooks serve reads (FLASHLINE_TEST_CLOCK_SKEW, honoured by the
// binaries built here, with testHooksTag).
func StartEnv(t testing.TB, databaseURL string, env []string, flags ...string) *Server {
	t.Helper()
	return start(t, Binary(t), databaseURL, env, flags...)
}

// StartPlain is Start with the binary built without the race detector.
func StartPlain(t testing.TB, databaseURL string, flags ...string) *Server {
	t.Helper()
	return start(t, PlainBinary(t), databaseURL, nil, flags...)
}

// StartEdge runs `flashline serve --role edge` in front of origins (base
// URLs), with no database at all: DATABASE_URL and every variable naming a
// database are left out of its environment, and the admin token too.
func StartEdge(t testing.TB, origins []string, flags ...string) *Server {
	t.Helper()
	return StartEdgeEnv(t, origins, nil, flags...)
}

// StartEdgeEnv is StartEdge with extra environment variables (the test
// hooks serve reads, such as FLASHLINE_TEST_CLOCK_SKEW).
func StartEdgeEnv(t testing.TB, origins []string, env []string, flags ...string) *Server {
	t.Helper()
	flags = append([]string{"--role", "edge", "--origin", strings.Join(origins, ",")}, flags...)
	return start(t, Binary(t), "", env, flags...)
}

// StartEdgePlain is StartEdge with the binary built without the race
// detector, for tests that measure what an edge itself uses.
func StartEdgePlain(t testing.TB, origins []string, flags ...string) *Server {
	t.Helper()
	flags = append([]string{"--role", "edge", "--origin", strings.Join(origins, ",")}, flags...)
	return start(t, PlainBinary(t), "", nil, flags...)
}

// FreeAddr returns a loopback address free now, for a server that must come
// back on the same address after a stop (an origin its edges name).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// environ is this process's environment less what names a database (an edge
// is started without one).
func environ(withDB bool) []string {
	if withDB {
		return os.Environ()
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.Contains(name, "DATABASE_URL") || name == "FLASHLINE_DEVDB_DIR" || strings.HasPrefix(name, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func start(t testing.TB, bin, databaseURL string, env []string, flags ...string) *Server {
	t.Helper()
	s := spawn(t, bin, databaseURL, env, flags...)
	select {
	case s.URL = <-s.listening:
	case <-s.done:
		t.Fatalf("testserver: flashline serve exited: %v\n%s", s.err, s.Logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("testserver: flashline serve did not start\n%s", s.Logs())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r, err := client.New(s.URL, nil).Healthz(context.Background()); err == nil && r.Status == http.StatusOK {
			running.Store(s.URL, s)
			t.Cleanup(func() { running.Delete(s.URL) })
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("testserver: /healthz never answered 200\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Spawn runs `flashline serve` (built with -race) as Start does, but
// returns at once, without waiting for it to listen: for tests of what it
// does while starting. Listening says when it listens.
func Spawn(t testing.TB, databaseURL string, flags ...string) *Server {
	t.Helper()
	return spawn(t, Binary(t), databaseURL, nil, flags...)
}

func spawn(t testing.TB, bin, databaseURL string, env []string, flags ...string) *Server {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = environ(databaseURL != "")
	if databaseURL != "" {
		cmd.Env = append(cmd.Env, "DATABASE_URL="+databaseURL, "FLASHLINE_ADMIN_TOKEN="+AdminToken)
	}
	cmd.Env = append(cmd.Env,
		"FLASHLINE_JWT_SECRET="+JWTSecret,
		"FLASHLINE_WAITROOM_KEYS="+WaitroomKeys,
		"FLASHLINE_PAYMENT_WEBHOOK_SECRET="+PaymentSecret,
		"GORACE=halt_on_error=1",
	)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	s := &Server{cmd: cmd, done: make(chan struct{}), listening: make(chan string, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testserver: start: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case s.listening <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.stop(t) })
	s.contract = contract.For(t)
	return s
}

// Listening is where a spawned server listens, once it does.
func (s *Server) Listening() <-chan string { return s.listening }

// Terminate sends SIGTERM, as an orchestrator does, and returns how long
// the process took to exit and how it exited (nil: status 0), or fails the
// test if it has not after limit.
func (s *Server) Terminate(t testing.TB, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return time.Since(start), s.err
	case <-time.After(limit):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("testserver: flashline serve was still running %s after SIGTERM\n%s", limit, s.Logs())
		return 0, nil
	}
}

// StartN starts n servers against one database, one after the other (Start
// may fail the test, which only the test's own goroutine may do). The first
// is built with the race detector, the others without: the detector sees
// the memory of its own process only, so one instrumented instance under
// the same concurrent traffic finds what n would, and what the instances
// race for together is the database's to keep (the tests check it there).
// The others then cost a fraction of the CPU (the detector multiplies it
// several times), which the suite's other tests, on a two-core machine,
// need.
func StartN(t testing.TB, n int, databaseURL string, flags ...string) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		if i == 0 {
			servers[i] = Start(t, databaseURL, flags...)
		} else {
			servers[i] = StartPlain(t, databaseURL, flags...)
		}
	}
	return servers
}

// Logs is what the process has written to stderr so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// RSS is the process's resident memory now, in bytes (Linux: VmRSS).
func (s *Server) RSS(t testing.TB) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("testserver: rss: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				t.Fatalf("testserver: rss: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("testserver: rss: no VmRSS in /proc/%d/status", s.cmd.Process.Pid)
	return 0
}

// Pid is the process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Kill ends the process with SIGKILL, as a crash would.
func (s *Server) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Stop ends the process with SIGTERM, waits for it to drain and exit, and
// returns how it exited (nil: status 0).
func (s *Server) Stop(t testing.TB) error {
	s.stop(t)
	if s.err != nil {
		t.Logf("testserver: flashline serve exited: %v\n%s", s.err, s.Logs())
	}
	return s.err
}

func (s *Server) stop(t testing.TB) {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			t.Errorf("testserver: flashline serve did not stop on SIGTERM\n%s", s.Logs())
		}
	}
	if logs := s.Logs(); strings.Contains(logs, "WARNING: DATA RACE") {
		t.Errorf("testserver: data race in flashline serve:\n%s", logs)
	} else if t.Failed() {
		// What the process warned of may say why the test failed (a request
		// that hung, an origin that did not answer): its last warnings.
		if w := lastWarnings(logs, 40); w != "" {
			t.Logf("testserver: the last warnings of flashline serve at %s:\n%s", s.URL, w)
		}
	}
}

// lastWarnings is the last n lines of logs at level WARN or ERROR.
func lastWarnings(logs string, n int) string {
	var w []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			w = append(w, line)
		}
	}
	return strings.Join(w[max(0, len(w)-n):], "")
}
