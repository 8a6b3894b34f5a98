package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/loadtest"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestLoadtestReportsEveryPhasesBatches: the northline scenario's report
// counts each phase's purchase-path batches, and together they are what the
// instance's /metrics counted over the run. (The race phase used to report
// "none seen", and its batches were counted in the storm's line.) The
// instance is built without the race detector: the report is the subject.
func TestLoadtestReportsEveryPhasesBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flashline serve process: not in -short")
	}
	t.Parallel()
	srv := testserver.StartPlain(t, testdb.New(t))
	before := batchCount(t, srv.URL)
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), loadtest.Config{
		Targets:    []string{srv.URL},
		AdminToken: testserver.AdminToken,
		JWTSecret:  testserver.JWTSecret,
		Scenario:   "northline",
		Clients:    32,
		Checkouts:  300,
		Out:        &out,
		Err:        os.Stderr,
	})
	t.Logf("northline, 300 checkouts in the storm:\n%s", out.String())
	require.NoError(t, err)
	require.Len(t, res.Phases, 1)
	race, storm := res.Phases[0].Batches, res.Batches
	require.Positive(t, race.Count, "the race's batches")
	require.Positive(t, storm.Count, "the storm's batches")
	require.Equal(t, batchCount(t, srv.URL)-before, race.Count+storm.Count, "the phases' batches against /metrics")
	require.NotContains(t, out.String(), "none seen")
}

// batchCount is flashline_reserve_batch_size's count on base's /metrics.
func batchCount(t *testing.T, base string) float64 {
	t.Helper()
	r, err := testserver.NewClient().Do(context.Background(), http.MethodGet, base+"/metrics", testserver.AdminToken, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status)
	m := regexp.MustCompile(`(?m)^flashline_reserve_batch_size_count (\S+)$`).FindSubmatch(r.Body)
	require.NotNil(t, m, "no batch histogram on /metrics")
	n, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	return n
}
