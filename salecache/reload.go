package salecache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// reloader re-reads what it is asked to, coalescing requests made while a
// read runs into the next one: a sale named by a notification, everything
// after a (re)connect and every interval as the fallback for a missed
// notification.
type reloader struct {
	load   func(ctx context.Context, saleID string) error // "": everything
	logger *slog.Logger

	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
	once    sync.Once
}

func (r *reloader) init() {
	r.once.Do(func() {
		r.pending = map[string]bool{}
		r.wake = make(chan struct{}, 1)
	})
}

// request asks for saleID ("": everything) to be read again soon.
func (r *reloader) request(saleID string) {
	r.init()
	r.mu.Lock()
	r.pending[saleID] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run listens, and re-reads everything every interval, until ctx is done.
func (r *reloader) run(ctx context.Context, interval time.Duration, listen func(context.Context, func(string)) error) error {
	r.init()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := listen(ctx, r.request); err != nil && ctx.Err() == nil {
			r.logger.WarnContext(ctx, "salecache: listen", "err", err)
		}
	})
	wg.Go(func() { r.reload(ctx) })
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-ticker.C:
			r.request("")
		}
	}
}

func (r *reloader) reload(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		pending := r.pending
		r.pending = map[string]bool{}
		r.mu.Unlock()
		var err error
		if pending[""] {
			err = r.load(ctx, "")
		} else {
			for id := range pending {
				err = errors.Join(err, r.load(ctx, id))
			}
		}
		if err != nil && ctx.Err() == nil {
			r.logger.WarnContext(ctx, "salecache: reload", "err", err)
		}
	}
}
