package auth

import "time"

// WithClock sets the clock that paces o's refetches of a provider's keys.
func WithClock(o Options, now func() time.Time) Options {
	o.clock = now
	return o
}
