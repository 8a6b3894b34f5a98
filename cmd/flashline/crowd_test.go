package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/loadtest"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestCrowdThroughTheWaitingRoom runs the crowd scenario against two
// instances: a crowd larger than the stock comes through the waiting room
// (tickets, polls at the server's pace, the challenge), exactly the stock is
// sold to admitted customers, and the load test's own final check passes.
func TestCrowdThroughTheWaitingRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	servers := testserver.StartN(t, 2, dbURL)
	var out bytes.Buffer
	res, err := loadtest.Run(context.Background(), loadtest.Config{
		Targets:       []string{servers[0].URL, servers[1].URL},
		AdminToken:    testserver.AdminToken,
		JWTSecret:     testserver.JWTSecret,
		Scenario:      "crowd",
		Clients:       120,
		Stock:         30,
		OpenIn:        2 * time.Second,
		ChallengeBits: 6,
		Duration:      90 * time.Second,
		Out:           &out,
		Err:           os.Stderr,
		Transport:     servers[0].Checked, // every exchange against the OpenAPI document
	})
	t.Logf("crowd of 120 for 30 units on two instances:\n%s", out.String())
	require.NoError(t, err) // the final check: invariant ok, no duplicates
	require.Equal(t, 30, res.Reserved)
	for outcome := range res.Outcomes {
		require.Contains(t, []string{"201", "409 sold_out", "503 overloaded"}, outcome)
	}
}
