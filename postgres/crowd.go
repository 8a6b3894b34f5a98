package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

// The pre-open crowd of a randomized_at_open room, committed at the open
// (flashline.Crowd; the 000024 migration).

// commitCrowd commits saleID's pre-open crowd in the transaction that froze
// it (the room's row locked FOR UPDATE, so every holder written before is
// committed and read, and every later write is refused): the Merkle root of
// the holders' hashed ids, and the final seed their ranks are drawn by. It
// reads every holder once, at the open.
func commitCrowd(ctx context.Context, q *dbsqlc.Queries, saleID string, seed []byte) error {
	holders, err := q.WaitroomHolders(ctx, dbsqlc.WaitroomHoldersParams{SaleID: saleID})
	if err != nil {
		return err
	}
	rs := make([]flashline.Registrant, len(holders))
	for i, h := range holders {
		rs[i] = flashline.RegistrantOf(saleID, h)
	}
	root := flashline.RegistrantsRoot(rs)
	f := flashline.LotteryFinalSeed(saleID, root, nil, seed)
	return q.WaitroomCommitCrowd(ctx, dbsqlc.WaitroomCommitCrowdParams{
		Root: root[:], HoldersCount: int64(len(rs)), FinalSeed: f[:], SaleID: saleID})
}

// AddHolders records customers as holders of pre-open tickets in saleID's
// room, in one statement, unless the room has frozen its crowd:
// flashline.ErrCrowdCommitted then, and nothing is written. No room:
// flashline.ErrNoWaitingRoom.
func (s *Store) AddHolders(ctx context.Context, saleID string, customers []string) error {
	// In one order on every instance: two instances writing the same
	// customers (one shopper sent to both) take the rows' locks in the same
	// order and cannot deadlock.
	customers = slices.Compact(slices.Sorted(slices.Values(customers)))
	open, err := dbsqlc.New(s.room).WaitroomAddHolders(ctx, dbsqlc.WaitroomAddHoldersParams{SaleID: saleID, Customers: customers})
	switch {
	case notFound(err):
		return fmt.Errorf("add holders to sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	case err != nil:
		return fmt.Errorf("add holders to sale %s: %w", saleID, translate(err))
	case !open:
		return fmt.Errorf("add holders to sale %s: %w", saleID, flashline.ErrCrowdCommitted)
	}
	return nil
}

// Crowd reads saleID's committed pre-open crowd (flashline.Crowd), its
// holders with it once committed. No room: flashline.ErrNoWaitingRoom.
func (s *Store) Crowd(ctx context.Context, saleID string) (flashline.Crowd, error) {
	// The room's pool: a public read (GET /sales/{id}/draw), which must
	// never delay the admin's work or a confirm.
	q := dbsqlc.New(s.room)
	row, err := q.WaitroomCrowd(ctx, dbsqlc.WaitroomCrowdParams{SaleID: saleID})
	if notFound(err) {
		if _, err := s.Sale(ctx, saleID); err != nil {
			return flashline.Crowd{}, fmt.Errorf("crowd of sale %s: %w", saleID, err)
		}
		return flashline.Crowd{}, fmt.Errorf("crowd of sale %s: %w", saleID, flashline.ErrNoWaitingRoom)
	}
	if err != nil {
		return flashline.Crowd{}, fmt.Errorf("crowd of sale %s: %w", saleID, translate(err))
	}
	c := flashline.Crowd{SaleID: saleID, Fairness: flashline.Fairness(row.Fairness), Seed: row.DrawSeed, PreopenCount: -1,
		Root: row.HoldersRoot, CommittedAt: row.HoldersCommittedAt, FinalSeed: row.FinalSeed}
	if row.OpensAt != nil {
		c.OpensAt = *row.OpensAt
	}
	if row.PreopenCount != nil {
		c.PreopenCount = *row.PreopenCount
	}
	if row.HoldersCount != nil {
		c.HolderCount = *row.HoldersCount
	}
	if c.Root != nil {
		if c.Holders, err = q.WaitroomHolders(ctx, dbsqlc.WaitroomHoldersParams{SaleID: saleID}); err != nil {
			return flashline.Crowd{}, fmt.Errorf("holders of sale %s: %w", saleID, translate(err))
		}
	}
	return c, nil
}
