package auth

import "time"

// WithClock sets the clock that paces o's refetches of a provider's keys.
func WithClock(o Options, now func() time.Time) Options {
	o.clock = now
	return o
}

// Forgetful makes v remember no verified token, so that a benchmark
// measures the verification itself.
func Forgetful(v *Verifier) { v.verified = nil }
