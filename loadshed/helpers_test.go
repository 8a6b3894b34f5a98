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

// windowsClosed is how many latency windows the limiter has evaluated.
func windowsClosed(l *Limiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grad.windows
}

func baseline(l *Limiter) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.grad.baseline)
}

// runWindow drives l through one latency window on the fake clock: batches of
// n requests admitted together, each taking rtt, until a window closes. The
// window closes at the first release of a batch that meets its conditions;
// the rest of that batch is released as Dropped, so that every window holds
// samples of its own regime only. (They still count as in flight when the
// next window opens, as they would in production.)
func runWindow(tb testing.TB, l *Limiter, clk *fakeClock, n int, rtt time.Duration) {
	tb.Helper()
	start := windowsClosed(l)
	toks := make([]*Token, n)
	for windowsClosed(l) == start {
		for i := range toks {
			toks[i] = mustAcquire(tb, l, PriorityReserve)
		}
		clk.Advance(rtt)
		for _, tok := range toks {
			if windowsClosed(l) == start {
				tok.Release(Success)
			} else {
				tok.Release(Dropped)
			}
		}
	}
}

// busyWindow runs a window with the limit full.
func busyWindow(tb testing.TB, l *Limiter, clk *fakeClock, rtt time.Duration) {
	tb.Helper()
	runWindow(tb, l, clk, int(l.Limit()), rtt)
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
