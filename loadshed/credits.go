package loadshed

import "time"

// Constants of the limit algorithm, described in the package documentation.
// They are not options: none needs tuning per deployment.
const (
	minSampleRTT = 100 * time.Microsecond // answers that reached nothing slow are not latency samples
	timeoutCut   = 0.9                    // multiplicative decrease for Timeout
	waitGain     = 0.1                    // decrease per target of standing wait beyond the target
	maxCut       = 0.5                    // the most one interval may take off the limit
)

// credits is the adaptive limit. Limiter.mu guards it.
//
// The limit is a number of credits, as in Breakwater: how many requests the
// limiter lets into the service at once. It is driven by the wait of the
// scarce resource behind the limiter (ObserveWait), not by the requests' own
// latency: behind a coalescer, latency grows with the batch size by design
// (bigger batches sell faster), and a latency-gradient limit would read that
// as congestion and fight the coalescer.
type credits struct {
	minLimit, maxLimit, step float64
	target                   time.Duration
	interval                 time.Duration

	limit  float64
	recent time.Duration // mean latency of the last interval with samples
	win    struct {
		start       time.Time
		waits       int           // waits reported this interval
		minWait     time.Duration // the shortest of them
		timeouts    int
		maxInflight int
		latSum      time.Duration
		latN        int
	}
	lastCut time.Time // of the last Timeout cut

	intervals int // intervals closed so far, for tests
}

func (c *credits) init(o Options, now time.Time) {
	c.minLimit = float64(o.MinLimit)
	c.maxLimit = float64(o.MaxLimit)
	c.step = float64(o.Step)
	c.target = o.WaitTarget
	c.interval = o.Interval
	c.limit = float64(o.InitialLimit)
	c.win.start = now
}

func (c *credits) limitInt() int { return int(c.limit) }

// inflight records the number of requests in flight after an admission.
func (c *credits) inflight(n int) {
	c.win.maxInflight = max(c.win.maxInflight, n)
}

// observeLatency adds a Success latency to the published mean.
func (c *credits) observeLatency(rtt time.Duration) {
	if rtt >= minSampleRTT {
		c.win.latSum += rtt
		c.win.latN++
	}
}

// observeWait records a wait for the resource behind the limiter, and
// reports whether the limit grew.
func (c *credits) observeWait(now time.Time, d time.Duration, inflight int) bool {
	if c.win.waits == 0 || d < c.win.minWait {
		c.win.minWait = d
	}
	c.win.waits++
	before := c.limit
	c.tick(now, inflight)
	return c.limit > before
}

// timeout records a Timeout outcome: the interval counts as congested, and
// the limit is cut unless it was cut less than an interval ago.
func (c *credits) timeout(now time.Time) {
	c.win.timeouts++
	if c.lastCut.IsZero() || now.Sub(c.lastCut) >= c.interval {
		c.limit = max(c.minLimit, c.limit*timeoutCut)
		c.lastCut = now
	}
}

// tick closes the interval if it is over; it runs on every Release and
// ObserveWait. inflight is the number of requests in flight now.
func (c *credits) tick(now time.Time, inflight int) {
	if now.Sub(c.win.start) < c.interval {
		return
	}
	if c.win.latN > 0 {
		c.recent = c.win.latSum / time.Duration(c.win.latN)
	}
	// As in CoDel, the minimum tells a standing queue from a passing burst:
	// if even the shortest wait of the interval was over the target, the
	// resource never caught up.
	standing := c.win.waits > 0 && c.win.minWait > c.target
	busy := float64(c.win.maxInflight) >= c.limit/2
	switch {
	case standing:
		// Breakwater's decrease: in proportion to how far the standing wait
		// overshoots the target, by half at most.
		over := float64(c.win.minWait-c.target) / float64(c.target)
		c.limit *= max(maxCut, 1-waitGain*over)
	case c.win.timeouts == 0 && busy:
		c.limit += c.step
	}
	c.limit = min(c.maxLimit, max(c.minLimit, c.limit))

	c.intervals++
	c.win.start = now
	c.win.waits, c.win.minWait, c.win.timeouts = 0, 0, 0
	c.win.latSum, c.win.latN = 0, 0
	c.win.maxInflight = inflight
}
