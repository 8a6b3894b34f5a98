package chaos

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// Row is one reservation as the database holds it after the run.
type Row struct {
	ID, Customer, Key, State string
	// Variant is its variant's SKU (its bucket's: bucket / 64 is the
	// variant's position); "" in a sale without variants.
	Variant                             string
	Qty                                 int
	CreatedAt, ExpiresAt                time.Time
	ConfirmedAt, CancelledAt, ExpiredAt *time.Time
	RestockedAt                         *time.Time
	// Committed is when the row's last change committed
	// (pg_xact_commit_timestamp of its xmin); nil when not tracked.
	Committed *time.Time
}

// Facts is the database's account of the sale after the run.
type Facts struct {
	Initial     int
	Stock       int // sum over buckets
	LedgerSum   int
	Rows        []Row
	Ledger      map[string][]LedgerRow // by reservation id
	Orders      map[string][]Order     // by reservation id
	Incidents   int
	SaleState   string
	InvariantOK bool
	// Variants are each variant's account, in order (none in a sale
	// without variants).
	Variants []VariantFacts
	// Gate is the gate's side of a gated run.
	Gate GateFacts
	// SweepsDone are when the sweeper's jobs were marked done (River's
	// finalized_at of completed flashline_sweep jobs), in order: a sweep's
	// expirations were visible to every session by then (its statements
	// had returned). They bound when an expiration, which no client is
	// answered for, became visible.
	SweepsDone []time.Time
}

// expiryVisible is when an expiration committed at committed was visible
// to every session at the latest: VisibilityLag after its commit, or, when
// the commit's flush stalled longer (a promoted standby's first commits
// under load: found by failover, where a sweep was still invisible 480 ms
// after its commit timestamp), when the sweep that made it was done.
func (f Facts) expiryVisible(committed time.Time) time.Time {
	v := committed.Add(VisibilityLag)
	i := sort.Search(len(f.SweepsDone), func(i int) bool { return !f.SweepsDone[i].Before(committed) })
	if i < len(f.SweepsDone) && f.SweepsDone[i].After(v) {
		v = f.SweepsDone[i]
	}
	return v
}

// VariantFacts is one variant's account after the run: its initial units,
// its stock rows' sum, its buckets' ledger's sum, and the database's own
// verdict on its invariant (the sale_variant_invariant view).
type VariantFacts struct {
	SKU       string
	Initial   int
	Stock     int
	LedgerSum int
	OK        bool
}

// ofVariant is f with only the rows, ledger rows, orders and units owed
// back to the gate of variant sku: the variant's own account, whose
// timeline is the variant's (and, gated, its counter's held-back units).
func (f Facts) ofVariant(sku string) Facts {
	v := f
	v.Rows, v.Ledger, v.Orders = nil, map[string][]LedgerRow{}, map[string][]Order{}
	for _, row := range f.Rows {
		if row.Variant == sku {
			v.Rows = append(v.Rows, row)
			if o, ok := f.Orders[row.ID]; ok {
				v.Orders[row.ID] = o
			}
		}
	}
	for id, ls := range f.Ledger {
		for _, l := range ls {
			if l.Variant == sku {
				v.Ledger[id] = append(v.Ledger[id], l)
			}
		}
	}
	v.Gate.Movements = nil
	for _, m := range f.Gate.Movements {
		if m.Variant == sku {
			v.Gate.Movements = append(v.Gate.Movements, m)
		}
	}
	return v
}

// LedgerRow is one stock_ledger row of a reservation ("" for the initial
// stock), or a batch's row as it counts for one of its reservations, with
// when it committed.
type LedgerRow struct {
	// Variant is the SKU of the variant whose bucket the row is of ("":
	// a sale without variants).
	Variant   string
	Reason    string
	Delta     int
	Committed *time.Time
}

// Order is one orders row, with when it committed.
type Order struct {
	ID        string
	Committed *time.Time
}

// quiesce waits until the sale holds no pending reservation (every hold
// confirmed, cancelled or swept) and the invariant job has had a second
// look, then reads the facts directly (not through a proxy).
func (r *Run) quiesce(ctx context.Context, saleID string) (Facts, error) {
	deadline := time.Now().Add(r.cfg.TTL + 30*time.Second)
	for {
		var pending int
		if err := r.DB.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE sale_id = $1 AND state = 'pending'`, saleID).Scan(&pending); err != nil {
			return Facts{}, err
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.Note("%d holds still pending %s after the load", pending, r.cfg.TTL+30*time.Second)
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	sleep(ctx, 1500*time.Millisecond) // an invariant check or two (1 s interval)
	var g GateFacts
	if r.cfg.Fault.Gate {
		g = r.settleGate(ctx, r.loadEnd)
		g.On = true
		if err := readGateFacts(ctx, r, &g); err != nil {
			return Facts{}, err
		}
	}
	f, err := readFacts(ctx, r, saleID)
	f.Gate = g
	return f, err
}

func readFacts(ctx context.Context, r *Run, saleID string) (Facts, error) {
	f := Facts{Ledger: map[string][]LedgerRow{}, Orders: map[string][]Order{}}
	err := r.DB.QueryRow(ctx, `
SELECT s.initial_stock, s.state,
       (SELECT coalesce(sum(quantity), 0) FROM stock WHERE sale_id = s.sale_id)::int,
       (SELECT coalesce(sum(delta), 0) FROM stock_ledger WHERE sale_id = s.sale_id)::int,
       (SELECT count(*) FROM incidents WHERE sale_id = s.sale_id AND kind NOT LIKE 'gate\_%')::int,
       coalesce((SELECT ok FROM invariant_status WHERE sale_id = s.sale_id), true)
  FROM sales s WHERE s.sale_id = $1`, saleID).Scan(&f.Initial, &f.SaleState, &f.Stock, &f.LedgerSum, &f.Incidents, &f.InvariantOK)
	if err != nil {
		return f, fmt.Errorf("read sale: %w", err)
	}
	rows, err := r.DB.Query(ctx, `
SELECT r.reservation_id, r.customer_id, r.idempotency_key, r.state, r.quantity, coalesce(v.sku, ''), r.created_at, r.expires_at,
       r.confirmed_at, r.cancelled_at, r.expired_at, r.restocked_at, pg_xact_commit_timestamp(r.xmin)
  FROM reservations r
  LEFT JOIN sale_variants v ON v.sale_id = r.sale_id AND v.position = r.bucket / 64
 WHERE r.sale_id = $1 ORDER BY r.created_at`, saleID)
	if err != nil {
		return f, fmt.Errorf("read reservations: %w", err)
	}
	for rows.Next() {
		var row Row
		if err := rows.Scan(&row.ID, &row.Customer, &row.Key, &row.State, &row.Qty, &row.Variant, &row.CreatedAt, &row.ExpiresAt,
			&row.ConfirmedAt, &row.CancelledAt, &row.ExpiredAt, &row.RestockedAt, &row.Committed); err != nil {
			return f, err
		}
		f.Rows = append(f.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return f, err
	}
	// A batch's 'reserve' row (migration 000016) counts once for each
	// reservation it names, with that reservation's units when the row's
	// delta is minus the sum of theirs, and with the row's whole delta
	// otherwise, which the check reports.
	// Each row's variant is its bucket's (bucket / 64, migration 000026).
	lrows, err := r.DB.Query(ctx, `
		SELECT coalesce(l.reservation_id, ''), coalesce(v.sku, ''), l.reason, l.delta, pg_xact_commit_timestamp(l.xmin)
		  FROM stock_ledger l
		  LEFT JOIN sale_variants v ON v.sale_id = l.sale_id AND v.position = l.bucket / 64
		 WHERE l.sale_id = $1 AND l.reservation_ids IS NULL
		UNION ALL
		SELECT u.id, coalesce(v.sku, ''), l.reason, CASE WHEN l.delta = -b.units THEN -coalesce(r.quantity, 0) ELSE l.delta END,
		       pg_xact_commit_timestamp(l.xmin)
		  FROM stock_ledger l
		 CROSS JOIN LATERAL (SELECT coalesce(sum(r.quantity), 0)::int AS units FROM reservations r
		                      WHERE r.reservation_id = ANY (l.reservation_ids)) b
		 CROSS JOIN LATERAL unnest(l.reservation_ids) AS u(id)
		  LEFT JOIN reservations r ON r.reservation_id = u.id
		  LEFT JOIN sale_variants v ON v.sale_id = l.sale_id AND v.position = l.bucket / 64
		 WHERE l.sale_id = $1 AND l.reservation_ids IS NOT NULL`, saleID)
	if err != nil {
		return f, fmt.Errorf("read ledger: %w", err)
	}
	for lrows.Next() {
		var id string
		var l LedgerRow
		if err := lrows.Scan(&id, &l.Variant, &l.Reason, &l.Delta, &l.Committed); err != nil {
			return f, err
		}
		f.Ledger[id] = append(f.Ledger[id], l)
	}
	if err := lrows.Err(); err != nil {
		return f, err
	}
	vrows, err := r.DB.Query(ctx, `SELECT sku, initial_stock, available::int, ledger_total::int, ok
		FROM sale_variant_invariant WHERE sale_id = $1 ORDER BY position`, saleID)
	if err != nil {
		return f, fmt.Errorf("read variants: %w", err)
	}
	for vrows.Next() {
		var v VariantFacts
		if err := vrows.Scan(&v.SKU, &v.Initial, &v.Stock, &v.LedgerSum, &v.OK); err != nil {
			return f, err
		}
		f.Variants = append(f.Variants, v)
	}
	if err := vrows.Err(); err != nil {
		return f, err
	}
	srows, err := r.DB.Query(ctx, `SELECT finalized_at FROM river_job WHERE kind = 'flashline_sweep' AND state = 'completed' AND finalized_at IS NOT NULL ORDER BY finalized_at`)
	if err != nil {
		return f, fmt.Errorf("read sweeps: %w", err)
	}
	if f.SweepsDone, err = pgx.CollectRows(srows, pgx.RowTo[time.Time]); err != nil {
		return f, fmt.Errorf("read sweeps: %w", err)
	}
	orows, err := r.DB.Query(ctx, `SELECT o.reservation_id, o.order_id, pg_xact_commit_timestamp(o.xmin) FROM orders o JOIN reservations r USING (reservation_id) WHERE r.sale_id = $1`, saleID)
	if err != nil {
		return f, fmt.Errorf("read orders: %w", err)
	}
	for orows.Next() {
		var id string
		var order Order
		if err := orows.Scan(&id, &order.ID, &order.Committed); err != nil {
			return f, err
		}
		f.Orders[id] = append(f.Orders[id], order)
	}
	return f, orows.Err()
}
