package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

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
// A room with a beacon leaves the final seed to DrawCrowd, once its round
// is had (crowdRound).
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
	p := dbsqlc.WaitroomCommitCrowdParams{Root: root[:], HoldersCount: int64(len(rs)), SaleID: saleID}
	b, err := q.WaitroomCrowdBeacon(ctx, dbsqlc.WaitroomCrowdBeaconParams{SaleID: saleID})
	if err != nil {
		return err
	}
	if chain := beaconChain(b.BeaconPublicKey, b.BeaconGenesis, b.BeaconPeriodSeconds); chain != nil {
		round := int64(crowdRound(*chain, b.BeaconRound, b.Now))
		p.Round = &round
	} else {
		f := flashline.LotteryFinalSeed(saleID, root, nil, seed)
		p.FinalSeed = f[:]
	}
	return q.WaitroomCommitCrowd(ctx, p)
}

// crowdRound is the beacon round a crowd committed at now waits for: the
// one fixed at the sale's creation while it is not published yet and no
// later than the freeze's own (CrowdRound of now); otherwise the freeze's
// own: for a sale created without an opening time, one opened early by an
// operator (the line does not wait for the scheduled time), or a freeze
// that came late (the round fixed at creation may be out already). Either
// way, a round nobody knows when the holders are committed.
func crowdRound(chain flashline.BeaconChain, fixed *int64, now time.Time) uint64 {
	own := flashline.CrowdRound(chain, now)
	if fixed != nil && uint64(*fixed) <= own && chain.RoundTime(uint64(*fixed)).After(now) {
		return uint64(*fixed)
	}
	return own
}

// roomCreate is the waiting room of new sale n: a randomized_at_open room
// under a store with a beacon holds the chain, and the round its crowd
// waits for when the opening time is known (flashline.CrowdRound).
func roomCreate(saleID string, n flashline.NewSale, beacon *flashline.BeaconChain) dbsqlc.WaitroomCreateParams {
	p := dbsqlc.WaitroomCreateParams{SaleID: saleID}
	if beacon == nil || n.Fairness != flashline.FairnessRandomizedAtOpen {
		return p
	}
	genesis, period := beacon.Genesis, int32(beacon.Period/time.Second)
	p.BeaconPublicKey, p.BeaconGenesis, p.BeaconPeriodSeconds = beacon.PublicKey, &genesis, &period
	if n.OpensAt != nil {
		round := int64(flashline.CrowdRound(*beacon, *n.OpensAt))
		p.BeaconRound = &round
	}
	return p
}

// beaconChain reads a beacon's stored configuration (nil: none).
func beaconChain(publicKey []byte, genesis *time.Time, periodSeconds *int32) *flashline.BeaconChain {
	if publicKey == nil || genesis == nil || periodSeconds == nil {
		return nil
	}
	return &flashline.BeaconChain{PublicKey: publicKey, Genesis: *genesis, Period: time.Duration(*periodSeconds) * time.Second}
}

// DueCrowds lists the committed crowds that wait for their beacon round,
// but those whose sale is paused or closed (flashline.DueDraw, DrawAt the
// commitment's time).
func (s *Store) DueCrowds(ctx context.Context) ([]flashline.DueDraw, error) {
	rows, err := dbsqlc.New(s.jobs).WaitroomDueCrowds(ctx)
	if err != nil {
		return nil, fmt.Errorf("due crowds: %w", translate(err))
	}
	out := make([]flashline.DueDraw, 0, len(rows))
	for _, r := range rows {
		chain := beaconChain(r.BeaconPublicKey, r.BeaconGenesis, r.BeaconPeriodSeconds)
		if chain == nil || r.BeaconRound == nil || r.HoldersCommittedAt == nil {
			continue // not possible under the table's constraints
		}
		out = append(out, flashline.DueDraw{SaleID: r.SaleID, DrawAt: *r.HoldersCommittedAt, Now: r.Now,
			Beacon: chain, Round: uint64(*r.BeaconRound)})
	}
	return out, nil
}

// DrawCrowd ranks saleID's committed crowd with its beacon round: the
// round verified against the room's chain, the final seed computed with its
// randomness (flashline.LotteryFinalSeed, as the lottery's) and stored with
// the round's value, once. drew is false when there was nothing to do (done
// already, or not committed yet). A round that is not the room's, or does
// not verify: an error, nothing written.
func (s *Store) DrawCrowd(ctx context.Context, saleID string, beacon flashline.BeaconRound) (drew bool, err error) {
	q := dbsqlc.New(s.jobs)
	row, err := q.WaitroomCrowd(ctx, dbsqlc.WaitroomCrowdParams{SaleID: saleID})
	if err != nil {
		return false, fmt.Errorf("draw crowd %s: %w", saleID, translate(err))
	}
	chain := beaconChain(row.BeaconPublicKey, row.BeaconGenesis, row.BeaconPeriodSeconds)
	switch {
	case row.FinalSeed != nil || row.HoldersRoot == nil:
		return false, nil
	case chain == nil || row.BeaconRound == nil || uint64(*row.BeaconRound) != beacon.Round:
		return false, fmt.Errorf("draw crowd %s: %w: round %d is not the room's", saleID, ErrBeaconNeeded, beacon.Round)
	}
	if err := flashline.VerifyBeacon(chain.PublicKey, beacon); err != nil {
		return false, fmt.Errorf("draw crowd %s: %w", saleID, err)
	}
	var root [32]byte
	copy(root[:], row.HoldersRoot)
	f := flashline.LotteryFinalSeed(saleID, root, beacon.Randomness, row.DrawSeed)
	n, err := q.WaitroomDrawCrowd(ctx, dbsqlc.WaitroomDrawCrowdParams{FinalSeed: f[:], Randomness: beacon.Randomness,
		Signature: beacon.Signature, SaleID: saleID, Round: int64(beacon.Round)})
	if err != nil {
		return false, fmt.Errorf("draw crowd %s: %w", saleID, translate(err))
	}
	return n == 1, nil
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
	if chain := beaconChain(row.BeaconPublicKey, row.BeaconGenesis, row.BeaconPeriodSeconds); chain != nil {
		c.Beacon = &flashline.BeaconRecord{Chain: *chain,
			BeaconRound: flashline.BeaconRound{Randomness: row.BeaconRandomness, Signature: row.BeaconSignature}}
		if row.BeaconRound != nil {
			c.Beacon.Round = uint64(*row.BeaconRound)
		}
	}
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
