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
