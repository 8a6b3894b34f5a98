package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/flashline/flashline/internal/dbsqlc"
)

// StockChange is one row of stock_audit: a change to a stock row and the
// session that made it.
type StockChange struct {
	AuditID         int64
	Bucket          int
	Old, New        *int32 // nil: the row did not exist before / after
	XactID          int64
	ApplicationName string
	DBUser          string
	BackendPID      int
	ClientAddr      string
	StatementTag    string
	Query           string
	ChangedAt       time.Time
	// Unledgered: no ledger row of its transaction records it.
	Unledgered bool
}

// Delta is the change to the quantity.
func (c StockChange) Delta() int {
	var o, n int32
	if c.Old != nil {
		o = *c.Old
	}
	if c.New != nil {
		n = *c.New
	}
	return int(n - o)
}

// UnledgeredChange is a transaction's net change to a bucket that its ledger
// rows do not account for.
type UnledgeredChange struct {
	FirstAuditID int64
	ChangedAt    time.Time
	XactID       int64
	Bucket       int
	AuditDelta   int64
	LedgerDelta  int64
}

// AffectedReservation is a reservation made after an incident's first bad
// change.
type AffectedReservation struct {
	ReservationID, CustomerID, State, OrderID string
	Quantity                                  int
	CreatedAt                                 time.Time
}

// IncidentSummary is one line of the incident list.
type IncidentSummary struct {
	ID                   int64
	SaleID, Kind, Detail string
	CreatedAt            time.Time
}

// IncidentReport is `flashline incident show`: the incident as the
// invariant job recorded it, the stock changes no ledger row accounts for
// (the first is where it started, and names who wrote), the audit rows
// around it, and the reservations made after it.
type IncidentReport struct {
	IncidentSummary
	InitialStock                               int
	Available, Pending, Confirmed, LedgerTotal int64
	// Unledgered are the sale's stock changes with no ledger row, up to the
	// incident (and after the sale's previous incident, if any).
	Unledgered []UnledgeredChange
	// FirstBad is the first of them (nil when none: then the ledger or the
	// reservations were changed, not the stock, and Audit holds the sale's
	// last stock changes before the incident).
	FirstBad *StockChange
	Audit    []StockChange
	// Reservations made at or after FirstBad (at most maxAffected), and
	// how many there are in all.
	Reservations      []AffectedReservation
	ReservationsTotal int
}

const (
	auditBefore, auditAfter = 5, 20
	maxAffected             = 200
)

// Incidents lists the latest incidents, of saleID or ("") of every sale.
func (s *Store) Incidents(ctx context.Context, saleID string) ([]IncidentSummary, error) {
	rows, err := dbsqlc.New(s.admin).IncidentList(ctx, dbsqlc.IncidentListParams{SaleID: optional(saleID)})
	if err != nil {
		return nil, fmt.Errorf("incidents: %w", translate(err))
	}
	out := make([]IncidentSummary, len(rows))
	for i, r := range rows {
		out[i] = IncidentSummary{ID: r.IncidentID, SaleID: r.SaleID, Kind: r.Kind, Detail: r.Detail, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// ReadIncident reads incident id with what explains it (IncidentReport). It
// only reads.
func (s *Store) ReadIncident(ctx context.Context, id int64) (IncidentReport, error) {
	q := dbsqlc.New(s.admin)
	inc, err := q.IncidentGet(ctx, dbsqlc.IncidentGetParams{IncidentID: id})
	if err != nil {
		return IncidentReport{}, fmt.Errorf("incident %d: %w", id, translate(err))
	}
	rep := IncidentReport{
		IncidentSummary: IncidentSummary{ID: inc.IncidentID, SaleID: inc.SaleID, Kind: inc.Kind, Detail: inc.Detail, CreatedAt: inc.CreatedAt},
		InitialStock:    int(inc.InitialStock),
		Available:       inc.Available, Pending: inc.Pending, Confirmed: inc.Confirmed, LedgerTotal: inc.LedgerTotal,
	}
	// The window: after the sale's previous incident, up to this one.
	var after time.Time
	all, err := s.Incidents(ctx, inc.SaleID)
	if err != nil {
		return rep, err
	}
	for _, o := range all {
		if o.ID != inc.IncidentID && o.CreatedAt.Before(inc.CreatedAt) && o.CreatedAt.After(after) {
			after = o.CreatedAt
		}
	}
	unledgered, err := q.StockAuditUnledgered(ctx, dbsqlc.StockAuditUnledgeredParams{SaleID: inc.SaleID})
	if err != nil {
		return rep, fmt.Errorf("incident %d: audit: %w", id, translate(err))
	}
	bad := map[[2]int64]bool{}
	for _, u := range unledgered {
		bad[[2]int64{u.XactID, int64(u.Bucket)}] = true
		if u.ChangedAt.After(inc.CreatedAt) || !u.ChangedAt.After(after) {
			continue
		}
		rep.Unledgered = append(rep.Unledgered, UnledgeredChange{
			FirstAuditID: u.FirstAuditID, ChangedAt: u.ChangedAt, XactID: u.XactID, Bucket: int(u.Bucket),
			AuditDelta: u.AuditDelta, LedgerDelta: u.LedgerDelta,
		})
	}
	var audit []StockChange
	if len(rep.Unledgered) > 0 {
		rows, err := q.StockAuditAround(ctx, dbsqlc.StockAuditAroundParams{
			SaleID: inc.SaleID, AroundID: rep.Unledgered[0].FirstAuditID, Before: auditBefore, After: auditAfter,
		})
		if err != nil {
			return rep, fmt.Errorf("incident %d: audit: %w", id, translate(err))
		}
		for _, r := range rows {
			audit = append(audit, stockChange(r.AuditID, r.Bucket, r.OldQuantity, r.NewQuantity, r.XactID, r.ApplicationName, r.DbUser, r.BackendPid, r.ClientAddr, r.StatementTag, r.Query, r.ChangedAt))
		}
	} else {
		rows, err := q.StockAuditLatest(ctx, dbsqlc.StockAuditLatestParams{SaleID: inc.SaleID, Until: inc.CreatedAt, MaxRows: auditAfter})
		if err != nil {
			return rep, fmt.Errorf("incident %d: audit: %w", id, translate(err))
		}
		for _, r := range rows {
			audit = append(audit, stockChange(r.AuditID, r.Bucket, r.OldQuantity, r.NewQuantity, r.XactID, r.ApplicationName, r.DbUser, r.BackendPid, r.ClientAddr, r.StatementTag, r.Query, r.ChangedAt))
		}
	}
	for i := range audit {
		audit[i].Unledgered = bad[[2]int64{audit[i].XactID, int64(audit[i].Bucket)}]
		if len(rep.Unledgered) > 0 && audit[i].AuditID == rep.Unledgered[0].FirstAuditID {
			c := audit[i]
			rep.FirstBad = &c
		}
	}
	rep.Audit = audit
	if rep.FirstBad == nil {
		return rep, nil
	}
	rows, err := q.ReservationsSince(ctx, dbsqlc.ReservationsSinceParams{SaleID: inc.SaleID, Since: rep.FirstBad.ChangedAt, MaxRows: maxAffected})
	if err != nil {
		return rep, fmt.Errorf("incident %d: reservations: %w", id, translate(err))
	}
	for _, r := range rows {
		rep.ReservationsTotal = int(r.Total)
		rep.Reservations = append(rep.Reservations, AffectedReservation{
			ReservationID: r.ReservationID, CustomerID: r.CustomerID, State: r.State, OrderID: deref(r.OrderID),
			Quantity: int(r.Quantity), CreatedAt: r.CreatedAt,
		})
	}
	return rep, nil
}

func stockChange(id int64, bucket int32, old, new *int32, xact int64, app, user string, pid int32, addr, tag, query string, at time.Time) StockChange {
	return StockChange{
		AuditID: id, Bucket: int(bucket), Old: old, New: new, XactID: xact, ApplicationName: app, DBUser: user,
		BackendPID: int(pid), ClientAddr: addr, StatementTag: tag, Query: query, ChangedAt: at,
	}
}
