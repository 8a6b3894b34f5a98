package loadshed

import (
	"math"
	"time"
)

// Constants of the limit algorithm, described in the package documentation.
// They are not options: each is a published default of Netflix's
// concurrency-limits or follows from the guards, and none needs tuning per
// deployment.
const (
	minWindowSamples = 10                     // WindowedLimit's windowSize
	minSampleRTT     = 100 * time.Microsecond // WindowedLimit's minRttThreshold
	smoothing        = 0.2                    // Gradient2's smoothing
	minGradient      = 0.5                    // Gradient2's clamp
	baselineWeight   = 0.05                   // exponential average of the baseline
	baselineBand     = 1.1                    // the baseline rises only from s ≤ band × baseline
	baselineDecay    = 0.9                    // Gradient2: baseline × 0.9 while it is over 2 × s
	timeoutCut       = 0.9                    // multiplicative decrease for Timeout
	rebaseAfter      = 20                     // congested windows at MinLimit before re-baselining
)

// gradient is the adaptive limit. Limiter.mu guards it.
type gradient struct {
	tolerance          float64
	minLimit, maxLimit float64
	interval           time.Duration

	limit    float64
	baseline float64 // nanoseconds; 0 until the first window closes
	recent   float64 // the last window's mean latency, nanoseconds
	win      struct {
		start       time.Time
		samples     int
		sum         time.Duration
		maxInflight int
		timeouts    int
	}
	lastCut time.Time // of the last Timeout cut

	congested       bool    // the last window was congested
	onsetLimit      float64 // the limit when the current congestion began
	floorWindows    int     // consecutive congested windows at MinLimit
	ceiling         float64 // cap on growth after a re-baseline; 0 = none
	ceilingBaseline float64 // the baseline before that re-baseline

	windows int // windows closed so far, for tests
}

func (g *gradient) init(o Options, now time.Time) {
	g.tolerance = o.Tolerance
	g.minLimit = float64(o.MinLimit)
	g.maxLimit = float64(o.MaxLimit)
	g.interval = o.Interval
	g.limit = float64(o.InitialLimit)
	g.win.start = now
}

func (g *gradient) limitInt() int { return int(g.limit) }

// inflight records the number of requests in flight after an admission.
func (g *gradient) inflight(n int) {
	g.win.maxInflight = max(g.win.maxInflight, n)
}

// observe adds a Success latency sample and closes the window if it is due.
// inflight is the number of requests still in flight.
func (g *gradient) observe(now time.Time, rtt time.Duration, inflight int) {
	if rtt < minSampleRTT {
		return
	}
	g.win.samples++
	g.win.sum += rtt
	if g.win.samples >= minWindowSamples && now.Sub(g.win.start) >= g.interval {
		g.update(now, inflight)
	}
}

// timeout records a Timeout outcome: the window counts as congested, and the
// limit is cut unless it was cut less than an interval ago.
func (g *gradient) timeout(now time.Time) {
	g.win.timeouts++
	if g.lastCut.IsZero() || now.Sub(g.lastCut) >= g.interval {
		g.limit = max(g.minLimit, g.limit*timeoutCut)
		g.lastCut = now
	}
}

// update closes the window and recomputes the limit and the baseline.
func (g *gradient) update(now time.Time, inflight int) {
	s := float64(g.win.sum) / float64(g.win.samples)
	g.recent = s
	if g.baseline == 0 {
		g.baseline = s
	}
	grad := min(1, max(minGradient, g.tolerance*g.baseline/s))
	congested := grad < 1 || g.win.timeouts > 0
	busy := float64(g.win.maxInflight) >= g.limit/2
	if congested && !g.congested {
		g.onsetLimit = g.limit
	}
	g.congested = congested

	// The limit: shrink in proportion to the latency inflation; grow by the
	// queue allowance only when uncongested and busy, and not past the
	// ceiling left by a re-baseline.
	switch {
	case grad < 1:
		g.limit *= 1 - smoothing*(1-grad)
	case !congested && busy:
		next := g.limit + smoothing*math.Sqrt(g.limit)
		if g.ceiling > 0 {
			next = min(next, max(g.limit, g.ceiling))
		}
		g.limit = next
	}
	g.limit = min(g.maxLimit, max(g.minLimit, g.limit))

	// The baseline: falls freely, rises slowly and only from a window near it.
	switch {
	case s < g.baseline:
		g.baseline += baselineWeight * (s - g.baseline)
		if g.baseline > 2*s {
			g.baseline *= baselineDecay
		}
	case !congested && s <= baselineBand*g.baseline:
		g.baseline += baselineWeight * (s - g.baseline)
	}

	// The overload is over once the latency is back near the old baseline.
	if g.ceiling > 0 && s <= g.tolerance*g.ceilingBaseline {
		g.ceiling = 0
	}
	// Latency that stays high at MinLimit is not caused by our concurrency:
	// the service has become slower, and this is its new baseline.
	if grad < 1 && g.win.timeouts == 0 && g.limit <= g.minLimit {
		g.floorWindows++
	} else {
		g.floorWindows = 0
	}
	if g.floorWindows >= rebaseAfter {
		if g.ceiling == 0 {
			g.ceiling = g.onsetLimit
			g.ceilingBaseline = g.baseline
		}
		g.baseline = s
		g.floorWindows = 0
	}

	g.windows++
	g.win.start = now
	g.win.samples = 0
	g.win.sum = 0
	g.win.maxInflight = inflight
	g.win.timeouts = 0
}
