package loadshed

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// credited returns a limiter on a fake clock whose limit has room to move
// both ways: it starts at 100 of [10, 200], grows by 10, no queue.
func credited(t *testing.T) (*Limiter, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	l := newLimiter(t, Options{InitialLimit: 100, MinLimit: 10, MaxLimit: 200, Step: 10, QueueSize: -1, Now: clk.Now})
	return l, clk
}

func TestLimitStartsOpen(t *testing.T) {
	t.Parallel()
	// A flash sale is a cold start into a spike: the first burst finds the
	// whole limit, not a slow start.
	require.Equal(t, int64(200), newLimiter(t, Options{}).Limit())
	require.Equal(t, int64(640), newLimiter(t, Options{MinLimit: 128, MaxLimit: 640}).Limit())
}

func TestLimitFollowsTheWait(t *testing.T) {
	t.Parallel()
	const target = 5 * time.Millisecond // the default WaitTarget
	tests := []struct {
		name     string
		inflight int
		wait     time.Duration // -1: nothing reported
		want     int64
	}{
		{"NoWaitBusyGrows", 60, 0, 110},
		{"WaitWithinTargetGrows", 60, target, 110},
		{"NothingReportedBusyGrows", 60, -1, 110},
		{"AppLimitedDoesNotGrow", 20, 0, 100},
		{"StandingWaitShrinksInProportion", 60, 3 * target, 80}, // 1 − 0.1 × 2
		{"FarBeyondTargetHalvesAtMost", 60, 100 * target, 50},   // max(0.5, 1 − 0.1 × 99)
		{"AppLimitedStillShrinks", 20, 3 * target, 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, clk := credited(t)
			runInterval(t, l, clk, tt.inflight, tt.wait, time.Millisecond, Success)
			require.Equal(t, tt.want, l.Limit())
		})
	}
}

// TestBurstIsNotAStandingQueue: waits beyond the target that drain within
// the interval (its shortest wait is short) do not move the limit down.
func TestBurstIsNotAStandingQueue(t *testing.T) {
	t.Parallel()
	l, clk := credited(t)
	for _, d := range []time.Duration{40 * time.Millisecond, 30 * time.Millisecond, time.Millisecond, 20 * time.Millisecond} {
		l.ObserveWait(d)
	}
	clk.Advance(l.opts.Interval)
	l.ObserveWait(50 * time.Millisecond)
	require.Equal(t, 1, intervals(l))
	require.Equal(t, int64(100), l.Limit())
}

// TestLatencyDoesNotMoveTheLimit is the point of the design: behind a
// coalescer, latency that grows tenfold with the batch size is not
// congestion, and the limit does not shrink for it.
func TestLatencyDoesNotMoveTheLimit(t *testing.T) {
	t.Parallel()
	l, clk := credited(t)
	runInterval(t, l, clk, 60, 0, time.Millisecond, Success)
	grown := l.Limit()
	for _, rtt := range []time.Duration{2 * time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond} {
		runInterval(t, l, clk, int(l.Limit()), 0, rtt, Success)
		require.GreaterOrEqual(t, l.Limit(), grown, "latency %s", rtt)
		grown = l.Limit()
	}
	require.Equal(t, 40*time.Millisecond, l.Latency(), "latency is still published")
}

func TestLatencyPublished(t *testing.T) {
	t.Parallel()
	l, clk := credited(t)
	require.Zero(t, l.Latency())
	a, b := mustAcquire(t, l, PriorityReserve), mustAcquire(t, l, PriorityReserve)
	fast := mustAcquire(t, l, PriorityReserve)
	dropped := mustAcquire(t, l, PriorityReserve)
	clk.Advance(50 * time.Microsecond)
	fast.Release(Success) // under 100µs: reached nothing slow, left out
	clk.Advance(2*time.Millisecond - 50*time.Microsecond)
	a.Release(Success)
	clk.Advance(2 * time.Millisecond)
	b.Release(Success)
	dropped.Release(Dropped)
	clk.Advance(l.opts.Interval)
	mustAcquire(t, l, PriorityReserve).Release(Dropped) // closes the interval
	require.Equal(t, 3*time.Millisecond, l.Latency())
}

func TestTimeoutShrinksLimit(t *testing.T) {
	t.Parallel()

	t.Run("OncePerInterval", func(t *testing.T) {
		t.Parallel()
		l, clk := credited(t)
		toks := []*Token{mustAcquire(t, l, PriorityReserve), mustAcquire(t, l, PriorityReserve), mustAcquire(t, l, PriorityReserve)}
		toks[0].Release(Timeout)
		require.Equal(t, int64(90), l.Limit())
		clk.Advance(l.opts.Interval / 2)
		toks[1].Release(Timeout)
		require.Equal(t, int64(90), l.Limit(), "at most one cut per interval")
		clk.Advance(l.opts.Interval / 2)
		toks[2].Release(Timeout)
		require.Equal(t, int64(81), l.Limit())
	})

	t.Run("NotBelowMinLimit", func(t *testing.T) {
		t.Parallel()
		l, clk := credited(t)
		for range 50 {
			mustAcquire(t, l, PriorityReserve).Release(Timeout)
			clk.Advance(l.opts.Interval)
		}
		require.Equal(t, int64(10), l.Limit())
	})

	t.Run("IntervalWithTimeoutDoesNotGrow", func(t *testing.T) {
		t.Parallel()
		l, clk := credited(t)
		runInterval(t, l, clk, 60, 0, time.Millisecond, Timeout)
		require.Equal(t, int64(90), l.Limit())
		runInterval(t, l, clk, 60, 0, time.Millisecond, Success)
		require.Equal(t, int64(100), l.Limit(), "the next clean interval grows again")
	})
}

func TestGrownLimitAdmitsWaiters(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	l := newLimiter(t, Options{InitialLimit: 1, MinLimit: 1, MaxLimit: 2, Step: 1, MaxWait: time.Hour, Now: clk.Now})
	hold := mustAcquire(t, l, PriorityReserve)
	t.Cleanup(func() { hold.Release(Success) })
	ch := make(chan acquired, 1)
	acquireAsync(t.Context(), l, PriorityReserve, "w", ch)
	waitQueued(t, l, 1)
	clk.Advance(l.opts.Interval)
	l.ObserveWait(0) // a busy interval with no wait: the limit grows to 2
	got := <-ch
	require.NoError(t, got.err)
	got.tok.Release(Success)
}
