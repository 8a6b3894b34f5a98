package loadshed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is an injectable clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newLimiter(tb testing.TB, o Options) *Limiter {
	tb.Helper()
	l, err := New(o)
	require.NoError(tb, err)
	return l
}

// fixed returns options for a limiter whose limit cannot move.
func fixed(limit int, o Options) Options {
	o.InitialLimit, o.MinLimit, o.MaxLimit = limit, limit, limit
	return o
}

func mustAcquire(tb testing.TB, l *Limiter, p Priority) *Token {
	tb.Helper()
	tok, err := l.Acquire(context.Background(), p)
	require.NoError(tb, err)
	return tok
}

// intervals is how many intervals the limiter has closed.
func intervals(l *Limiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.credits.intervals
}

// runInterval drives l through one interval on the fake clock: n requests in
// flight, each reported waiting wait (none when wait < 0) and released as
// outcome after rtt, then the clock moves to the end of the interval and one
// more report closes it.
func runInterval(tb testing.TB, l *Limiter, clk *fakeClock, n int, wait, rtt time.Duration, outcome Outcome) {
	tb.Helper()
	start := intervals(l)
	toks := make([]*Token, n)
	for i := range toks {
		toks[i] = mustAcquire(tb, l, PriorityReserve)
	}
	for range n {
		if wait >= 0 {
			l.ObserveWait(wait)
		}
	}
	clk.Advance(rtt)
	for _, tok := range toks {
		tok.Release(outcome)
	}
	clk.Advance(l.opts.Interval)
	if wait >= 0 {
		l.ObserveWait(wait)
	} else {
		mustAcquire(tb, l, PriorityReserve).Release(Dropped)
	}
	require.Equal(tb, start+1, intervals(l), "one interval closed")
}

// waitQueued waits until n requests are queued: goroutines that call
// Acquire are then known to be in the queue, in the order they joined.
func waitQueued(tb testing.TB, l *Limiter, n int64) {
	tb.Helper()
	require.Eventually(tb, func() bool { return l.Queued() == n }, 5*time.Second, 100*time.Microsecond)
}

type acquired struct {
	name string
	tok  *Token
	err  error
}

// acquireAsync calls Acquire in a goroutine and reports the result on ch.
func acquireAsync(ctx context.Context, l *Limiter, p Priority, name string, ch chan<- acquired) {
	go func() {
		tok, err := l.Acquire(ctx, p)
		ch <- acquired{name: name, tok: tok, err: err}
	}()
}
