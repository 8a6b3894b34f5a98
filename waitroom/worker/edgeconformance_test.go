package worker

import (
	"strconv"
	"testing"
	"time"

	"github.com/flashline/flashline/internal/testkit/edgeconformance"
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
	})
}

// startSkewedWorker runs the Worker as startWorker does, its isolate's clock
// (Date.now) off by skew, as FLASHLINE_TEST_CLOCK_SKEW puts a Go edge's: a
// configuration of its own whose main module sets the clock before it hands
// every request to worker.js (staged_test.go). Nothing of it is in the
// Worker that is deployed.
func startSkewedWorker(t *testing.T, skew time.Duration, origins ...string) string {
	t.Helper()
	// clock.js is evaluated before worker.js and what it imports: an
	// import's module runs before the importer's, in the order imported.
	dir := stageWorker(t, "skewed.js", map[string]string{
		"clock.js": "// The test's clock skew (edgeconformance_test.go).\nconst real = Date.now;\nDate.now = () => real() + (" +
			strconv.FormatInt(skew.Milliseconds(), 10) + ");\n",
		"skewed.js": "import \"./clock.js\";\nexport { default } from \"./worker.js\";\n",
	})
	return serveStaged(t, dir, origins...)
}
