package loadshed

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Options configure a Limiter. The zero value of each field selects its
// default.
type Options struct {
	// InitialLimit is the concurrency limit to start from. Default MaxLimit:
	// a flash sale is a cold start into a spike, and a limit that has to
	// climb spends the spike below what the service can take.
	InitialLimit int
	// MinLimit is the lowest the limit can go. Default 4 (or less, if
	// MaxLimit or InitialLimit is set lower).
	MinLimit int
	// MaxLimit is the highest the limit can go. Default 200 (or more, if
	// MinLimit or InitialLimit is set higher).
	MaxLimit int
	// Step is how much the limit grows after an Interval in which the
	// limiter was busy and nothing behind it queued beyond WaitTarget.
	// Default MinLimit.
	Step int

	// QueueSize is how many requests may wait for a slot at once, over all
	// priorities. Default 50; -1 disables the queue, so that a request that
	// finds no free slot is shed at once.
	QueueSize int
	// MaxWait is the longest a request waits in the queue before it is
	// shed. Default 50ms.
	MaxWait time.Duration
	// Target is the queueing delay CoDel accepts in the limiter's own queue:
	// when no request got through it within Target during a whole Interval,
	// the queue is standing, and arrivals that find no free slot are shed at
	// once instead of queued until it has drained. Default 5ms. Keep it well
	// below MaxWait, or the rule never fires.
	Target time.Duration
	// Interval is the span over which the limit is recomputed, CoDel's
	// observation interval, and the shortest time between two cuts for
	// Timeout outcomes. Default 100ms.
	Interval time.Duration

	// WaitTarget is the wait for the scarce resource behind the limiter
	// (reported with ObserveWait) that still counts as no queue: when every
	// wait reported over an Interval exceeds it, the resource has a standing
	// queue and the limit shrinks. Default 5ms.
	WaitTarget time.Duration
	// PollShare is the fraction of the limit, and of the queue, that
	// PriorityPoll may use (at least one slot of each). Default 0.5; in (0, 1].
	PollShare float64

	// Now tells the time; tests inject a fake clock. It is used for every
	// measurement (latency, queue sojourn, intervals). Waiting in the queue
	// uses real timers for MaxWait. Default time.Now.
	Now func() time.Time
}

// Defaults, documented on Options.
const (
	defaultMinLimit   = 4
	defaultMaxLimit   = 200
	defaultQueueSize  = 50
	defaultMaxWait    = 50 * time.Millisecond
	defaultTarget     = 5 * time.Millisecond
	defaultInterval   = 100 * time.Millisecond
	defaultWaitTarget = 5 * time.Millisecond
	defaultPollShare  = 0.5
)

// Validate reports whether o is usable, naming every field that is not.
// Zero fields are fine: they select the defaults.
func (o Options) Validate() error {
	var errs []error
	for _, f := range []struct {
		name  string
		value int
	}{
		{"InitialLimit", o.InitialLimit},
		{"MinLimit", o.MinLimit},
		{"MaxLimit", o.MaxLimit},
		{"Step", o.Step},
	} {
		if f.value < 0 {
			errs = append(errs, fmt.Errorf("loadshed: %s must not be negative, got %d", f.name, f.value))
		}
	}
	if o.QueueSize < -1 {
		errs = append(errs, fmt.Errorf("loadshed: QueueSize must be -1 (no queue), 0 (default) or positive, got %d", o.QueueSize))
	}
	for _, f := range []struct {
		name  string
		value time.Duration
	}{
		{"MaxWait", o.MaxWait},
		{"Target", o.Target},
		{"Interval", o.Interval},
		{"WaitTarget", o.WaitTarget},
	} {
		if f.value < 0 {
			errs = append(errs, fmt.Errorf("loadshed: %s must not be negative, got %s", f.name, f.value))
		}
	}
	if s := o.PollShare; math.IsNaN(s) || s < 0 || s > 1 {
		errs = append(errs, fmt.Errorf("loadshed: PollShare must be in (0, 1] (or 0 for the default), got %v", s))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Defaults never conflict with explicit values, so a conflict here is
	// between values the caller set.
	r := o.withDefaults()
	if r.MinLimit > r.MaxLimit {
		return fmt.Errorf("loadshed: MinLimit %d exceeds MaxLimit %d", r.MinLimit, r.MaxLimit)
	}
	if r.InitialLimit < r.MinLimit || r.InitialLimit > r.MaxLimit {
		return fmt.Errorf("loadshed: InitialLimit %d is outside [MinLimit %d, MaxLimit %d]", r.InitialLimit, r.MinLimit, r.MaxLimit)
	}
	return nil
}

// withDefaults fills in the zero fields. QueueSize -1 becomes 0: no queue.
func (o Options) withDefaults() Options {
	if o.MaxLimit == 0 {
		o.MaxLimit = max(defaultMaxLimit, o.MinLimit, o.InitialLimit)
	}
	if o.MinLimit == 0 {
		o.MinLimit = min(defaultMinLimit, o.MaxLimit)
		if o.InitialLimit > 0 {
			o.MinLimit = min(o.MinLimit, o.InitialLimit)
		}
	}
	if o.InitialLimit == 0 {
		o.InitialLimit = o.MaxLimit
	}
	if o.Step == 0 {
		o.Step = max(1, o.MinLimit)
	}
	switch o.QueueSize {
	case 0:
		o.QueueSize = defaultQueueSize
	case -1:
		o.QueueSize = 0
	}
	if o.MaxWait == 0 {
		o.MaxWait = defaultMaxWait
	}
	if o.Target == 0 {
		o.Target = defaultTarget
	}
	if o.Interval == 0 {
		o.Interval = defaultInterval
	}
	if o.WaitTarget == 0 {
		o.WaitTarget = defaultWaitTarget
	}
	if o.PollShare == 0 {
		o.PollShare = defaultPollShare
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
