package edge

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestHoldersInBatches: an edge's holders wait for an origin's word, a
// report carries a bounded batch of them, those written are forgotten and
// the rest go in the next; a frozen crowd drops what waits and refuses new
// ones; the edge keeps at most maxHolders.
func TestHoldersInBatches(t *testing.T) {
	keys, err := roomtoken.ParseKeyring("t1:edge-holders-test-key-0123456789abcdef")
	require.NoError(t, err)
	e, err := NewClient(keys, Options{Origins: []string{"http://origin.invalid"}})
	require.NoError(t, err)
	ctx := context.Background()
	e.doc.Sales = []roomtoken.EdgeSale{{ID: "s1", PreopenCount: -1}, {ID: "s2", PreopenCount: -1}}

	many := make([]string, roomtoken.MaxReportedHolders+100)
	for i := range many {
		many[i] = fmt.Sprintf("c%d", i)
	}
	require.NoError(t, e.AddHolders(ctx, "s1", many))
	require.NoError(t, e.AddHolders(ctx, "s1", many[:10]), "a holder added again is one")
	require.NoError(t, e.AddHolders(ctx, "s2", []string{"x", "y"}))
	require.Equal(t, len(many)+2, e.Unreported())

	rep := e.report()
	n := 0
	for _, cs := range rep.Holders {
		n += len(cs)
	}
	require.Equal(t, roomtoken.MaxReportedHolders, n, "a report carries one batch")
	e.written(rep.Holders)
	e.written(rep.Holders) // a second origin's answer changes nothing
	require.Equal(t, len(many)+2-roomtoken.MaxReportedHolders, e.Unreported())

	seen := map[string]bool{}
	for _, cs := range rep.Holders {
		for _, c := range cs {
			seen[c] = true
		}
	}
	rest := e.report().Holders
	for _, cs := range rest {
		for _, c := range cs {
			require.False(t, seen[c], "%s was written already", c)
		}
	}
	e.written(rest)
	require.Zero(t, e.Unreported())

	// s1's crowd frozen: what waits is dropped, new ones refused.
	require.NoError(t, e.AddHolders(ctx, "s1", []string{"late-1"}))
	require.NoError(t, e.AddHolders(ctx, "s2", []string{"z"}))
	e.doc.Sales[0].PreopenCount = 5
	rep = e.report()
	require.Equal(t, map[string][]string{"s2": {"z"}}, rep.Holders)
	require.Equal(t, 1, e.Unreported())
	require.ErrorIs(t, e.AddHolders(ctx, "s1", []string{"late-2"}), flashline.ErrCrowdCommitted)

	// Bounded.
	e.nHolders = maxHolders
	require.ErrorIs(t, e.AddHolders(ctx, "s2", []string{"w"}), flashline.ErrUnavailable)
}
