package waitroom

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEdgeTally: an origin keeps each edge's latest total (a total only
// grows).
func TestEdgeTally(t *testing.T) {
	t.Parallel()
	var tally edgeTally
	tally.set("sale_1", "e1", 3)
	tally.set("sale_1", "e1", 3) // heard twice
	tally.set("sale_1", "e2", 5)
	require.Equal(t, int64(8), tally.sum("sale_1"))
	tally.set("sale_1", "e1", 1) // restarted: its earlier tickets stand
	require.Equal(t, int64(8), tally.sum("sale_1"))
	tally.keep(func(string) bool { return false })
	require.Zero(t, tally.sum("sale_1"))
}
