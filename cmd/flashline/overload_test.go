package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/loadtest"
	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/internal/testserver"
)

// TestOverloadSheds floods one instance with a small purchase pool far above
// what it can absorb: it answers only 201 or 503 overloaded, the invariant
// holds, and /healthz keeps answering. (The figures are logged, not asserted:
// this machine is shared; `flashline-loadtest --scenario overload` measures.)
func TestOverloadSheds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	dbURL := testdb.New(t)
	srv := testserver.Start(t, dbURL, "--sale-pool-size", "4", "--no-workers")
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), loadtest.Config{
		Targets:    []string{srv.URL},
		AdminToken: testserver.AdminToken,
		JWTSecret:  testserver.JWTSecret,
		Scenario:   "overload",
		Rate:       3000,
		Duration:   4 * time.Second,
		Stock:      1_000_000,
		Out:        &out,
		Err:        os.Stderr,
	})
	t.Logf("overload at 3000/s for 4s on one instance with a 4-connection purchase pool:\n%s", out.String())
	require.NoError(t, err) // includes the final check: invariant ok, no duplicates
	for outcome := range res.Outcomes {
		require.Contains(t, []string{"201", "503 overloaded", "429 rate_limited"}, outcome)
	}
	require.Positive(t, res.Reserved)
	require.NotEmpty(t, res.Health)
}
