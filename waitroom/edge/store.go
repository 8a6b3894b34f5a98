package edge

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// The Client as the edge's sale cache's source (flashline.FactSource: the
// document it holds) and its waiting room's store (flashline.RoomStore:
// leases and ticket counts through the origins, none of the controls).

// SaleFacts is flashline.FactSource's: the waiting rooms of the document held,
// or an error once it has expired (the cache's entries then go stale).
func (e *Client) SaleFacts(_ context.Context, saleID string) ([]flashline.SaleFacts, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.fresh() {
		return nil, fmt.Errorf("edge: no current watermarks from any origin: %w", flashline.ErrUnavailable)
	}
	dbNow := e.doc.DBNow.Add(e.now().Sub(e.received))
	var out []flashline.SaleFacts
	for _, s := range e.doc.Sales {
		if saleID != "" && s.ID != saleID {
			continue
		}
		out = append(out, flashline.SaleFacts{
			ID: s.ID, State: s.State, OpensAt: s.OpensAt, Admission: flashline.AdmissionWaitingRoom,
			SoldOut: s.SoldOut, Available: s.Available, PendingHolds: s.PendingHolds, DBNow: dbNow,
			Room: flashline.RoomFacts{
				Fairness: s.Fairness, ChallengeBits: s.ChallengeBits, MinAccountAgeSeconds: s.MinAccountAgeSeconds,
				DrawSeed: e.seeds[s.ID], NextPosition: s.NextPosition,
				PreopenCount: s.PreopenCount, PreopenPositions: s.PreopenPositions, PreopenTickets: s.PreopenTickets,
				Held: s.Held, Broadcast: s.Message, AdmittedThrough: s.AdmittedThrough, Pace: s.Pace,
				FinalSeed: s.FinalSeed, Beacon: s.Beacon, BeaconRound: s.BeaconRound,
			},
			Variants: variantFacts(s.Variants),
		})
	}
	return out, nil
}

// SaleCustomers is flashline.FactSource's: an edge serves no purchase path, so
// it keeps no holders.
func (e *Client) SaleCustomers(context.Context, string) ([]string, error) { return nil, nil }

// StockVersions is flashline.FactSource's: an edge serves no purchase path,
// and has no refusal to confirm.
func (e *Client) StockVersions(context.Context, []string) (map[string]string, error) {
	return nil, errors.New("edge: no purchase path, no stock version")
}

// Listen is flashline.FactSource's: changed("") is called after every document
// taken, until ctx is done.
func (e *Client) Listen(ctx context.Context, changed func(saleID string)) error {
	e.mu.Lock()
	e.changed = changed
	e.mu.Unlock()
	<-ctx.Done()
	e.mu.Lock()
	e.changed = nil
	e.mu.Unlock()
	return nil
}

// LeasePositions is flashline.RoomStore's: the block is leased by an origin (POST
// /edge/lease, one request per block). preopenTickets join this edge's
// totals. No origin answers: ErrUnavailable.
func (e *Client) LeasePositions(ctx context.Context, saleID string, n, preopenTickets int64) (int64, bool, error) {
	if preopenTickets > 0 {
		_ = e.CountTickets(ctx, saleID, preopenTickets)
	}
	token := e.keys.SignEdgeLease(roomtoken.EdgeLease{Edge: e.opts.ID, Sale: saleID, N: n}, e.dbNow())
	e.mu.Lock()
	first := e.good
	e.mu.Unlock()
	var errs error
	for i := range e.opts.Origins {
		origin := e.opts.Origins[(first+i)%len(e.opts.Origins)]
		var a roomtoken.LeaseAnswer
		if err := e.post(ctx, origin+"/edge/lease", map[string]string{"request": token}, &a); err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		if a.First < 1 {
			return 0, false, fmt.Errorf("edge lease from %s: first position %d: %w", origin, a.First, flashline.ErrUnavailable)
		}
		return a.First, a.PreOpen, nil
	}
	return 0, false, errors.Join(flashline.ErrUnavailable, errs)
}

// CountTickets is flashline.RoomStore's: the tickets join this edge's totals, which every
// report carries.
func (e *Client) CountTickets(_ context.Context, saleID string, n int64) error {
	e.mu.Lock()
	e.totals[saleID] += n
	e.mu.Unlock()
	return nil
}

// AddHolders is flashline.RoomStore's: the holders join those the next
// reports carry (in batches, until an origin says it wrote them, which it
// does before the room's crowd is committed). A room whose crowd the
// document says is frozen: flashline.ErrCrowdCommitted. More than the edge
// keeps (maxHolders): ErrUnavailable, nothing kept.
func (e *Client) AddHolders(_ context.Context, saleID string, customers []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.doc.Sales {
		if s.ID == saleID && s.PreopenCount >= 0 {
			return fmt.Errorf("edge: holders of sale %s: %w", saleID, flashline.ErrCrowdCommitted)
		}
	}
	if e.nHolders+len(customers) > maxHolders {
		return fmt.Errorf("edge: %d pre-open holders wait for an origin: %w", e.nHolders, flashline.ErrUnavailable)
	}
	m := e.holders[saleID]
	if m == nil {
		m = map[string]struct{}{}
		e.holders[saleID] = m
	}
	for _, c := range customers {
		if _, ok := m[c]; !ok {
			m[c] = struct{}{}
			e.nHolders++
		}
	}
	return nil
}

// RecordEdgeTickets is flashline.RoomStore's: an edge hears no other edge's reports.
func (e *Client) RecordEdgeTickets(context.Context, string, map[string]int64) error { return errEdge }

// errEdge refuses what only an instance with the database does.
var errEdge = errors.New("waitroom: an edge has no database: the queue controls are an origin's")

// SetQueueHeld is flashline.RoomStore's: not on an edge.
func (e *Client) SetQueueHeld(context.Context, string, bool, string, string) error { return errEdge }

// SetBroadcast is flashline.RoomStore's: not on an edge.
func (e *Client) SetBroadcast(context.Context, string, string, string) error { return errEdge }

// LeadPacer is flashline.RoomStore's: an edge never leads the pacer.
func (e *Client) LeadPacer(context.Context, func(context.Context, flashline.PacerStore) error) (bool, error) {
	return false, nil
}

var (
	_ flashline.FactSource = (*Client)(nil)
	_ flashline.RoomStore  = (*Client)(nil)
)
