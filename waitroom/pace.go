package waitroom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/flashline/flashline"
)

// The pacer moves each open waiting room's watermark forward, tick by tick,
// at the pace the purchase path can absorb. One instance at a time leads it
// (Store.LeadPacer: a lock held by a database session the leader keeps). If
// that session or the process dies, the leadership goes with it and another
// instance takes over within LeaderRetry. Even two leaders at once (a
// leadership lost without the old leader noticing yet) cannot move a
// watermark back: PacerStore.Advance only ever raises it.

// Pacing constants (see Step).
const (
	// ServiceTime is the time the purchase path is assumed to take per
	// transaction until the limiter has measured its latency.
	ServiceTime = 100 * time.Millisecond
	// minLatency keeps a lucky window of very fast requests from opening the
	// gates wide.
	minLatency = 5 * time.Millisecond
	// OutstandingFactor and OutstandingFloor bound the admissions given out
	// but not yet used: at most OutstandingFactor × the units left +
	// OutstandingFloor. Admitting more would only make people wait at the
	// checkout for units that are not there.
	OutstandingFactor = 2
	OutstandingFloor  = 8
)

// PaceInput is what the pacer knows of one sale at one tick.
type PaceInput struct {
	// Headroom is the leader's limiter: Limit − InFlight (may be ≤ 0 when
	// the purchase path is saturated).
	Headroom int64
	// Batch is the most reservations the purchase path completes per
	// latency: --max-batch × --batches-in-flight (each transaction in
	// flight carries up to a full batch of one sale's reservations, so a
	// free slot of the limiter is not a reservation per latency). 0: no
	// bound but Headroom.
	Batch int64
	// Available is the units left in the sale.
	Available int64
	// Latency is the purchase path's recent latency as the leader's limiter
	// measured it (0: not yet measured, ServiceTime is assumed).
	Latency time.Duration
	// Outstanding estimates the admissions not yet used for a reservation.
	Outstanding int64
	// Waiting is the ranks handed out and not yet admitted: there is no point
	// moving the watermark past the last of them.
	Waiting int64
	// Tick is the pacer's period.
	Tick time.Duration
}

// Capacity is how many reservations the purchase path can absorb in one
// tick: ceil(min(max(Headroom, 0), Batch) × Tick / Latency), the free part
// of the path at the rate its measured latency allows (Batch bounds it to
// what the coalescer completes per latency when Batch > 0).
func (in PaceInput) Capacity() int64 {
	if in.Tick <= 0 {
		return 0
	}
	latency := in.Latency
	if latency <= 0 {
		latency = ServiceTime
	}
	latency = max(latency, minLatency)
	slots := max(in.Headroom, 0)
	if in.Batch > 0 {
		slots = min(slots, in.Batch)
	}
	return int64(math.Ceil(float64(slots) * float64(in.Tick) / float64(latency)))
}

// Step is how far the watermark moves this tick:
//
//	min(Capacity,
//	    OutstandingFactor × Available + OutstandingFloor − Outstanding,
//	    Waiting)
//
// and 0 when nothing is left to sell or nobody waits. When nothing is
// outstanding it is at least 1, so a room never stalls while stock remains,
// even with the purchase path saturated by others.
func Step(in PaceInput) int64 {
	if in.Available <= 0 || in.Waiting <= 0 || in.Tick <= 0 {
		return 0
	}
	outstanding := max(in.Outstanding, 0)
	room := OutstandingFactor*in.Available + OutstandingFloor - outstanding
	if room <= 0 {
		return 0
	}
	capacity := in.Capacity()
	if outstanding == 0 {
		capacity = max(capacity, 1)
	}
	return min(capacity, room, in.Waiting)
}

// RunPacer takes part in pacing until ctx is done: it tries to lead every
// LeaderRetry and, while it leads, ticks every Tick. An instance that knows
// of no waiting room that is not closed does not even try (no query).
func (r *Room) RunPacer(ctx context.Context) error {
	for {
		if r.wantsPacer() {
			if err := r.tryLead(ctx); err != nil && ctx.Err() == nil {
				r.opts.Logger.WarnContext(ctx, "waitroom: pacer", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.opts.LeaderRetry):
		}
	}
}

// wantsPacer reports whether any waiting room this instance knows of may
// need pacing.
func (r *Room) wantsPacer() bool {
	for _, s := range r.rooms() {
		if s.State != flashline.StateClosed {
			return true
		}
	}
	return false
}

// tryLead leads the pacer if no instance does, until ctx is done or the
// leader's session fails.
func (r *Room) tryLead(ctx context.Context) error {
	_, err := r.store.LeadPacer(ctx, func(ctx context.Context, db flashline.PacerStore) error {
		r.leader.Store(true)
		defer r.leader.Store(false)
		r.opts.Logger.InfoContext(ctx, "waitroom: pacer leading")
		return r.lead(ctx, db)
	})
	return err
}

// lead ticks until ctx is done (nil) or the leader's session fails.
func (r *Room) lead(ctx context.Context, db flashline.PacerStore) error {
	ticker := time.NewTicker(r.opts.Tick)
	defer ticker.Stop()
	p := newPacerState()
	ping := func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return db.Ping(ctx)
	}
	lastCheck := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if !r.anyOpen() {
			// Idle: still make sure, every LeaderRetry, that the session
			// holding the leadership is alive, so that a leader whose
			// connection died steps down even while there is nothing to
			// pace.
			if time.Since(lastCheck) >= r.opts.LeaderRetry {
				if err := ping(); err != nil && ctx.Err() == nil {
					return fmt.Errorf("leader's session: %w", err)
				}
				lastCheck = time.Now()
			}
			continue
		}
		tickCtx, cancel := context.WithTimeout(ctx, max(5*r.opts.Tick, 2*time.Second))
		err := r.tick(tickCtx, db, p)
		cancel()
		lastCheck = time.Now()
		if err == nil || ctx.Err() != nil {
			continue
		}
		// A failed statement is not a lost leadership; a dead session is.
		if pingErr := ping(); pingErr != nil {
			return fmt.Errorf("leader's session: %w (tick: %v)", pingErr, err)
		}
		r.opts.Logger.WarnContext(ctx, "waitroom: pacer tick", "err", err)
	}
}

// anyOpen reports whether a waiting room this instance knows of has opened
// (with a second of slack for clock skew), is not paused or closed and has
// stock; otherwise a tick would find nothing to do and is skipped.
func (r *Room) anyOpen() bool {
	soon := r.opts.Now().Add(time.Second)
	for _, s := range r.rooms() {
		if !s.SoldOut && (s.State == flashline.StateOpen || s.State == flashline.StateScheduled) &&
			s.OpensAt != nil && !s.OpensAt.After(soon) {
			return true
		}
	}
	return false
}

// pacerState is what a leader remembers between ticks, per sale: the recent
// watermarks (to tell admissions given out lately from ones long abandoned)
// and the pace. A new leader starts with none, and is conservative until it
// has watched for a window.
type pacerState struct {
	started time.Time
	rooms   map[string]*roomHistory
}

type roomHistory struct {
	marks []mark // oldest first
	pace  float64
}

type mark struct {
	at        time.Time
	watermark int64
}

func newPacerState() *pacerState {
	return &pacerState{rooms: map[string]*roomHistory{}}
}

// outstanding estimates the admissions given out and not used yet: those
// not matched by a reservation made with an admission token (admitted −
// reserved), but only among the ones given out within window (UseWindow;
// VariantUseWindow for a sale with variants);
// older ones were most likely abandoned. Ranks nobody holds (gaps in the
// draw, positions whose lease's answer was lost) count as outstanding until
// they age out.
func (h *roomHistory) outstanding(now time.Time, started time.Time, admitted, reserved int64, window time.Duration) int64 {
	total := admitted - reserved
	cutoff := now.Add(-window)
	recent := admitted
	if !started.After(cutoff) {
		var before int64
		for _, m := range h.marks {
			if m.at.After(cutoff) {
				break
			}
			before = m.watermark
		}
		recent = admitted - before
	}
	return max(0, min(total, recent))
}

func (h *roomHistory) record(now time.Time, watermark int64, window time.Duration) {
	h.marks = append(h.marks, mark{at: now, watermark: watermark})
	// Keep one mark at or before the cutoff, and everything after.
	cutoff := now.Add(-window)
	drop := 0
	for drop+1 < len(h.marks) && !h.marks[drop+1].at.After(cutoff) {
		drop++
	}
	h.marks = h.marks[drop:]
}

// tick advances every open waiting room by its Step. It is safe to run on
// any number of instances at once (PacerStore.Advance never moves a watermark
// back).
func (r *Room) tick(ctx context.Context, db flashline.PacerStore, p *pacerState) error {
	rows, err := db.PaceInputs(ctx)
	if err != nil {
		return err
	}
	now := r.opts.Now()
	if p.started.IsZero() {
		p.started = now
	}
	headroom, latency := int64(0), time.Duration(0)
	if r.capacity != nil {
		headroom, latency = r.capacity.Limit()-r.capacity.InFlight(), r.capacity.Latency()
	}
	var errs error
	for _, row := range rows {
		h := p.rooms[row.SaleID]
		if h == nil {
			h = &roomHistory{pace: row.Pace}
			p.rooms[row.SaleID] = h
		}
		if row.State == flashline.StatePaused || row.Held {
			continue // nobody is let in while a sale is paused or its queue held
		}
		window := r.opts.UseWindow
		if row.Variants {
			window = r.opts.VariantUseWindow // its shoppers choose first
		}
		step := Step(PaceInput{
			Headroom:    headroom,
			Batch:       int64(r.opts.Batch),
			Latency:     latency,
			Available:   row.Available,
			Outstanding: h.outstanding(now, p.started, row.AdmittedThrough, row.AdmittedReserved, window),
			Waiting:     lastRank(row) - row.AdmittedThrough,
			Tick:        r.opts.Tick,
		})
		// The pace, for estimates: ranks admitted per second, smoothed over
		// about a second.
		h.pace = 0.8*h.pace + 0.2*float64(step)/r.opts.Tick.Seconds()
		watermark := row.AdmittedThrough
		if step > 0 || !row.PreopenFrozen {
			adv, moved, err := db.Advance(ctx, row.SaleID, row.AdmittedThrough+step, h.pace)
			switch {
			case err != nil:
				errs = errors.Join(errs, err)
				continue
			case moved:
				watermark = adv
			}
		}
		h.record(now, watermark, window)
	}
	return errs
}

// lastRank is the rank of the last position handed out in row's room: once
// the pre-open crowd is frozen, post-open positions rank right after it. A
// crowd frozen at 0 still has rank 1, where any pre-open ticket not counted
// in time ranks (Rank draws among at least one).
func lastRank(row flashline.PacerRoom) int64 {
	if !row.PreopenFrozen {
		return max(row.NextPosition-1, 1)
	}
	return max(row.PreopenCount, 1) + row.NextPosition - 1 - row.PreopenPositions
}
