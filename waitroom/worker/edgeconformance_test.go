package worker

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/edgeconformance"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestWorkerEdgeConformance runs the edges' one suite
// (internal/testkit/edgeconformance) against the Worker on workerd, as
// cmd/flashline's TestEdgeConformance runs it against `flashline serve
// --role edge`. Skipped without workerd, as the other tests here.
func TestWorkerEdgeConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve and workerd: not in -short")
	}
	workerdBinary(t)
	edgeconformance.Run(t, func(t *testing.T, origins []string, skew time.Duration) string {
		if skew == 0 {
			return startWorker(t, origins...)
		}
		return startSkewedWorker(t, skew, origins...)
	}, edgeconformance.Lacks{
		edgeconformance.Holders: "the Worker does not report its pre-open holders yet (docs/edge.md)",
	})
}

// startSkewedWorker runs the Worker as startWorker does, its isolate's clock
// (Date.now) off by skew, as FLASHLINE_TEST_CLOCK_SKEW puts a Go edge's: a
// configuration of its own in a directory of the test's, whose main module
// sets the clock before it hands every request to worker.js. Nothing of it
// is in the Worker that is deployed.
func startSkewedWorker(t *testing.T, skew time.Duration, origins ...string) string {
	t.Helper()
	bin := workerdBinary(t)
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "src"), 0o755))
	sources, err := filepath.Glob(filepath.Join("src", "*.js"))
	require.NoError(t, err)
	for _, src := range sources {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, src), b, 0o644))
	}
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("src/clock.js", "// The test's clock skew (edgeconformance_test.go).\nconst real = Date.now;\nDate.now = () => real() + ("+
		strconv.FormatInt(skew.Milliseconds(), 10)+");\n")
	// clock.js is evaluated before worker.js and what it imports: an
	// import's module runs before the importer's, in the order imported.
	write("src/skewed.js", "import \"./clock.js\";\nexport { default } from \"./worker.js\";\n")
	config, err := os.ReadFile("config.capnp")
	require.NoError(t, err)
	const first = `(name = "worker.js", esModule = embed "src/worker.js"),`
	require.Contains(t, string(config), first, "config.capnp's first module")
	write("config.capnp", strings.Replace(string(config), first, `(name = "skewed.js", esModule = embed "src/skewed.js"),
    (name = "clock.js", esModule = embed "src/clock.js"),
    `+first, 1))

	addr := testserver.FreeAddr(t)
	cmd := exec.Command(bin, "serve", "config.capnp", "--socket-addr", "http="+addr)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ORIGINS="+strings.Join(origins, ","), "FLASHLINE_WAITROOM_KEYS="+testserver.WaitroomKeys,
		"FLASHLINE_JWT_SECRET="+testserver.JWTSecret, "EDGE_ID=")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("workerd's output:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, settle, 50*time.Millisecond, "workerd answers")
	return base
}
