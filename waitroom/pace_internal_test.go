package waitroom

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
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

// TestPollAfter: a ticket the pacer may reach at its next tick asks again
// within about a second, and before the open just after it; one beyond
// reach keeps the interval of its wait.
func TestPollAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	opens := now.Add(5 * time.Second)
	open := flashline.SaleFacts{Available: 100, Room: flashline.RoomFacts{AdmittedThrough: 50}}
	scheduled := flashline.SaleFacts{Available: 100, OpensAt: &opens}
	reach := int64(OutstandingFactor*100 + OutstandingFloor)
	for range 200 {
		d := pollAfter(open, reach, 300, now)
		require.True(t, d >= 700*time.Millisecond && d <= 1300*time.Millisecond, "within reach after the open: %v", d)
		d = pollAfter(open, reach+1, 300, now)
		require.True(t, d >= 2100*time.Millisecond && d <= 3900*time.Millisecond, "just beyond reach after the open: within the floor, %v", d)
		d = pollAfter(open, reach+20000, 300, now)
		require.True(t, d >= 7000*time.Millisecond && d <= 13000*time.Millisecond, "20,000 beyond: the poll budget's 10 s, %v", d)
		d = pollAfter(open, reach+100000, 3000, now)
		require.True(t, d >= 10500*time.Millisecond && d <= 19500*time.Millisecond, "far beyond: the usual 15 s, %v", d)
		d = pollAfter(scheduled, 10, 300, now)
		require.True(t, d >= 5300*time.Millisecond && d <= 6300*time.Millisecond, "within reach before the open: just after it, %v", d)
		d = pollAfter(scheduled, reach+1, 300, now)
		require.True(t, d >= 7100*time.Millisecond && d <= 8900*time.Millisecond, "beyond reach before the open: 3 s after it, %v", d)
		far := now.Add(time.Hour)
		d = pollAfter(flashline.SaleFacts{Available: 100, OpensAt: &far}, 10, 3600, now)
		require.True(t, d >= 10500*time.Millisecond && d <= 19500*time.Millisecond, "an open an hour away: the usual interval, %v", d)
		d = pollAfter(flashline.SaleFacts{SoldOut: true, Room: flashline.RoomFacts{AdmittedThrough: 50}}, 10, 300, now)
		require.True(t, d >= 10500*time.Millisecond, "sold out: nothing to reach, %v", d)
	}
}
