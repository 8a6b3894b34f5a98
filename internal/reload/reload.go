// Package reload keeps in-memory copies of database rows current on every
// instance: it LISTENs on channels whose payload names a row (a sale id),
// re-reads what was named, and re-reads everything every interval as the
// fallback for a missed notification. Requests made while a read runs are
// coalesced into the next one. salecache and waitroom are built on it.
package reload

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"
)

// All is the id that asks for everything to be read again.
const All = ""

// Reloader is safe for concurrent use. Set its fields, then call Run.
type Reloader struct {
	// Name starts its log messages ("salecache", "waitroom").
	Name     string
	Pool     *pgxpool.Pool // its connection config is used for the listener
	Channels []string
	// Interval between two re-reads of everything.
	Interval time.Duration
	// Load reads id again (All: everything).
	Load func(ctx context.Context, id string) error
	// Wants, when set, filters notifications (a payload of no interest to
	// this instance) and the periodic re-read (id All: is anything held?).
	Wants  func(channel, id string) bool
	Logger *slog.Logger

	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
	once    sync.Once
}

func (r *Reloader) init() {
	r.once.Do(func() {
		r.pending = map[string]bool{}
		r.wake = make(chan struct{}, 1)
	})
}

// Request asks for id (All: everything) to be read again soon.
func (r *Reloader) Request(id string) {
	r.init()
	r.mu.Lock()
	r.pending[id] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run listens and re-reads until ctx is done.
func (r *Reloader) Run(ctx context.Context) error {
	r.init()
	listener := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			return pgx.ConnectConfig(ctx, r.Pool.Config().ConnConfig.Copy())
		},
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				r.Logger.WarnContext(ctx, r.Name+": listener", "err", err)
			}
		},
		ReconnectDelay: time.Second,
	}
	for _, ch := range r.Channels {
		listener.Handle(ch, handler{r})
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = listener.Listen(ctx) })
	wg.Go(func() { r.reload(ctx) })
	ticker := time.NewTicker(r.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-ticker.C:
			if r.Wants == nil || r.Wants("", All) {
				r.Request(All)
			}
		}
	}
}

// handler receives notifications; a (re)connect means anything may have
// changed meanwhile.
type handler struct{ r *Reloader }

func (h handler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	if h.r.Wants == nil || h.r.Wants(n.Channel, n.Payload) {
		h.r.Request(n.Payload)
	}
	return nil
}

func (h handler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.r.Request(All)
	return nil
}

func (r *Reloader) reload(ctx context.Context) {
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
		if pending[All] {
			err = r.Load(ctx, All)
		} else {
			for id := range pending {
				err = errors.Join(err, r.Load(ctx, id))
			}
		}
		if err != nil && ctx.Err() == nil {
			r.Logger.WarnContext(ctx, r.Name+": reload", "err", err)
		}
	}
}
