package loadtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestArrivalSpread: the crowd arrives over twice the time to the open, and
// at once when the open has passed (never a negative spread).
func TestArrivalSpread(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	require.Equal(t, 10*time.Second, arrivalSpread(now.Add(5*time.Second), now))
	require.Zero(t, arrivalSpread(now, now))
	require.Zero(t, arrivalSpread(now.Add(-3*time.Second), now), "the open passed while the sale was made")
}
