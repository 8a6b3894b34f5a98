package loadshed

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const baseRTT = 10 * time.Millisecond

// adaptive returns a limiter with the default algorithm on a fake clock, no
// queue (so that runWindow never waits), warmed up by a few busy windows at
// baseRTT and one quiet window, which leaves nothing in flight to carry over
// into the test's first window.
func adaptive(t *testing.T) (*Limiter, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	l := newLimiter(t, Options{QueueSize: -1, Now: clk.Now})
	for range 5 {
		busyWindow(t, l, clk, baseRTT)
	}
	runWindow(t, l, clk, 1, baseRTT)
	require.Equal(t, baseRTT, baseline(l))
	return l, clk
}

func TestLimitFollowsLatency(t *testing.T) {
	t.Parallel()
	full := func(limit int) int { return limit }
	quarter := func(limit int) int { return limit / 4 }
	tests := []struct {
		name     string
		rtt      time.Duration
		inflight func(limit int) int
		want     int // sign of the change
	}{
		{"AtBaselineGrows", baseRTT, full, +1},
		{"WithinToleranceGrows", 19 * time.Millisecond, full, +1},
		{"JustBeyondToleranceShrinks", 25 * time.Millisecond, full, -1},
		{"FarAboveBaselineShrinks", 80 * time.Millisecond, full, -1},
		{"AppLimitedDoesNotGrow", baseRTT, quarter, 0},
		{"AppLimitedStillShrinks", 80 * time.Millisecond, quarter, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, clk := adaptive(t)
			before := l.Limit()
			for range 5 {
				runWindow(t, l, clk, tt.inflight(int(l.Limit())), tt.rtt)
			}
			switch tt.want {
			case +1:
				require.Greater(t, l.Limit(), before)
			case -1:
				require.Less(t, l.Limit(), before)
			default:
				require.Equal(t, before, l.Limit())
			}
		})
	}

	t.Run("AppLimitedNeverGrows", func(t *testing.T) {
		t.Parallel()
		l, clk := adaptive(t)
		before := l.Limit()
		for range 200 {
			runWindow(t, l, clk, int(l.Limit())/2-1, baseRTT)
			require.Equal(t, before, l.Limit())
		}
	})

	t.Run("RecoversWhenLatencyFalls", func(t *testing.T) {
		t.Parallel()
		l, clk := adaptive(t)
		before := l.Limit()
		for range 10 {
			busyWindow(t, l, clk, 4*baseRTT)
		}
		low := l.Limit()
		require.Less(t, low, before*2/3)
		for range 40 {
			busyWindow(t, l, clk, baseRTT)
		}
		require.Greater(t, l.Limit(), before)
		require.Equal(t, baseRTT, baseline(l), "high latency did not move the baseline")
	})
}

// TestLimitDoesNotCreep is the failure mode of Gradient2 under steady
// overload: its baseline follows the inflated latency until the gradient is 1
// again, and then the limit grows every window although nothing improved.
func TestLimitDoesNotCreep(t *testing.T) {
	t.Parallel()

	t.Run("ConstantHighLatency", func(t *testing.T) {
		t.Parallel()
		l, clk := adaptive(t)
		start := l.Limit()
		lowest := start
		for i := range 500 {
			busyWindow(t, l, clk, 10*baseRTT)
			require.LessOrEqual(t, l.Limit(), start, "window %d", i)
			lowest = min(lowest, l.Limit())
		}
		require.Equal(t, int64(l.opts.MinLimit), lowest)
	})

	// A server with a pool of 20: beyond 20 requests in flight, the extra
	// ones queue for a connection and latency grows in proportion. With
	// Tolerance 2 the limit settles near 40 (twice the baseline latency) and
	// stays there, instead of drifting up as its own latency becomes normal.
	t.Run("QueueingServer", func(t *testing.T) {
		t.Parallel()
		const pool = 20
		l, clk := adaptive(t)
		highest := l.Limit()
		for range 1000 {
			n := int(l.Limit())
			busyWindow(t, l, clk, baseRTT*time.Duration(max(n, pool))/pool)
			highest = max(highest, l.Limit())
		}
		require.LessOrEqual(t, highest, int64(2*pool+7), "2 × pool + √(2 × pool)")
		require.GreaterOrEqual(t, l.Limit(), int64(pool), "goodput does not collapse")
		require.LessOrEqual(t, baseline(l), baseRTT*11/10)
	})

	// Requests that all time out finish at a constant latency, the deadline.
	// Fed in as samples that would look stable; as Timeout they shrink the
	// limit, once per interval, to MinLimit.
	t.Run("ConstantTimeouts", func(t *testing.T) {
		t.Parallel()
		l, clk := adaptive(t)
		prev := l.Limit()
		for range 100 {
			toks := make([]*Token, l.Limit())
			for i := range toks {
				toks[i] = mustAcquire(t, l, PriorityReserve)
			}
			clk.Advance(l.opts.Interval)
			for _, tok := range toks {
				tok.Release(Timeout)
			}
			require.LessOrEqual(t, l.Limit(), prev)
			prev = l.Limit()
		}
		require.Equal(t, int64(l.opts.MinLimit), l.Limit())
	})
}

// TestLimitRebaselines: a service that became slower for reasons of its own
// keeps its high latency even at MinLimit. The limiter then takes that
// latency as the new baseline and grows back, but only up to the limit it had
// before, until the latency returns near the old baseline.
func TestLimitRebaselines(t *testing.T) {
	t.Parallel()
	l, clk := adaptive(t)
	start := l.Limit()
	slow := 3 * baseRTT
	for i := range 200 {
		busyWindow(t, l, clk, slow)
		require.LessOrEqual(t, l.Limit(), start, "window %d", i)
	}
	require.Equal(t, slow, baseline(l))
	require.Equal(t, start, l.Limit(), "back to the limit it had before")

	for range 100 {
		busyWindow(t, l, clk, baseRTT)
	}
	require.Greater(t, l.Limit(), start, "the old latency is back: the cap is lifted")
	require.Less(t, baseline(l), 2*baseRTT)
}

func TestSamplesThatDoNotMoveTheLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rtt     time.Duration
		outcome Outcome
	}{
		{"Dropped", 50 * time.Millisecond, Dropped},
		{"DroppedFast", time.Millisecond, Dropped},
		{"FasterThan100µs", 50 * time.Microsecond, Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, clk := adaptive(t)
			limit, base, windows := l.Limit(), baseline(l), windowsClosed(l)
			for range 100 {
				toks := make([]*Token, l.Limit())
				for i := range toks {
					toks[i] = mustAcquire(t, l, PriorityReserve)
				}
				clk.Advance(tt.rtt)
				for _, tok := range toks {
					tok.Release(tt.outcome)
				}
				clk.Advance(l.opts.Interval)
			}
			require.Equal(t, limit, l.Limit())
			require.Equal(t, base, baseline(l))
			require.Equal(t, windows, windowsClosed(l))
		})
	}
}

func TestTimeoutShrinksLimit(t *testing.T) {
	t.Parallel()

	t.Run("OncePerInterval", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		l := newLimiter(t, Options{Now: clk.Now})
		toks := []*Token{mustAcquire(t, l, PriorityReserve), mustAcquire(t, l, PriorityReserve), mustAcquire(t, l, PriorityReserve)}
		require.Equal(t, int64(20), l.Limit())
		toks[0].Release(Timeout)
		require.Equal(t, int64(18), l.Limit())
		clk.Advance(l.opts.Interval / 2)
		toks[1].Release(Timeout)
		require.Equal(t, int64(18), l.Limit(), "at most one cut per interval")
		clk.Advance(l.opts.Interval / 2)
		toks[2].Release(Timeout)
		require.Equal(t, int64(16), l.Limit()) // 20 × 0.9 × 0.9 = 16.2
	})

	t.Run("NotBelowMinLimit", func(t *testing.T) {
		t.Parallel()
		clk := newFakeClock()
		l := newLimiter(t, Options{Now: clk.Now})
		for range 50 {
			mustAcquire(t, l, PriorityCritical).Release(Timeout)
			clk.Advance(l.opts.Interval)
		}
		require.Equal(t, int64(4), l.Limit())
	})

	t.Run("WindowWithTimeoutDoesNotGrow", func(t *testing.T) {
		t.Parallel()
		l, clk := adaptive(t)
		before := l.Limit()
		mustAcquire(t, l, PriorityReserve).Release(Timeout)
		cut := l.Limit()
		require.Less(t, cut, before)
		busyWindow(t, l, clk, baseRTT)
		require.Equal(t, cut, l.Limit())
		busyWindow(t, l, clk, baseRTT)
		require.Greater(t, l.Limit(), cut, "the next clean window grows again")
	})
}
