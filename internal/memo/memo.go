// Package memo remembers what verifying a signed token found, so that a token
// presented again and again (a customer's bearer token on every request, a
// waiting-room ticket on every status poll) is verified once, not on every
// request: HMAC, base64 and JSON decoding were the largest costs of the
// answers that should be cheapest (a sold-out "no", a status poll).
//
// Only tokens that verified are put in, with the time they stop being good,
// and a lookup checks that time against the caller's clock, so a hit gives
// exactly the answer verifying again would. The key is the whole token: a
// client can only add an entry by presenting a token that verifies, that is
// one the service's secret signed. The memo is bounded; when full, an
// arbitrary eighth of it is dropped (Go's map order), which costs the
// dropped tokens one verification each the next time.
package memo

import (
	"sync"
	"time"
)

// DefaultSize is the most entries a Tokens holds unless told otherwise.
const DefaultSize = 1 << 15

// Tokens maps verified tokens to what verifying them found. Safe for
// concurrent use. The zero value is not usable: use New.
type Tokens[T any] struct {
	mu   sync.RWMutex
	m    map[string]entry[T]
	size int
}

type entry[T any] struct {
	v     T
	until time.Time
}

// New returns a memo of at most size tokens (DefaultSize if size <= 0).
func New[T any](size int) *Tokens[T] {
	if size <= 0 {
		size = DefaultSize
	}
	return &Tokens[T]{m: make(map[string]entry[T]), size: size}
}

// Get returns what was found for token, if it is remembered and now is
// before the time it stops being good. A nil memo remembers nothing.
func (t *Tokens[T]) Get(token string, now time.Time) (T, bool) {
	if t == nil {
		var zero T
		return zero, false
	}
	t.mu.RLock()
	e, ok := t.m[token]
	t.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		var zero T
		return zero, false
	}
	return e.v, true
}

// Put remembers v for token until the time until (exclusive).
func (t *Tokens[T]) Put(token string, v T, until time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= t.size {
		drop := max(1, t.size/8)
		for k := range t.m {
			delete(t.m, k)
			if drop--; drop == 0 {
				break
			}
		}
	}
	t.m[token] = entry[T]{v: v, until: until}
}

// Len is how many tokens are remembered now.
func (t *Tokens[T]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
