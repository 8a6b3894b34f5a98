package loadshed

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		wantErr string // substring; "" means valid
	}{
		{"ZeroIsDefaults", Options{}, ""},
		{"Explicit", Options{InitialLimit: 10, MinLimit: 2, MaxLimit: 50, Step: 3, QueueSize: 5, MaxWait: time.Second, Target: time.Millisecond, Interval: time.Second, WaitTarget: time.Millisecond, PollShare: 1}, ""},
		{"NoQueue", Options{QueueSize: -1}, ""},
		{"SmallMaxLimitPullsDefaults", Options{MaxLimit: 2}, ""},
		{"LargeMinLimitPushesDefaults", Options{MinLimit: 300}, ""},
		{"NegativeInitialLimit", Options{InitialLimit: -1}, "InitialLimit must not be negative"},
		{"NegativeMinLimit", Options{MinLimit: -1}, "MinLimit must not be negative"},
		{"NegativeMaxLimit", Options{MaxLimit: -5}, "MaxLimit must not be negative"},
		{"NegativeStep", Options{Step: -1}, "Step must not be negative"},
		{"QueueSizeBelowMinusOne", Options{QueueSize: -2}, "QueueSize must be -1"},
		{"NegativeMaxWait", Options{MaxWait: -time.Millisecond}, "MaxWait must not be negative"},
		{"NegativeTarget", Options{Target: -time.Millisecond}, "Target must not be negative"},
		{"NegativeInterval", Options{Interval: -time.Second}, "Interval must not be negative"},
		{"NegativeWaitTarget", Options{WaitTarget: -time.Millisecond}, "WaitTarget must not be negative"},
		{"PollShareNaN", Options{PollShare: math.NaN()}, "PollShare must be in (0, 1]"},
		{"PollShareAboveOne", Options{PollShare: 1.5}, "PollShare must be in (0, 1]"},
		{"PollShareNegative", Options{PollShare: -0.1}, "PollShare must be in (0, 1]"},
		{"MinAboveMax", Options{MinLimit: 10, MaxLimit: 5}, "MinLimit 10 exceeds MaxLimit 5"},
		{"InitialBelowMin", Options{InitialLimit: 3, MinLimit: 5}, "InitialLimit 3 is outside [MinLimit 5, MaxLimit 200]"},
		{"InitialAboveMax", Options{InitialLimit: 30, MaxLimit: 25}, "InitialLimit 30 is outside [MinLimit 4, MaxLimit 25]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.opts.Validate()
			_, newErr := New(tt.opts)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NoError(t, newErr)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.ErrorContains(t, newErr, tt.wantErr)
		})
	}

	t.Run("ReportsEveryBadField", func(t *testing.T) {
		t.Parallel()
		err := Options{MinLimit: -1, MaxWait: -1}.Validate()
		require.ErrorContains(t, err, "MinLimit")
		require.ErrorContains(t, err, "MaxWait")
	})
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, Options{})
	require.Equal(t, int64(200), l.Limit(), "the limit starts open")
	o := l.opts
	require.Equal(t, 4, o.MinLimit)
	require.Equal(t, 200, o.MaxLimit)
	require.Equal(t, 50, o.QueueSize)
	require.Equal(t, 50*time.Millisecond, o.MaxWait)
	require.Equal(t, 5*time.Millisecond, o.Target)
	require.Equal(t, 100*time.Millisecond, o.Interval)
	require.Equal(t, 4, o.Step)
	require.Equal(t, 5*time.Millisecond, o.WaitTarget)
	require.InDelta(t, 0.5, o.PollShare, 0)
	require.Equal(t, 25, l.pollQueue)

	require.Equal(t, int64(2), newLimiter(t, Options{MaxLimit: 2}).Limit())
	require.Equal(t, int64(300), newLimiter(t, Options{MinLimit: 300}).Limit())
	require.Equal(t, int64(20), newLimiter(t, Options{InitialLimit: 20}).Limit())
	require.Equal(t, 0, newLimiter(t, Options{QueueSize: -1}).opts.QueueSize)
}

// TestAdmission replays sequences of arrivals that hold their slots, with no
// queue, and checks which ones are admitted.
func TestAdmission(t *testing.T) {
	t.Parallel()
	type arrival struct {
		p     Priority
		admit bool
	}
	R, P := PriorityReserve, PriorityPoll
	tests := []struct {
		name     string
		arrivals []arrival
	}{
		{"ReserveFillsLimitThenSheds", []arrival{{R, true}, {R, true}, {R, true}, {R, true}, {R, false}}},
		{"PollShedFirst", []arrival{{P, true}, {P, true}, {P, false}, {R, true}, {R, true}, {R, false}, {P, false}}},
		{"PollShedWhenReservesFillHalf", []arrival{{R, true}, {R, true}, {P, false}, {R, true}}},
		{"UnknownPriorityIsPoll", []arrival{{Priority(7), true}, {Priority(-1), true}, {Priority(9), false}, {R, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLimiter(t, fixed(4, Options{QueueSize: -1, PollShare: 0.5}))
			var wantShed [numPriorities]int64
			var toks []*Token
			for i, a := range tt.arrivals {
				tok, err := l.Acquire(context.Background(), a.p)
				if a.admit {
					require.NoError(t, err, "arrival %d (%s)", i, a.p)
					toks = append(toks, tok)
					continue
				}
				require.ErrorIs(t, err, ErrShed, "arrival %d (%s)", i, a.p)
				require.Nil(t, tok)
				p := a.p
				if p < PriorityReserve || p > PriorityPoll {
					p = PriorityPoll
				}
				wantShed[p]++
			}
			require.Equal(t, int64(len(toks)), l.InFlight())
			require.Equal(t, wantShed[0]+wantShed[1], l.Shed())
			for p := range numPriorities {
				require.Equal(t, wantShed[p], l.ShedBy(Priority(p)), Priority(p).String())
			}
			for _, tok := range toks {
				tok.Release(Success)
			}
			require.Zero(t, l.InFlight())
		})
	}
}

func TestAcquireWithDoneContext(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tok, err := l.Acquire(ctx, PriorityReserve)
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, tok)
	require.Zero(t, l.InFlight())
	require.Zero(t, l.Shed())
}

func TestQueue(t *testing.T) {
	t.Parallel()

	t.Run("WaiterGetsFreedSlot", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, fixed(1, Options{MaxWait: time.Hour}))
		hold := mustAcquire(t, l, PriorityReserve)
		ch := make(chan acquired, 1)
		acquireAsync(context.Background(), l, PriorityReserve, "w", ch)
		waitQueued(t, l, 1)
		require.Equal(t, int64(1), l.InFlight())

		hold.Release(Success)
		got := <-ch
		require.NoError(t, got.err)
		require.Equal(t, int64(1), l.InFlight(), "the slot passes to the waiter")
		require.Zero(t, l.Queued())
		got.tok.Release(Success)
		require.Zero(t, l.InFlight())
	})

	t.Run("ShedAfterMaxWait", func(t *testing.T) {
		t.Parallel()
		const maxWait = 30 * time.Millisecond
		l := newLimiter(t, fixed(1, Options{MaxWait: maxWait}))
		hold := mustAcquire(t, l, PriorityReserve)
		t.Cleanup(func() { hold.Release(Success) })

		start := time.Now()
		tok, err := l.Acquire(context.Background(), PriorityReserve)
		waited := time.Since(start)
		require.ErrorIs(t, err, ErrShed)
		require.Nil(t, tok)
		require.GreaterOrEqual(t, waited, maxWait)
		require.Less(t, waited, 5*time.Second)
		require.Zero(t, l.Queued())
		require.Equal(t, int64(1), l.Shed())
		require.Equal(t, int64(1), l.ShedBy(PriorityReserve))
	})

	for _, tt := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		cancel  bool // cancel once queued
		wantErr error
	}{
		{"CancelledWhileWaiting", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true, context.Canceled},
		{"DeadlineBeforeMaxWait", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, false, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLimiter(t, fixed(1, Options{MaxWait: time.Hour}))
			hold := mustAcquire(t, l, PriorityReserve)
			t.Cleanup(func() { hold.Release(Success) })

			ctx, cancel := tt.ctx()
			t.Cleanup(cancel)
			ch := make(chan acquired, 1)
			acquireAsync(ctx, l, PriorityReserve, "w", ch)
			if tt.cancel {
				waitQueued(t, l, 1)
				cancel()
			}
			got := <-ch
			require.ErrorIs(t, got.err, tt.wantErr)
			require.Nil(t, got.tok)
			require.Zero(t, l.Queued())
			require.Zero(t, l.Shed(), "a request that gave up was not shed")
			require.Equal(t, int64(1), l.InFlight())
		})
	}

	t.Run("NoQueueShedsAtOnce", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, fixed(1, Options{QueueSize: -1, MaxWait: time.Hour}))
		hold := mustAcquire(t, l, PriorityReserve)
		t.Cleanup(func() { hold.Release(Success) })
		_, err := l.Acquire(context.Background(), PriorityReserve)
		require.ErrorIs(t, err, ErrShed)
	})

	t.Run("FullQueueSheds", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, fixed(1, Options{QueueSize: 2, MaxWait: time.Hour}))
		hold := mustAcquire(t, l, PriorityReserve)
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan acquired, 2)
		acquireAsync(ctx, l, PriorityReserve, "w1", ch)
		acquireAsync(ctx, l, PriorityReserve, "w2", ch)
		waitQueued(t, l, 2)

		_, err := l.Acquire(context.Background(), PriorityReserve)
		require.ErrorIs(t, err, ErrShed)
		_, err = l.Acquire(context.Background(), PriorityPoll)
		require.ErrorIs(t, err, ErrShed)

		cancel()
		for range 2 {
			require.ErrorIs(t, (<-ch).err, context.Canceled)
		}
		hold.Release(Success)
		require.Zero(t, l.InFlight())
	})

	t.Run("PollHoldsOnlyItsShareOfQueue", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, fixed(1, Options{QueueSize: 4, PollShare: 0.5, MaxWait: time.Hour}))
		hold := mustAcquire(t, l, PriorityReserve)
		ctx, cancel := context.WithCancel(context.Background())
		ch := make(chan acquired, 3)
		acquireAsync(ctx, l, PriorityPoll, "p1", ch)
		waitQueued(t, l, 1)
		acquireAsync(ctx, l, PriorityPoll, "p2", ch)
		waitQueued(t, l, 2)

		_, err := l.Acquire(context.Background(), PriorityPoll)
		require.ErrorIs(t, err, ErrShed, "Poll has used its 2 of 4 queue slots")
		acquireAsync(ctx, l, PriorityReserve, "r", ch)
		waitQueued(t, l, 3)

		cancel()
		for range 3 {
			require.ErrorIs(t, (<-ch).err, context.Canceled)
		}
		hold.Release(Success)
	})
}

// TestHandoffOrder queues requests of both priorities behind a full limiter
// and frees one slot at a time: Reserve waiters go first, first come first
// served within a priority.
func TestHandoffOrder(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, fixed(1, Options{MaxWait: time.Hour}))
	held := []*Token{mustAcquire(t, l, PriorityReserve)}

	ch := make(chan acquired, 8)
	order := []struct {
		name string
		p    Priority
	}{
		{"poll1", PriorityPoll},
		{"reserve1", PriorityReserve},
		{"reserve2", PriorityReserve},
		{"poll2", PriorityPoll},
		{"reserve3", PriorityReserve},
	}
	for i, w := range order {
		acquireAsync(context.Background(), l, w.p, w.name, ch)
		waitQueued(t, l, int64(i+1))
	}

	var got []string
	for len(held) > 0 {
		before := l.Queued()
		held[0].Release(Success)
		held = held[1:]
		if l.Queued() < before { // exactly one waiter was granted the slot
			a := <-ch
			require.NoError(t, a.err)
			got = append(got, a.name)
			held = append(held, a.tok)
		}
	}
	require.Equal(t, []string{"reserve1", "reserve2", "reserve3", "poll1", "poll2"}, got)
	require.Zero(t, l.InFlight())
}

// TestQueueEviction: a full queue makes room for a Reserve arrival by
// shedding its newest Poll waiter.
func TestQueueEviction(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, fixed(1, Options{QueueSize: 3, PollShare: 1, MaxWait: time.Hour}))
	held := []*Token{mustAcquire(t, l, PriorityReserve)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	ch := make(chan acquired, 8)
	acquireAsync(ctx, l, PriorityPoll, "poll1", ch)
	waitQueued(t, l, 1)
	acquireAsync(ctx, l, PriorityPoll, "poll2", ch)
	waitQueued(t, l, 2)
	acquireAsync(ctx, l, PriorityReserve, "reserve1", ch)
	waitQueued(t, l, 3)

	evicted := func(want string) {
		t.Helper()
		a := <-ch
		require.Equal(t, want, a.name)
		require.ErrorIs(t, a.err, ErrShed)
	}

	// A Reserve arrival evicts the newest Poll waiter, then the last one.
	acquireAsync(ctx, l, PriorityReserve, "reserve2", ch)
	evicted("poll2")
	waitQueued(t, l, 3)
	// A Poll arrival cannot evict anyone.
	_, err := l.Acquire(ctx, PriorityPoll)
	require.ErrorIs(t, err, ErrShed)
	acquireAsync(ctx, l, PriorityReserve, "reserve3", ch)
	evicted("poll1")
	waitQueued(t, l, 3)
	// A Reserve arrival cannot evict a Reserve waiter.
	_, err = l.Acquire(ctx, PriorityReserve)
	require.ErrorIs(t, err, ErrShed)
	require.Equal(t, int64(3), l.ShedBy(PriorityPoll))
	require.Equal(t, int64(1), l.ShedBy(PriorityReserve))

	// The survivors are served in order.
	var got []string
	for len(held) > 0 {
		before := l.Queued()
		held[0].Release(Success)
		held = held[1:]
		if l.Queued() < before {
			a := <-ch
			require.NoError(t, a.err)
			got = append(got, a.name)
			held = append(held, a.tok)
		}
	}
	require.Equal(t, []string{"reserve1", "reserve2", "reserve3"}, got)
	require.Zero(t, l.InFlight())
}

// TestCoDel: once no request got through the queue within Target for a
// whole interval, arrivals are shed at once instead of queued, until one gets
// through within Target again.
func TestCoDel(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	l := newLimiter(t, fixed(1, Options{
		QueueSize: 10, MaxWait: time.Hour,
		Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond, Now: clk.Now,
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	ch := make(chan acquired, 8)
	next := func(want string) *Token {
		t.Helper()
		a := <-ch
		require.Equal(t, want, a.name)
		require.NoError(t, a.err)
		return a.tok
	}

	hold := mustAcquire(t, l, PriorityReserve) // through an empty queue: sojourn 0
	clk.Advance(100 * time.Millisecond)

	// A new interval in which every request waits 20ms or more.
	acquireAsync(ctx, l, PriorityReserve, "w1", ch)
	waitQueued(t, l, 1)
	clk.Advance(20 * time.Millisecond)
	hold.Release(Success)
	w1 := next("w1")
	acquireAsync(ctx, l, PriorityReserve, "w2", ch)
	waitQueued(t, l, 1)
	acquireAsync(ctx, l, PriorityReserve, "w3", ch)
	waitQueued(t, l, 2)
	clk.Advance(90 * time.Millisecond)
	w1.Release(Success) // closes the interval: minimum sojourn 20ms > 5ms
	w2 := next("w2")

	// The queue stands: arrivals are shed without waiting, though it has room.
	for _, p := range []Priority{PriorityReserve, PriorityPoll} {
		_, err := l.Acquire(ctx, p)
		require.ErrorIs(t, err, ErrShed, p.String())
	}
	require.Equal(t, int64(1), l.Queued())
	w2.Release(Success)
	w3 := next("w3") // waited 90ms: still shedding
	_, err := l.Acquire(ctx, PriorityReserve)
	require.ErrorIs(t, err, ErrShed)
	w3.Release(Success)

	// Admitted while the queue is empty: the shedding ends, and the next
	// arrival queues again.
	w4 := mustAcquire(t, l, PriorityReserve)
	acquireAsync(ctx, l, PriorityReserve, "w5", ch)
	waitQueued(t, l, 1)
	w4.Release(Success)
	next("w5").Release(Success)
	require.Zero(t, l.InFlight())
	require.Equal(t, int64(3), l.Shed())
}

func TestReleaseIdempotent(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, fixed(1, Options{MaxWait: time.Hour}))
	tok := mustAcquire(t, l, PriorityReserve)
	ch := make(chan acquired, 2)
	acquireAsync(context.Background(), l, PriorityReserve, "w1", ch)
	waitQueued(t, l, 1)
	acquireAsync(context.Background(), l, PriorityReserve, "w2", ch)
	waitQueued(t, l, 2)

	tok.Release(Success)
	tok.Release(Success)
	tok.Release(Timeout)
	require.Equal(t, int64(1), l.InFlight(), "a second Release must not free a second slot")
	require.Equal(t, int64(1), l.Queued())
	require.Equal(t, int64(1), l.Limit(), "nor count a Timeout")

	w1 := <-ch
	w1.tok.Release(Dropped)
	w1.tok.Release(Dropped)
	w2 := <-ch
	w2.tok.Release(Success)
	require.Zero(t, l.InFlight())

	var nilTok *Token
	require.NotPanics(t, func() { nilTok.Release(Success) })
}

// TestConcurrency hammers a limiter from 64 goroutines with a mix of
// priorities, latencies and outcomes, under the race detector.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts Options
		// bound returns the most requests that may be in flight at once.
		bound func(l *Limiter) int64
	}{
		{"FixedLimit", fixed(16, Options{QueueSize: 8, MaxWait: time.Millisecond}),
			func(l *Limiter) int64 { return l.Limit() }},
		// An adaptive limit may shrink under requests already in flight, so
		// the bound is the largest limit.
		{"AdaptiveLimit", Options{InitialLimit: 16, MinLimit: 2, MaxLimit: 32, QueueSize: 8, MaxWait: time.Millisecond, Interval: 5 * time.Millisecond, WaitTarget: 100 * time.Microsecond},
			func(*Limiter) int64 { return 32 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLimiter(t, tt.opts)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			t.Cleanup(cancel)

			var admitted, shed, violations atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for ctx.Err() == nil {
						p := Priority(rng.IntN(numPriorities))
						tok, err := l.Acquire(ctx, p)
						switch {
						case errors.Is(err, ErrShed):
							shed.Add(1)
							continue
						case err != nil:
							return
						}
						admitted.Add(1)
						if l.InFlight() > tt.bound(l) {
							violations.Add(1)
						}
						wait := time.Duration(rng.IntN(300)) * time.Microsecond
						l.ObserveWait(wait)
						time.Sleep(wait)
						tok.Release(Outcome(rng.IntN(3)))
						if rng.IntN(4) == 0 {
							tok.Release(Success)
						}
					}
				})
			}
			wg.Wait()

			require.Zero(t, violations.Load())
			require.Positive(t, admitted.Load())
			require.Positive(t, shed.Load())
			require.Equal(t, shed.Load(), l.Shed())
			require.Zero(t, l.InFlight())
			require.Zero(t, l.Queued())
			require.GreaterOrEqual(t, l.Limit(), int64(l.opts.MinLimit))
			require.LessOrEqual(t, l.Limit(), int64(l.opts.MaxLimit))
		})
	}
}

func TestPriorityString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "reserve", PriorityReserve.String())
	require.Equal(t, "poll", PriorityPoll.String())
	require.Equal(t, "Priority(7)", Priority(7).String())
	require.Zero(t, newLimiter(t, Options{}).ShedBy(Priority(7)))
}
