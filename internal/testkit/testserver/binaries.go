package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/flashline/flashline/internal/testkit/testdb"
)

var binDir string // where the binaries are built, removed by Main

// testHooksTag is the build tag under which flashline serve honours its
// test hooks (FLASHLINE_TEST_CLOCK_SKEW): the serve binaries built here have
// it, a production build does not.
const testHooksTag = "flashline_testhooks"

// A binary is a program built once per test process, on first use.
type binary struct {
	name, pkg string
	flags     []string
	once      sync.Once
	path      string
	err       error
}

func (b *binary) get(t testing.TB) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = build(b.name, b.pkg, b.flags...) })
	if b.err != nil {
		t.Fatalf("testserver: %v", b.err)
	}
	return b.path
}

// scripts/test.sh builds these three with the same names and flags into
// FLASHLINE_TEST_BIN_DIR: a change here is a change there.
var (
	raceServe = &binary{name: "flashline", pkg: "./cmd/flashline", flags: []string{"-race", "-tags", testHooksTag}}
	// Without the race detector, which multiplies memory: for tests that
	// measure what the service itself uses.
	plainServe = &binary{name: "flashline-plain", pkg: "./cmd/flashline", flags: []string{"-tags", testHooksTag}}
	// Without the race detector: a load generator run in the
	// race-instrumented test process spends about three times the CPU,
	// taken from the service it measures on the same machine.
	loadtest = &binary{name: "flashline-loadtest", pkg: "./cmd/flashline-loadtest"}
)

// Main wraps testing.M.Run and removes the binaries built for the run.
func Main(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// Binary builds ./cmd/flashline once per test process, with -race, and
// returns its path.
func Binary(t testing.TB) string { t.Helper(); return raceServe.get(t) }

// PlainBinary builds ./cmd/flashline once per test process without the race
// detector, and returns its path.
func PlainBinary(t testing.TB) string { t.Helper(); return plainServe.get(t) }

// LoadtestBinary builds ./cmd/flashline-loadtest once per test process,
// without the race detector, and returns its path.
func LoadtestBinary(t testing.TB) string { t.Helper(); return loadtest.get(t) }

var dirOnce sync.Once

func build(name, pkg string, flags ...string) (string, error) {
	// scripts/test.sh builds these binaries once, with the same flags,
	// for every test process of its lanes, instead of each linking its own.
	if dir := os.Getenv("FLASHLINE_TEST_BIN_DIR"); dir != "" {
		if path := filepath.Join(dir, name); fileExists(path) {
			return path, nil
		}
	}
	root, err := testdb.RepoRoot()
	if err != nil {
		return "", err
	}
	dirOnce.Do(func() { binDir, err = os.MkdirTemp("", "flashline-test-bin-") })
	if err != nil {
		return "", err
	}
	path := filepath.Join(binDir, name)
	args := append(append([]string{"build"}, flags...), "-o", path, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
