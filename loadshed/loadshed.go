package loadshed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrShed is returned by Acquire when the request is refused: answer it with
// "overloaded".
var ErrShed = errors.New("loadshed: shed")

// Priority orders requests for admission. Lower values are more important.
type Priority int

const (
	// PriorityReserve is for new reservations. It may fill the limit.
	PriorityReserve Priority = iota
	// PriorityPoll is for ticket and status polls. It may use only
	// Options.PollShare of the limit and of the queue, so it is shed first.
	PriorityPoll
)

const numPriorities = 2

// String returns "reserve" or "poll", for logs and metric labels.
func (p Priority) String() string {
	switch p {
	case PriorityReserve:
		return "reserve"
	case PriorityPoll:
		return "poll"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// Outcome tells Release how an admitted request ended.
type Outcome int

const (
	// Success: the request was served; its latency goes into the mean that
	// Latency publishes.
	Success Outcome = iota
	// Dropped: the request failed or was cancelled; its latency says nothing
	// about the service and is not sampled.
	Dropped
	// Timeout: the request hit its deadline, or the service answered "busy"
	// (503/504). It is a congestion signal that cuts the limit by 10%, at
	// most once per Options.Interval, and is not sampled either.
	Timeout
)

// Limiter admits, queues or sheds requests. Safe for concurrent use.
//
// One mutex guards all the bookkeeping; the critical sections are a few
// comparisons long, and no goroutine is started: a waiting request waits in
// its caller's goroutine on a channel, a timer and its context.
type Limiter struct {
	opts      Options // with defaults
	pollQueue int     // queue slots PriorityPoll may hold

	mu       sync.Mutex
	inflight int
	queues   [numPriorities][]*waiter // FIFO per priority
	queued   int
	codel    codel
	credits  credits

	// Published copies for lock-free reads by metrics.
	limitPub, inflightPub, queuedPub atomic.Int64
	latencyPub                       atomic.Int64 // nanoseconds
	shedBy                           [numPriorities]atomic.Int64
}

// codel tracks the minimum queue sojourn over the current interval.
type codel struct {
	start      time.Time     // of the current interval
	minSojourn time.Duration // over the current interval
	samples    int           // sojourns seen in the current interval
	shedding   bool          // a whole interval passed with no sojourn within Target, and none since
}

// waiter is a request in the queue. done and tok are written under
// Limiter.mu before ready is closed.
type waiter struct {
	p        Priority
	enqueued time.Time
	ready    chan struct{} // closed when granted or evicted
	done     bool          // left the queue by grant or eviction
	tok      *Token        // nil if evicted
}

// Token is an admitted request's slot. Call Release when the request is done;
// calls after the first do nothing.
type Token struct {
	l        *Limiter
	start    time.Time
	released atomic.Bool
}

// New returns a Limiter, or the error from o.Validate.
func New(o Options) (*Limiter, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	l := &Limiter{opts: o}
	if o.QueueSize > 0 {
		l.pollQueue = max(1, int(float64(o.QueueSize)*o.PollShare))
	}
	now := o.Now()
	l.codel.start = now
	l.credits.init(o, now)
	l.publish()
	return l, nil
}

// Acquire admits the request, possibly after a wait in the queue, or refuses
// it. It returns ErrShed when the request must be answered "overloaded", and
// ctx.Err() when ctx ended first. An unknown priority is treated as
// PriorityPoll. On success, the caller must Release the token.
func (l *Limiter) Acquire(ctx context.Context, p Priority) (*Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p < PriorityReserve || p > PriorityPoll {
		p = PriorityPoll
	}
	l.mu.Lock()
	// No more important request can be waiting while there is room for this
	// one: dispatch hands every freed slot to the queue first.
	if l.inflight < l.capacity(p) {
		if l.queued == 0 {
			l.observeSojourn(0)
		}
		l.admit()
		l.mu.Unlock()
		return &Token{l: l, start: l.opts.Now()}, nil
	}
	// Refusing is the path a flood takes, thousands of times per admitted
	// request: it reads no clock when the CoDel state, as of the last
	// Release, already says no. Only a request about to queue moves it on.
	if !l.queueable(p) {
		l.shedLocked(p)
		l.mu.Unlock()
		return nil, ErrShed
	}
	now := l.opts.Now()
	l.codelTick(now)
	if !l.queueable(p) {
		l.shedLocked(p)
		l.mu.Unlock()
		return nil, ErrShed
	}
	if l.queued >= l.opts.QueueSize {
		l.evictBelow(p)
	}
	w := &waiter{p: p, enqueued: now, ready: make(chan struct{})}
	l.queues[p] = append(l.queues[p], w)
	l.queued++
	l.publish()
	l.mu.Unlock()

	return l.wait(ctx, w)
}

// Refuses reports whether a request of priority p would be shed now, were
// it to Acquire: no slot free, and the queue closed to it (CoDel's
// shedding state, or full of requests as important). A peek, for the front
// door, which refuses such a request before it pays for anything else (its
// token, its body); it counts the refusal as Acquire does. A request it
// lets through may still be shed by Acquire a moment later.
func (l *Limiter) Refuses(p Priority) bool {
	if p < PriorityReserve || p > PriorityPoll {
		p = PriorityPoll
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight < l.capacity(p) || l.queueable(p) {
		return false
	}
	l.shedLocked(p)
	return true
}

// wait blocks until w is granted a slot or evicted, MaxWait passes, or ctx
// ends.
func (l *Limiter) wait(ctx context.Context, w *waiter) (*Token, error) {
	timer := time.NewTimer(l.opts.MaxWait)
	defer timer.Stop()
	timedOut := false
	select {
	case <-w.ready:
		return w.result()
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}

	now := l.opts.Now()
	l.mu.Lock()
	if w.done {
		// Granted or evicted while we woke up.
		l.mu.Unlock()
		tok, err := w.result()
		if tok != nil && !timedOut {
			tok.Release(Dropped)
			return nil, ctx.Err()
		}
		return tok, err
	}
	l.remove(w)
	if timedOut {
		l.observeSojourn(now.Sub(w.enqueued))
		l.shedLocked(w.p)
	}
	l.publish()
	l.mu.Unlock()
	if timedOut {
		return nil, ErrShed
	}
	return nil, ctx.Err()
}

func (w *waiter) result() (*Token, error) {
	if w.tok == nil {
		return nil, ErrShed
	}
	return w.tok, nil
}

// Release gives the slot back and reports how the request ended. It is safe
// to call more than once and on a nil token; only the first call counts.
func (t *Token) Release(o Outcome) {
	if t == nil || !t.released.CompareAndSwap(false, true) {
		return
	}
	l := t.l
	now := l.opts.Now()
	l.mu.Lock()
	l.inflight--
	l.codelTick(now)
	switch o {
	case Success:
		l.credits.observeLatency(now.Sub(t.start))
	case Timeout:
		l.credits.timeout(now)
	}
	l.credits.tick(now, l.inflight)
	l.dispatch(now)
	l.publish()
	l.mu.Unlock()
}

// ObserveWait reports that one unit of work behind the limiter (for the
// purchase path: a batch of reservations) waited d for its scarce resource
// (a database connection). A standing wait shrinks the limit; see the
// package documentation.
func (l *Limiter) ObserveWait(d time.Duration) {
	now := l.opts.Now()
	l.mu.Lock()
	if l.credits.observeWait(now, d, l.inflight) {
		// A grown limit may admit waiters.
		l.dispatch(now)
	}
	l.publish()
	l.mu.Unlock()
}

// Limit is the current concurrency limit.
func (l *Limiter) Limit() int64 { return l.limitPub.Load() }

// InFlight is the number of admitted requests not yet released.
func (l *Limiter) InFlight() int64 { return l.inflightPub.Load() }

// Latency is the mean latency, from admission to release, of the requests
// served in the last Interval that saw any (0 before the first); answers
// under 100µs, which never reached anything slow, are left out.
func (l *Limiter) Latency() time.Duration { return time.Duration(l.latencyPub.Load()) }

// Queued is the number of requests waiting for a slot.
func (l *Limiter) Queued() int64 { return l.queuedPub.Load() }

// Shed is how many requests have been refused so far, at arrival or after
// waiting.
func (l *Limiter) Shed() int64 {
	var n int64
	for p := range l.shedBy {
		n += l.shedBy[p].Load()
	}
	return n
}

// ShedBy is how many requests of priority p have been refused so far.
func (l *Limiter) ShedBy(p Priority) int64 {
	if p < PriorityReserve || p > PriorityPoll {
		return 0
	}
	return l.shedBy[p].Load()
}

// capacity is how many requests may be in flight when one of priority p is
// admitted.
func (l *Limiter) capacity(p Priority) int {
	n := l.credits.limitInt()
	if p == PriorityPoll {
		return max(1, int(float64(n)*l.opts.PollShare))
	}
	return n
}

func (l *Limiter) admit() {
	l.inflight++
	l.credits.inflight(l.inflight)
	l.inflightPub.Store(int64(l.inflight))
}

func (l *Limiter) shedLocked(p Priority) {
	l.shedBy[p].Add(1)
}

// queueable reports whether a request of priority p may join the queue,
// possibly by evicting a less important waiter from a full queue.
func (l *Limiter) queueable(p Priority) bool {
	switch {
	case l.opts.QueueSize == 0:
		return false
	case l.codel.shedding:
		return false
	case p == PriorityPoll && len(l.queues[PriorityPoll]) >= l.pollQueue:
		return false
	case l.queued < l.opts.QueueSize:
		return true
	}
	_, ok := l.evictable(p)
	return ok
}

// evictable is the least important priority below p that has a waiter: the
// one a full queue sheds to make room for a request of priority p.
func (l *Limiter) evictable(p Priority) (Priority, bool) {
	for q := PriorityPoll; q > p; q-- {
		if len(l.queues[q]) > 0 {
			return q, true
		}
	}
	return 0, false
}

// evictBelow sheds the newest waiter of the least important priority below p,
// to make room for a request of priority p in a full queue.
func (l *Limiter) evictBelow(p Priority) {
	q, ok := l.evictable(p)
	if !ok {
		return
	}
	n := len(l.queues[q])
	w := l.queues[q][n-1]
	l.queues[q][n-1] = nil
	l.queues[q] = l.queues[q][:n-1]
	l.queued--
	w.done = true
	l.shedLocked(q)
	close(w.ready)
}

// remove takes w, which has not been granted, out of its queue.
func (l *Limiter) remove(w *waiter) {
	q := l.queues[w.p]
	if i := slices.Index(q, w); i >= 0 {
		l.queues[w.p] = slices.Delete(q, i, i+1)
		l.queued--
	}
}

// dispatch hands free slots to waiters, most important first, FIFO within a
// priority. It runs after anything that may free a slot or raise the limit,
// so that a waiter is never passed over by a later arrival.
func (l *Limiter) dispatch(now time.Time) {
	for p := PriorityReserve; p <= PriorityPoll; p++ {
		for len(l.queues[p]) > 0 && l.inflight < l.capacity(p) {
			w := l.queues[p][0]
			l.queues[p] = slices.Delete(l.queues[p], 0, 1)
			l.queued--
			l.observeSojourn(now.Sub(w.enqueued))
			l.admit()
			w.tok = &Token{l: l, start: now}
			w.done = true
			close(w.ready)
		}
	}
}

// codelTick closes the CoDel interval if it is over: the queue is standing if
// no request got through it within Target during the whole interval. It runs
// on every Release and before a request joins the queue.
func (l *Limiter) codelTick(now time.Time) {
	c := &l.codel
	if now.Sub(c.start) < l.opts.Interval {
		return
	}
	c.shedding = c.samples > 0 && c.minSojourn > l.opts.Target
	c.start = now
	c.samples = 0
}

// observeSojourn records how long a request spent queued; zero for one
// admitted while the queue is empty. As in CoDel, one request through within
// Target ends the shedding at once.
func (l *Limiter) observeSojourn(d time.Duration) {
	c := &l.codel
	if c.samples == 0 || d < c.minSojourn {
		c.minSojourn = d
	}
	c.samples++
	if d <= l.opts.Target {
		c.shedding = false
	}
}

// publish copies the state metrics read into atomics.
func (l *Limiter) publish() {
	l.limitPub.Store(int64(l.credits.limitInt()))
	l.inflightPub.Store(int64(l.inflight))
	l.queuedPub.Store(int64(l.queued))
	l.latencyPub.Store(int64(l.credits.recent))
}
