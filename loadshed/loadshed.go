// Package loadshed is Flashline's in-process admission limiter: it decides, in
// microseconds and without touching the database, whether a request may enter
// the purchase path or must be turned away with "overloaded". It depends on the
// standard library only.
//
// This first version is a fixed concurrency limit with no queue: at most
// Options.MaxInFlight requests are inside at once, and the rest are refused at
// once, so a flood queues in no one's memory and the database sees a bounded
// number of concurrent transactions.
package loadshed

import (
	"errors"
	"sync/atomic"
)

// Options configure a Limiter.
type Options struct {
	// MaxInFlight is how many requests may be inside at once. Required, > 0.
	MaxInFlight int
}

// Validate reports whether o is usable.
func (o Options) Validate() error {
	if o.MaxInFlight < 1 {
		return errors.New("loadshed: MaxInFlight must be at least 1")
	}
	return nil
}

// Limiter admits or refuses requests. Safe for concurrent use.
type Limiter struct {
	max      int64
	inFlight atomic.Int64
	shed     atomic.Int64
}

// New returns a Limiter.
func New(o Options) (*Limiter, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{max: int64(o.MaxInFlight)}, nil
}

// TryAcquire admits the caller if there is room, and returns a release func to
// call when the request is done. ok=false means shed: answer "overloaded".
func (l *Limiter) TryAcquire() (release func(), ok bool) {
	if l.inFlight.Add(1) > l.max {
		l.inFlight.Add(-1)
		l.shed.Add(1)
		return nil, false
	}
	return l.release, true
}

func (l *Limiter) release() { l.inFlight.Add(-1) }

// InFlight is the number of requests inside now.
func (l *Limiter) InFlight() int64 { return l.inFlight.Load() }

// Limit is the current concurrency limit.
func (l *Limiter) Limit() int64 { return l.max }

// Shed is how many requests have been refused so far.
func (l *Limiter) Shed() int64 { return l.shed.Load() }
