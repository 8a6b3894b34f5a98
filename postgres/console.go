package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// The console's reads (sql/queries/console.sql): the live page's snapshot of
// a sale, one read-only transaction however much it reads, and the report.

// watchRows bounds the incidents and operator actions a snapshot carries.
const (
	watchRows  = 20
	reportRows = 500
)

// Watch reads the live page's snapshot of saleID in one read-only
// transaction: the sale with its counts (the lottery's too), its waiting
// room's crowd, its latest incidents and operator actions. The caller
// (handlers' snapshot) calls it at most once a second per sale.
func (s *Store) Watch(ctx context.Context, saleID string) (flashline.SaleWatch, error) {
	return s.watch(ctx, saleID, watchRows)
}

func (s *Store) watch(ctx context.Context, saleID string, rows int) (flashline.SaleWatch, error) {
	var w flashline.SaleWatch
	err := pgx.BeginTxFunc(ctx, s.admin, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		w, err = readWatch(ctx, s, dbsqlc.New(tx), saleID, rows)
		return err
	})
	if err != nil {
		return flashline.SaleWatch{}, fmt.Errorf("watch sale %s: %w", saleID, translate(err))
	}
	return w, nil
}

func readWatch(ctx context.Context, s *Store, q *dbsqlc.Queries, saleID string, rows int) (flashline.SaleWatch, error) {
	row, err := q.SaleGet(ctx, dbsqlc.SaleGetParams{SaleID: saleID})
	if err != nil {
		return flashline.SaleWatch{}, err
	}
	w := flashline.SaleWatch{Sale: saleFromRow(row), At: row.Now}
	if w.Sale.Admission == flashline.AdmissionLottery {
		l, err := s.lottery(ctx, q, saleID)
		if err != nil {
			return w, err
		}
		if l.Counts, err = lotteryCounts(ctx, q, saleID); err != nil {
			return w, err
		}
		w.Sale.Lottery = &l
	}
	room, err := q.ConsoleRoom(ctx, dbsqlc.ConsoleRoomParams{SaleID: saleID})
	switch {
	case err == nil:
		w.Room = &flashline.RoomCrowd{
			Positions: room.NextPosition - 1, PreopenCount: room.PreopenCount,
			PreopenTickets: room.PreopenTickets + room.EdgeTickets, AdmittedThrough: room.AdmittedThrough,
			PacePerSecond: room.PacePerSecond, Held: room.Held, Message: room.Broadcast,
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return w, err
	}
	incidents, err := q.ConsoleIncidents(ctx, dbsqlc.ConsoleIncidentsParams{SaleID: saleID, MaxRows: int32(rows)})
	if err != nil {
		return w, err
	}
	for _, i := range incidents {
		w.Incidents = append(w.Incidents, flashline.IncidentNote{ID: i.IncidentID, Kind: i.Kind, Detail: i.Detail, At: i.CreatedAt})
	}
	actions, err := q.ConsoleActions(ctx, dbsqlc.ConsoleActionsParams{SaleID: saleID, MaxRows: int32(rows)})
	if err != nil {
		return w, err
	}
	for _, a := range actions {
		w.Actions = append(w.Actions, flashline.OperatorAction{
			ID: a.ActionID, Action: a.Action, ReservationID: deref(a.ReservationID), Operator: a.Operator,
			Detail: a.Detail, Affected: int(a.Affected), At: a.CreatedAt,
		})
	}
	fleet, err := q.ConsoleInstances(ctx, dbsqlc.ConsoleInstancesParams{WithinSeconds: flashline.FleetFresh.Seconds()})
	if err != nil {
		return w, err
	}
	for _, f := range fleet {
		w.Fleet = append(w.Fleet, flashline.InstanceReport{
			Instance: f.Instance, Seconds: f.Seconds, Counts: f.Counts,
			Age: time.Duration(f.AgeSeconds * float64(time.Second)),
		})
	}
	if w.Room != nil {
		queue, err := q.ConsoleQueues(ctx, dbsqlc.ConsoleQueuesParams{SaleID: saleID})
		if err != nil {
			return w, err
		}
		for _, r := range queue {
			w.Queue = append(w.Queue, flashline.QueueReport{
				Instance: r.Instance, Counts: r.Counts, Age: time.Duration(r.AgeSeconds * float64(time.Second)),
			})
		}
	}
	return w, nil
}

// PublishQueue writes instance's counts of the lines of the sales in counts
// (sale id → counts, encoded by the waiting room: flashline.QueueCounts)
// for the console and the report to add up (Watch, Report): one statement,
// at most once a second per instance.
func (s *Store) PublishQueue(ctx context.Context, instance string, counts map[string][]byte) error {
	p := dbsqlc.ConsoleQueuePublishParams{Instance: instance}
	for id, c := range counts {
		p.SaleIds, p.Counts = append(p.SaleIds, id), append(p.Counts, c)
	}
	// The room's pool: the line's own work, which never holds a confirm
	// back (TestPoolsKeepConfirmFree).
	if err := dbsqlc.New(s.room).ConsoleQueuePublish(ctx, p); err != nil {
		return fmt.Errorf("publish the lines of instance %s: %w", instance, translate(err))
	}
	return nil
}

// PublishEdgeQueues writes the edges' counts of the lines this origin
// heard (waitroom's origin.go), each row as of the edge's report: one
// statement, at most once a second per origin; the same report heard by
// several origins changes the row once.
func (s *Store) PublishEdgeQueues(ctx context.Context, rows []flashline.QueueRow) error {
	var p dbsqlc.ConsoleQueuePublishEdgesParams
	for _, r := range rows {
		p.SaleIds, p.Instances, p.Counts = append(p.SaleIds, r.SaleID), append(p.Instances, r.Instance), append(p.Counts, r.Counts)
		p.Ats = append(p.Ats, r.At)
	}
	// The room's pool, as PublishQueue.
	if err := dbsqlc.New(s.room).ConsoleQueuePublishEdges(ctx, p); err != nil {
		return fmt.Errorf("publish the edges' lines: %w", translate(err))
	}
	return nil
}

// PublishAnswers writes instance's reservation answers of its last seconds
// (counts, encoded by the console: handlers/fleet.go) for every instance's
// live page to read (Watch): one statement, at most once a second per
// instance.
func (s *Store) PublishAnswers(ctx context.Context, instance string, seconds float64, counts []byte) error {
	err := dbsqlc.New(s.admin).ConsoleInstancePublish(ctx, dbsqlc.ConsoleInstancePublishParams{Instance: instance, Seconds: seconds, Counts: counts})
	if err != nil {
		return fmt.Errorf("publish the answers of instance %s: %w", instance, translate(err))
	}
	return nil
}

// Report reads the report after saleID's sale, in one read-only
// transaction: the snapshot with up to 500 incidents and operator actions,
// each moment it sold out, its reservations, late payments and voids.
func (s *Store) Report(ctx context.Context, saleID string) (flashline.SaleReport, error) {
	var rep flashline.SaleReport
	err := pgx.BeginTxFunc(ctx, s.admin, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		w, err := readWatch(ctx, s, q, saleID, reportRows)
		if err != nil {
			return err
		}
		rep.SaleWatch = w
		// The report's alone: the console's watch, polled, does not read
		// each variant's sums (a ledger scan per variant).
		if rep.Sale.Variants, err = saleVariants(ctx, q, saleID); err != nil {
			return err
		}
		if rep.SoldOut, err = q.ReportSoldOuts(ctx, dbsqlc.ReportSoldOutsParams{SaleID: saleID, MaxRows: reportRows}); err != nil {
			return err
		}
		f, err := q.ReportFacts(ctx, dbsqlc.ReportFactsParams{SaleID: saleID})
		if err != nil {
			return err
		}
		rep.Reservations, rep.Customers = f.Reservations, f.Customers
		if f.Reservations > 0 {
			rep.FirstAt, rep.LastAt = &f.FirstAt, &f.LastAt
		}
		rep.VoidedOrders, rep.LatePayments, rep.LatePaymentsRefunded = f.VoidedOrders, f.LatePayments, f.LateRefunded
		return nil
	})
	if err != nil {
		return flashline.SaleReport{}, fmt.Errorf("report of sale %s: %w", saleID, translate(err))
	}
	return rep, nil
}
