package waitroom

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOutstandingAgesOut: admissions given out long ago and never used stop
// holding the pacer back; a new leader (no history) is conservative.
func TestOutstandingAgesOut(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	window := time.Minute
	h := &roomHistory{}
	// A leader that has just started knows nothing of the past: admitted
	// minus reserved.
	require.Equal(t, int64(70), h.outstanding(start, start, 100, 30, window))
	for s := range 120 {
		h.record(start.Add(time.Duration(s)*time.Second), int64(100+s), window)
	}
	now := start.Add(119 * time.Second)
	// 60 s ago the watermark was 159; 219 now: 60 given out lately, of which
	// at most admitted − reserved are unused.
	require.Equal(t, int64(60), h.outstanding(now, start, 219, 30, window))
	require.Equal(t, int64(9), h.outstanding(now, start, 219, 210, window))
	require.Equal(t, int64(0), h.outstanding(now, start, 219, 300, window))
	require.LessOrEqual(t, len(h.marks), 62, "history is trimmed to the window")
	for i := range h.marks[1:] {
		require.True(t, h.marks[i+1].at.After(h.marks[i].at), fmt.Sprint(i))
	}
}
