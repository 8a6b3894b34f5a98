package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/loadtest"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestOverloadSheds floods one instance with a small purchase pool far above
// what it can absorb: it answers only 201 or 503 overloaded, the invariant
// holds, and /healthz keeps answering. (The figures are logged, not asserted:
// this machine is shared; `flashline-loadtest --scenario overload` measures.)
//
// The generator is flashline-loadtest built without the race detector, in a
// process of its own: in this race-instrumented test process it spent about
// three times the CPU (3.6 s against 1.2 s for 3,000/s over 4 s), taken from
// the service under test, and on a machine busy with the rest of the suite
// the service answered hundreds of requests after the generator's 10 s. The
// service takes a transaction per reservation (--max-batch 1), so that
// 1,500/s is well above what four connections absorb (about 870/s on a quiet
// machine; batches of 64 absorb 3,000/s there), while the HTTP layer of a
// starved service still reads what is offered (checked with 16 CPU burners
// beside it: every request answered within 5 s).
//
// The service is built without the race detector too (StartPlain; the race
// detector watches the same purchase path in the other end-to-end tests):
// instrumented, its CPU per request is several times a deployment's, and
// under this flood it took the CPU its own batches and the database needed.
// Beside 8 CPU burners and a 16-client pgbench on the same cluster, two runs
// each: race-built, 21 and 27 reservations with a p99 of 6.3 s and 3.7 s
// (a busy CI machine took one answer past the generator's 10 s); plain, 668
// and 360 reservations, p99 91 ms and 97 ms, every answer within 0.9 s.
func TestOverloadSheds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	dbURL := testdb.New(t)
	srv := testserver.StartPlain(t, dbURL, "--sale-pool-size", "4", "--max-batch", "1", "--no-workers")
	out := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.Command(testserver.LoadtestBinary(t), "--quiet", "--target", srv.URL,
		"--scenario", "overload", "--rate", "1500", "--duration", "4s", "--stock", "1000000", "--json", out)
	cmd.Env = append(os.Environ(), "FLASHLINE_ADMIN_TOKEN="+testserver.AdminToken, "FLASHLINE_JWT_SECRET="+testserver.JWTSecret)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("overload at 1500/s for 4s on one instance with a 4-connection purchase pool, a transaction per reservation:\n%s", stdout.String())
	require.NoError(t, err, "flashline-loadtest (its final check: invariant ok, no duplicates): %s", stderr.String())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var res loadtest.Result
	require.NoError(t, json.Unmarshal(b, &res))
	for outcome := range res.Outcomes {
		require.Contains(t, []string{"201", "503 overloaded", "429 rate_limited"}, outcome)
	}
	require.Positive(t, res.Reserved)
	require.NotEmpty(t, res.Health)
}
