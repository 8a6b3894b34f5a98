package waitroom

import (
	"sync"
	"time"
)

// ticketLimiter limits the new tickets one customer takes in one sale, in
// memory, per instance: at most max in the minute from the customer's first
// (their own window, not the clock's minute, whose turn let a burst of max
// just before it and max more just after). It needs no database row because
// asking again never improves a place (before the open under
// randomized_at_open the draw is the same; otherwise a new ticket is a
// place at the back): the limit only keeps one customer from flooding the
// line with places, and a customer spread over k instances gets k times the
// limit at most.
//
// The windows are kept in two maps, the current minute's and the one
// before, turned once a minute: a window lasts a minute, so one not written
// for two turns is over, and is forgotten with its map at no cost per
// customer. Beyond maxLimited customers in one map it lets everyone through
// rather than grow (the line stays fair; only its length is less bounded).
type ticketLimiter struct {
	mu        sync.Mutex
	max       int
	turned    time.Time
	cur, prev map[string]ticketWindow
}

// ticketWindow is one customer's window: when it began, and the tickets
// taken in it.
type ticketWindow struct {
	start time.Time
	n     int
}

// maxLimited bounds the customers a ticketLimiter remembers per map.
const maxLimited = 1 << 20

// allow counts one new ticket for key at now: false once its window holds
// max.
func (l *ticketLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil || now.Sub(l.turned) >= time.Minute {
		// Every window in cur was written less than a minute after the
		// last turn; two turns on, it is over.
		l.prev = l.cur
		if now.Sub(l.turned) >= 2*time.Minute {
			l.prev = nil
		}
		l.cur, l.turned = map[string]ticketWindow{}, now
	}
	w, ok := l.cur[key]
	if !ok {
		w, ok = l.prev[key]
	}
	if !ok || now.Sub(w.start) >= time.Minute {
		w = ticketWindow{start: now}
	}
	if w.n >= l.max {
		return false
	}
	if _, mine := l.cur[key]; !mine && len(l.cur) >= maxLimited {
		return true
	}
	w.n++
	l.cur[key] = w
	return true
}
