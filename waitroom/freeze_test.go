package waitroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestHolderReportedAfterTheFreeze (issue 48): an edge's report carries its
// whole count of pre-open tickets but only a batch of their holders (at
// most roomtoken.MaxReportedHolders; the rest ride on its next reports), so
// the count of a ticket signed before the open can reach the freeze while
// its holder's batch comes just after it. That holder is left out of the
// committed crowd, and the crowd's N is the holders committed, not the
// tickets counted: the list anyone can check and the scale of its ranks
// agree.
func TestHolderReportedAfterTheFreeze(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	opens := time.Now().Add(2 * time.Second)
	sale := e.sale(t, flashline.NewSale{Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
	origin, leader := e.room(t, waitroom.Options{}), e.room(t, waitroom.Options{})
	require.NoError(t, origin.Load(ctx))
	sync := func(holders ...string) bool {
		token := keys.SignEdgeReport(roomtoken.EdgeReport{Edge: "edge-1", Preopen: map[string]int64{sale.ID: 3},
			Holders: map[string][]string{sale.ID: holders}}, time.Now())
		written, err := origin.EdgeSync(ctx, token)
		require.NoError(t, err)
		return written
	}
	// Before the open: the edge's three tickets, two of their holders.
	require.True(t, sync("early-a", "early-b"))
	// The origin writes the edges' counts at the open; the freeze comes
	// once they are written (the leader starts pacing only then).
	run(t, origin, false)
	require.Eventually(t, func() bool {
		var n int64
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT coalesce(sum(tickets), 0) FROM waitroom_edge_tickets WHERE sale_id = $1`, sale.ID).Scan(&n))
		return n == 3
	}, 10*time.Second, 20*time.Millisecond, "the edge's count is written at the open")
	run(t, leader, true)
	require.Eventually(t, func() bool {
		_, preopen, _ := e.roomRow(t, sale.ID)
		return preopen != nil
	}, 10*time.Second, 20*time.Millisecond, "the crowd is frozen")

	// The third holder's batch, just after the freeze: left out.
	require.True(t, sync("late-c"), "a batch after the freeze is never written: the edge forgets it")
	crowd, err := e.store.Crowd(ctx, sale.ID)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"early-a", "early-b"}, crowd.Holders)
	require.Equal(t, int64(2), crowd.HolderCount)
	require.Equal(t, crowd.HolderCount, crowd.PreopenCount, "N is the holders committed, not the tickets counted")
	_, preopen, _ := e.roomRow(t, sale.ID)
	require.Equal(t, int64(2), *preopen)
}
