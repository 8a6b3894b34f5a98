package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// What the sale cache reads (flashline.FactSource), on the waiting room's
// pool: the cache serves the room's polls, and its reads must never wait
// behind buyers or an admin.

var _ flashline.FactSource = (*Store)(nil)

// SaleFacts reads saleID, or with "" every sale worth keeping in memory.
func (s *Store) SaleFacts(ctx context.Context, saleID string) ([]flashline.SaleFacts, error) {
	var filter *string
	if saleID != "" {
		filter = &saleID
	}
	rows, err := dbsqlc.New(s.room).SaleFacts(ctx, dbsqlc.SaleFactsParams{SaleID: filter})
	if err != nil {
		return nil, fmt.Errorf("sale facts: %w", translate(err))
	}
	out := make([]flashline.SaleFacts, len(rows))
	for i, r := range rows {
		out[i] = flashline.SaleFacts{
			ID:                 r.SaleID,
			State:              flashline.SaleState(r.State),
			OpensAt:            r.OpensAt,
			Admission:          flashline.Admission(r.Admission),
			Gate:               flashline.Gate(r.Gate),
			PerCustomerLimit:   int(r.PerCustomerLimit),
			PerInstrumentLimit: int(r.PerInstrumentLimit),
			SoldOut:            r.SoldOut,
			Available:          r.Available,
			PendingHolds:       r.PendingHolds,
			DBNow:              r.Now,
			StockVersion:       r.StockVersion,
			Title:              r.Title,
			ImageURL:           r.ImageUrl,
			Room: flashline.RoomFacts{
				Fairness:             flashline.Fairness(r.Fairness),
				ChallengeBits:        int(r.ChallengeBits),
				MinAccountAgeSeconds: int(r.MinAccountAgeSeconds),
				DrawSeed:             r.DrawSeed,
				NextPosition:         r.NextPosition,
				PreopenCount:         -1,
				PreopenPositions:     -1,
				PreopenTickets:       r.PreopenTickets,
				Held:                 r.Held,
				Broadcast:            r.Broadcast,
				AdmittedThrough:      r.AdmittedThrough,
				Pace:                 r.PacePerSecond,
				FinalSeed:            r.FinalSeed,
				Beacon:               r.Beacon,
			},
		}
		for j, sku := range r.VariantSkus {
			out[i].Variants = append(out[i].Variants, flashline.VariantFacts{SKU: sku, Title: r.VariantTitles[j],
				InitialStock: int64(r.VariantInitial[j]), Available: r.VariantAvailable[j]})
		}
		if r.PreopenCount != nil {
			out[i].Room.PreopenCount = *r.PreopenCount
		}
		if r.BeaconRound != nil {
			out[i].Room.BeaconRound = uint64(*r.BeaconRound)
		}
		if r.PreopenPositions != nil {
			out[i].Room.PreopenPositions = *r.PreopenPositions
		}
	}
	return out, nil
}

// StockVersions reads the version of each sale's stock
// (SaleFacts.StockVersion), in one statement.
func (s *Store) StockVersions(ctx context.Context, saleIDs []string) (map[string]string, error) {
	rows, err := dbsqlc.New(s.room).StockVersions(ctx, dbsqlc.StockVersionsParams{SaleIds: saleIDs})
	if err != nil {
		return nil, fmt.Errorf("stock versions of %d sales: %w", len(saleIDs), translate(err))
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.SaleID] = r.StockVersion
	}
	return out, nil
}

// SaleCustomers lists the customers who ever held a reservation in the sale.
func (s *Store) SaleCustomers(ctx context.Context, saleID string) ([]string, error) {
	ids, err := dbsqlc.New(s.room).SaleCustomers(ctx, dbsqlc.SaleCustomersParams{SaleID: saleID})
	if err != nil {
		return nil, fmt.Errorf("customers of sale %s: %w", saleID, translate(err))
	}
	return ids, nil
}

// The channels the triggers notify, each with a sale id as its payload:
// flashline_sale_changed (migration 000002: a sale's state or opening time
// changed, a bucket ran out or got stock back) and flashline_waitroom
// (migration 000003: a room's watermark moved, its pre-open count was frozen,
// a room was made).
var changeChannels = []string{"flashline_sale_changed", "flashline_waitroom"}

// Listen holds one connection of its own (made like the session pool's, a
// session that no transaction pooler shares, named flashline-listen)
// LISTENing on the change channels, and calls changed with each
// notification's sale id, and with "" after every (re)connect, when anything
// may have changed meanwhile. It reconnects a second after losing the
// connection, until ctx is done.
func (s *Store) Listen(ctx context.Context, changed func(saleID string)) error {
	listener := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			cfg := s.session.Config().ConnConfig.Copy()
			cfg.RuntimeParams["application_name"] = ListenApplicationName
			return pgx.ConnectConfig(ctx, cfg)
		},
		LogError: func(ctx context.Context, err error) {
			if ctx.Err() == nil {
				s.logger().WarnContext(ctx, "postgres: listener", "err", err)
			}
		},
		ReconnectDelay: time.Second,
	}
	h := notified(changed)
	for _, ch := range changeChannels {
		listener.Handle(ch, h)
	}
	err := listener.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ListenApplicationName names the LISTEN connection in pg_stat_activity:
// every serve process holds exactly one, so counting them counts the
// instances connected to the server.
const ListenApplicationName = "flashline-listen"

type notified func(saleID string)

func (f notified) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	f(n.Payload)
	return nil
}

func (f notified) HandleBacklog(context.Context, string, *pgx.Conn) error {
	f("")
	return nil
}
