package waitroom

import (
	"context"
	"sync"
	"time"

	"github.com/flashline/flashline/salecache"
)

// lease is a block of positions [next, end) this instance may hand out for
// one sale.
type lease struct {
	mu       sync.Mutex
	next     int64
	end      int64
	preOpen  bool // leased before the sale opened (by the database's clock)
	takenAt  time.Time
	lastUsed time.Time
	block    int64
}

// takePosition hands out the next position of this instance's lease for the
// sale, leasing a new block when the lease is used up, idle for LeaseIdle,
// older than LeaseMaxAge, or leased before an open this instance now sees.
// The block doubles when a lease was used up quickly and halves when most of
// one went unused, so that a busy sale costs one UPDATE per many tickets and
// a quiet one wastes few positions.
func (r *Room) takePosition(ctx context.Context, s salecache.Sale) (position int64, preOpen bool, err error) {
	r.leaseMu.Lock()
	l := r.leases[s.ID]
	if l == nil {
		l = &lease{block: int64(r.opts.BlockSize)}
		r.leases[s.ID] = l
	}
	r.leaseMu.Unlock()

	l.mu.Lock()
	defer l.mu.Unlock()
	now := r.opts.Now()
	usable := l.next < l.end &&
		now.Sub(l.lastUsed) <= r.opts.LeaseIdle &&
		now.Sub(l.takenAt) <= r.opts.LeaseMaxAge &&
		!(l.preOpen && s.Opened(now))
	if !usable {
		switch {
		case l.end == 0:
		case l.next >= l.end && now.Sub(l.takenAt) < r.opts.LeaseIdle:
			l.block *= 2
		case l.end-l.next > l.block/2:
			l.block /= 2
		}
		l.block = min(max(l.block, 1), int64(r.opts.MaxBlock))
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		first, preOpen, err := r.store.LeasePositions(ctx, s.ID, l.block)
		if err != nil {
			l.next, l.end = 0, 0
			return 0, false, err
		}
		l.next, l.end = first, first+l.block
		l.preOpen = preOpen
		l.takenAt = now
	}
	position = l.next
	l.next++
	l.lastUsed = now
	return position, l.preOpen, nil
}
