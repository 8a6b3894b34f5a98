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

// NextRefresh is how long after its last fetch v fetches its provider's
// keys again (the fetch having succeeded).
func NextRefresh(v *Verifier) time.Duration {
	s := v.keys.set.Load()
	return v.keys.refreshAfter(s.keys.Load(), true)
}

// ParseMaxAge is parseMaxAge.
var ParseMaxAge = parseMaxAge
