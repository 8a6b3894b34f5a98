package waitroom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// The origin's side of the edges (package edge is the edge's; roomtoken
// signs and verifies what passes between them): the watermarks document
// this instance publishes, the edges' reports of their pre-open tickets,
// and their leases of positions.

// maxReportedTickets bounds one report's count for one sale.
const maxReportedTickets = 1 << 30

// edgeTally is what an origin has heard of the edges' pre-open tickets:
// each edge's total per sale, as its latest report said. The origin adds it
// to the room's own count (Room.withEdges) in what it answers and
// publishes, and writes it to the database only at the open (flushEdges),
// for whichever instance freezes the crowd.
type edgeTally struct {
	mu      sync.Mutex
	totals  map[string]map[string]int64 // sale id → edge id → tickets
	version map[string]int64            // sale id → changes to its totals
	written map[string]int64            // sale id → the version last written
}

// maxEdges bounds the edges an origin counts per sale: a report from one
// more is not counted.
const maxEdges = 4096

// set records edge's total n of pre-open tickets in saleID (a total only
// grows: an edge restarted under the same id counts from 0 again, and its
// earlier tickets still stand).
func (t *edgeTally) set(saleID, edge string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.totals == nil {
		t.totals, t.version, t.written = map[string]map[string]int64{}, map[string]int64{}, map[string]int64{}
	}
	m := t.totals[saleID]
	if m == nil {
		m = map[string]int64{}
		t.totals[saleID] = m
	}
	if old, ok := m[edge]; (ok || len(m) < maxEdges) && n > old {
		m[edge] = n
		t.version[saleID]++
	}
}

// unwritten returns saleID's totals and their version when they changed
// since they were last written (ok false otherwise).
func (t *edgeTally) unwritten(saleID string) (totals map[string]int64, version int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.version[saleID] == t.written[saleID] {
		return nil, 0, false
	}
	return maps.Clone(t.totals[saleID]), t.version[saleID], true
}

// wrote records that saleID's totals of version were written.
func (t *edgeTally) wrote(saleID string, version int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.totals[saleID]; ok {
		t.written[saleID] = version
	}
}

// sum is the edges' pre-open tickets in saleID.
func (t *edgeTally) sum(saleID string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, v := range t.totals[saleID] {
		n += v
	}
	return n
}

// keep forgets the sales for which keep is false.
func (t *edgeTally) keep(keep func(saleID string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.totals {
		if !keep(id) {
			delete(t.totals, id)
			delete(t.version, id)
			delete(t.written, id)
		}
	}
}

// Watermarks is the watermarks document of every waiting room this instance
// knows of (the origin's side of GET /edge/watermarks). It reads nothing:
// the sale cache is kept current by the database's notifications.
func (r *Room) Watermarks() string {
	now := r.opts.Now()
	r.wm.Lock()
	defer r.wm.Unlock()
	if r.wm.doc == "" || now.Sub(r.wm.at) >= watermarksReuse || now.Before(r.wm.at) {
		r.wm.doc, r.wm.at = r.keys.SignWatermarks(r.rooms(), now, r.cache.Now()), now
	}
	return r.wm.doc
}

// watermarksReuse is how long one signed document answers every edge: its
// cost is one signature and a seal per room, whatever the number of edges.
const watermarksReuse = 100 * time.Millisecond

// EdgeSync records an edge's signed report of its pre-open tickets (the
// origin's side of POST /edge/sync): in memory, for the rooms whose
// pre-open crowd is not frozen yet, written at the open (flushEdges). The
// pre-open holders it carries are written at once (AddHolders, one
// statement per sale, harmless when another origin wrote them too);
// written is true when every one of them is written or never will be (its
// room's crowd is committed, or it is no randomized_at_open room this
// instance knows of): the edge then forgets them. Errors:
// ErrAdmissionInvalid for a report that does not verify.
func (r *Room) EdgeSync(ctx context.Context, token string) (written bool, err error) {
	rep, err := r.keys.OpenEdgeReport(token, r.cache.Now())
	if err != nil {
		return false, errors.Join(flashline.ErrAdmissionInvalid, fmt.Errorf("edge report: %w", err))
	}
	if err := roomtoken.CheckEdgeID(rep.Edge); err != nil {
		return false, errors.Join(flashline.ErrAdmissionInvalid, err)
	}
	counting := map[string]bool{} // the rooms whose crowd is not frozen
	drawing := map[string]bool{}  // those of them randomized_at_open
	for _, s := range r.cache.Sales() {
		if s.Admission == flashline.AdmissionWaitingRoom && s.Room.PreopenCount < 0 {
			counting[s.ID] = true
			drawing[s.ID] = s.Room.Fairness == flashline.FairnessRandomizedAtOpen
		}
	}
	if err := checkHolders(rep.Holders); err != nil {
		return false, errors.Join(flashline.ErrAdmissionInvalid, err)
	}
	r.edges.keep(func(saleID string) bool { return counting[saleID] })
	for saleID, n := range rep.Preopen {
		if n > 0 && n <= maxReportedTickets && counting[saleID] {
			r.edges.set(saleID, rep.Edge, n)
		}
	}
	if err := r.edgeQueue(rep); err != nil {
		return false, err
	}
	return r.edgeHolders(ctx, rep.Edge, rep.Holders, drawing), nil
}

// checkHolders checks the holders of a report: at most roomtoken.MaxReportedHolders,
// each a customer id of 1-flashline.MaxCustomerIDLen bytes.
func checkHolders(holders map[string][]string) error {
	n := 0
	for _, cs := range holders {
		n += len(cs)
		for _, c := range cs {
			if c == "" || len(c) > flashline.MaxCustomerIDLen {
				return fmt.Errorf("edge report: a holder is a customer id of 1-%d bytes", flashline.MaxCustomerIDLen)
			}
		}
	}
	if n > roomtoken.MaxReportedHolders {
		return fmt.Errorf("edge report: at most %d holders", roomtoken.MaxReportedHolders)
	}
	return nil
}

// edgeHolders writes an edge's pre-open holders of the rooms drawing
// (randomized_at_open, crowd not frozen by the cache), and reports whether
// all of them are written or never will be: those of a room not drawing,
// or whose crowd the database says is committed (ErrCrowdCommitted: the
// cache had not heard), are dropped, as the origin's own are.
func (r *Room) edgeHolders(ctx context.Context, edge string, holders map[string][]string, drawing map[string]bool) bool {
	written := true
	for saleID, cs := range holders {
		if !drawing[saleID] || len(cs) == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := r.store.AddHolders(wctx, saleID, cs)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, flashline.ErrCrowdCommitted), errors.Is(err, flashline.ErrNoWaitingRoom):
			r.opts.Logger.WarnContext(ctx, "waitroom: an edge's pre-open holders left out of the committed crowd", "edge", edge, "sale_id", saleID, "holders", len(cs), "err", err)
		default:
			written = false
			r.opts.Logger.WarnContext(ctx, "waitroom: record an edge's pre-open holders", "edge", edge, "sale_id", saleID, "holders", len(cs), "err", err)
		}
	}
	return written
}

// maxRunLen bounds the name of an edge's run in its report.
const maxRunLen = 16

// edgeQueue keeps the edge's counts of the lines of the waiting rooms this
// instance knows of, for RunQueuePublisher to write as the rows of this run
// of the edge ("edge/" id "/" run). Counts no instance writes are left out;
// a report without a run carries none (an edge of before the analytics).
func (r *Room) edgeQueue(rep roomtoken.EdgeReport) error {
	if rep.Run == "" {
		return nil
	}
	if len(rep.Run) > maxRunLen || roomtoken.CheckEdgeID(rep.Run) != nil {
		return errors.Join(flashline.ErrAdmissionInvalid, fmt.Errorf("edge report: run must be 1-%d characters of [A-Za-z0-9_-]", maxRunLen))
	}
	rooms := map[string]bool{}
	for _, s := range r.cache.Sales() {
		if s.Admission == flashline.AdmissionWaitingRoom {
			rooms[s.ID] = true
		}
	}
	now := r.opts.Now()
	r.edgeLines.keep(func(saleID string) bool { return rooms[saleID] }, now)
	row := "edge/" + rep.Edge + "/" + rep.Run
	for saleID, raw := range rep.Queue {
		if !rooms[saleID] {
			continue
		}
		c, err := flashline.DecodeQueueCounts(raw)
		if err != nil {
			r.opts.Logger.Warn("waitroom: an edge's counts of a line", "edge", rep.Edge, "sale_id", saleID, "err", err)
			continue
		}
		// Written as read, not as sent: no more than the counts.
		b, err := json.Marshal(c)
		if err != nil {
			continue
		}
		r.edgeLines.set(saleID, row, b, c.Active > 0, rep.SignedAt, now)
	}
	return nil
}

// EdgeLease leases a block of positions to an edge (the origin's side of
// POST /edge/lease), gathered with this instance's own tickets and other
// edges' leases of the same moment into one lease (positions.go). Errors:
// ErrAdmissionInvalid for a request that does not verify, ErrNotFound,
// ErrNoWaitingRoom, flashline.Invalid for a block size out of bounds,
// ErrUnavailable.
func (r *Room) EdgeLease(ctx context.Context, token string) (roomtoken.LeaseAnswer, error) {
	req, err := r.keys.OpenEdgeLease(token, r.cache.Now())
	if err != nil {
		return roomtoken.LeaseAnswer{}, errors.Join(flashline.ErrAdmissionInvalid, fmt.Errorf("edge lease: %w", err))
	}
	if err := roomtoken.CheckEdgeID(req.Edge); err != nil {
		return roomtoken.LeaseAnswer{}, errors.Join(flashline.ErrAdmissionInvalid, err)
	}
	if req.N < 1 || req.N > int64(r.opts.MaxBlock) {
		return roomtoken.LeaseAnswer{}, flashline.Invalid(fmt.Sprintf("a lease is 1-%d positions", r.opts.MaxBlock))
	}
	if _, _, err := r.room(ctx, req.Sale); err != nil {
		return roomtoken.LeaseAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	first, preOpen, err := r.takePositions(ctx, req.Sale, &waiter{n: req.N})
	if err != nil {
		return roomtoken.LeaseAnswer{}, fmt.Errorf("edge lease in sale %s: %w", req.Sale, err)
	}
	return roomtoken.LeaseAnswer{First: first, PreOpen: preOpen}, nil
}

// flushEdges writes what this origin heard of the edges' pre-open tickets
// (RecordEdgeTickets), for each room whose opening time has come by the
// database's clock and whose crowd is not frozen yet, when it has heard
// more since it last wrote: a few statements per origin and room around the
// open, none before it. The crowd is frozen a quarter second after the
// open; an edge reports every 100 ms around it and RunCounts calls this
// every 100 ms, so the edges' last pre-open tickets are written in time.
func (r *Room) flushEdges(ctx context.Context) {
	now := r.cache.Now()
	for _, s := range r.cache.Sales() {
		if s.Admission != flashline.AdmissionWaitingRoom || s.Room.PreopenCount >= 0 || !s.Opened(now) {
			continue
		}
		totals, version, ok := r.edges.unwritten(s.ID)
		if !ok {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := r.store.RecordEdgeTickets(wctx, s.ID, totals)
		cancel()
		if err != nil {
			r.opts.Logger.WarnContext(ctx, "waitroom: record the edges' pre-open tickets", "sale_id", s.ID, "err", err)
			continue
		}
		r.edges.wrote(s.ID, version)
	}
}
