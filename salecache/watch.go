package salecache

import (
	"strings"
	"time"

	"github.com/flashline/flashline"
)

// seen is what changes the answer of every waiter of a sale at once: its
// state, sold out (and whether for good), the queue held, the operator's
// message, each variant's availability (what the status answer tells of
// it: a variant sold out is heard at once, as the sale's is). The watermark, which moves every pacer tick, is not: a waiter
// learns of it at the pace its answers set (PollAfter).
type seen struct {
	state            flashline.SaleState
	soldOut, pending bool
	held             bool
	broadcast        string
	opensAt          time.Time
	variants         string // each variant's availability, in order
}

func waitersSee(s flashline.SaleFacts) seen {
	v := seen{state: s.State, soldOut: s.SoldOut, pending: s.PendingHolds, held: s.Room.Held, broadcast: s.Room.Broadcast}
	if s.OpensAt != nil {
		v.opensAt = *s.OpensAt
	}
	if len(s.Variants) > 0 {
		var b strings.Builder
		for _, vr := range s.Variants {
			b.WriteString(string(vr.Availability()))
			b.WriteByte(',')
		}
		v.variants = b.String()
	}
	return v
}

// Watch returns a channel closed when what every waiter of saleID is told
// changes in memory (see seen): a sale sold out, back with units, paused,
// resumed, held, released, opened, given a message. A waiting client's
// stream (handlers' status stream) waits on it, to hear at once what a poll
// would hear only when it came round.
func (c *Cache) Watch(saleID string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watches == nil {
		c.watches = map[string]chan struct{}{}
	}
	w, ok := c.watches[saleID]
	if !ok {
		w = make(chan struct{})
		c.watches[saleID] = w
	}
	return w
}
