package waitroom

import (
	"sync"
	"time"
)

// ticketLimiter limits the new tickets one customer takes in one sale, in
// memory, per instance: a fixed window of a minute, forgotten whole when the
// next one starts. It needs no database row because asking again never
// improves a place (before the open under randomized_at_open the draw is the
// same; otherwise a new ticket is a place at the back): the limit only keeps
// one customer from flooding the line with places, and a customer spread
// over k instances gets k times the limit at most. Beyond maxLimited
// customers in one window it lets everyone through rather than grow (the
// line stays fair; only its length is less bounded).
type ticketLimiter struct {
	mu     sync.Mutex
	max    int
	window time.Time
	hits   map[string]int
}

// maxLimited bounds the customers a ticketLimiter remembers per window.
const maxLimited = 1 << 20

// allow counts one new ticket for key at now: false once the window holds max.
func (l *ticketLimiter) allow(key string, now time.Time) bool {
	w := now.Truncate(time.Minute)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !w.Equal(l.window) || l.hits == nil {
		l.window, l.hits = w, map[string]int{}
	}
	n, ok := l.hits[key]
	if !ok && len(l.hits) >= maxLimited {
		return true
	}
	if n >= l.max {
		return false
	}
	l.hits[key] = n + 1
	return true
}
