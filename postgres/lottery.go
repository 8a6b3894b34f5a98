package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/dbsqlc"
)

var _ flashline.LotteryStore = (*Store)(nil)

// Lottery reads a lottery sale's rules (not its counts: Sale has them).
func (s *Store) Lottery(ctx context.Context, saleID string) (flashline.Lottery, error) {
	return s.lottery(ctx, dbsqlc.New(s.room), saleID)
}

func (s *Store) lottery(ctx context.Context, q *dbsqlc.Queries, saleID string) (flashline.Lottery, error) {
	r, err := q.LotteryGet(ctx, dbsqlc.LotteryGetParams{SaleID: saleID})
	if notFound(err) {
		// Unknown sale, or one that is not a lottery: tell which.
		if _, err := s.Sale(ctx, saleID); err != nil {
			return flashline.Lottery{}, err
		}
		return flashline.Lottery{}, fmt.Errorf("lottery %s: %w", saleID, flashline.ErrNoLottery)
	}
	if err != nil {
		return flashline.Lottery{}, fmt.Errorf("lottery %s: %w", saleID, translate(err))
	}
	l := flashline.Lottery{
		SaleID: r.SaleID,
		Rules: flashline.LotteryRules{
			RegistrationOpensAt:   r.RegistrationOpensAt,
			RegistrationClosesAt:  r.RegistrationClosesAt,
			DrawAt:                r.DrawAt,
			PurchaseWindowSeconds: int(r.PurchaseWindowSeconds),
			Waitlist:              r.Waitlist,
		},
		InitialStock:           int(r.InitialStock),
		ChallengeBits:          int(r.ChallengeBits),
		MinAccountAgeSeconds:   int(r.MinAccountAgeSeconds),
		DrawSeed:               r.DrawSeed,
		DrawnAt:                r.DrawnAt,
		Now:                    r.Now,
		Title:                  r.Title,
		ImageURL:               r.ImageUrl,
		DrawVersion:            int(r.DrawVersion),
		RegistrantsRoot:        r.RegistrantsRoot,
		RegistrantsCommittedAt: r.RegistrantsCommittedAt,
	}
	if r.RegistrantsCount != nil {
		l.RegistrantsCount = int(*r.RegistrantsCount)
	}
	if l.DrawVersion == flashline.DrawVersionVariants {
		if l.Variants, err = lotteryVariants(ctx, q, saleID); err != nil {
			return flashline.Lottery{}, fmt.Errorf("lottery %s: %w", saleID, translate(err))
		}
	}
	if r.BeaconRound != nil && r.BeaconGenesis != nil && r.BeaconPeriodSeconds != nil {
		l.Beacon = &flashline.BeaconRecord{
			Chain: flashline.BeaconChain{PublicKey: r.BeaconPublicKey, Genesis: *r.BeaconGenesis,
				Period: time.Duration(*r.BeaconPeriodSeconds) * time.Second},
			BeaconRound: flashline.BeaconRound{Round: uint64(*r.BeaconRound), Randomness: r.BeaconRandomness, Signature: r.BeaconSignature},
		}
	}
	return l, nil
}

// lotteryVariants are a lottery's variants in the sale's order.
func lotteryVariants(ctx context.Context, q *dbsqlc.Queries, saleID string) ([]flashline.LotteryVariant, error) {
	rows, err := q.LotteryVariants(ctx, dbsqlc.LotteryVariantsParams{SaleID: saleID})
	if err != nil {
		return nil, err
	}
	out := make([]flashline.LotteryVariant, len(rows))
	for i, v := range rows {
		out[i] = flashline.LotteryVariant{SKU: v.Sku, Title: v.Title, Units: int(v.InitialStock)}
	}
	return out, nil
}

// lotteryCounts counts a lottery's registrations by state.
func lotteryCounts(ctx context.Context, q *dbsqlc.Queries, saleID string) (flashline.LotteryCounts, error) {
	c, err := q.LotteryCounts(ctx, dbsqlc.LotteryCountsParams{SaleID: saleID})
	if err != nil {
		return flashline.LotteryCounts{}, fmt.Errorf("lottery counts %s: %w", saleID, translate(err))
	}
	return flashline.LotteryCounts{
		Registered: int(c.Registered), Won: int(c.Won), Lost: int(c.Lost),
		Waitlisted: int(c.Waitlisted), Expired: int(c.Expired),
	}, nil
}

func registrationFrom(id, saleID, customerID, state string, rank *int32, windowEnds *time.Time, created time.Time, variant, won *string, hasVariants bool) flashline.Registration {
	r := flashline.Registration{
		ID: id, SaleID: saleID, CustomerID: customerID, State: flashline.RegistrationState(state),
		PurchaseWindowEndsAt: windowEnds, CreatedAt: created, HasVariants: hasVariants,
	}
	if variant != nil {
		r.Variant = *variant
	}
	if won != nil {
		r.WonVariant = *won
	}
	if rank != nil {
		r.DrawRank = int(*rank)
	}
	return r
}

// Register registers a customer in a lottery, once. A repeat (on any
// instance, at any time) returns the first registration. Otherwise, in one
// transaction: the lottery's row is held FOR SHARE while registration is open
// (the draw waits for it, see LotteryLockForRegistration), and the row is
// inserted unless the customer or the payment instrument (when a trusted
// party named one: NewRegistration.PaymentInstrument) has one in the sale
// (the unique constraints decide, not a read).
// Registrations use the waiting room's pool: a crowd registering never
// holds a connection that confirm, cancel or the purchase path need.
func (s *Store) Register(ctx context.Context, n flashline.NewRegistration) (flashline.Registration, error) {
	if r, err := s.Registration(ctx, n.SaleID, n.CustomerID); err == nil || !errors.Is(err, flashline.ErrNotFound) {
		return r, err
	}
	var reg flashline.Registration
	err := withTx(ctx, s.room, func(q *dbsqlc.Queries) error {
		open, err := q.LotteryLockForRegistration(ctx, dbsqlc.LotteryLockForRegistrationParams{SaleID: n.SaleID})
		if notFound(err) {
			return flashline.ErrNoLottery
		}
		if err != nil {
			return err
		}
		if !open {
			return flashline.ErrRegistrationClosed
		}
		row, err := q.RegistrationInsert(ctx, dbsqlc.RegistrationInsertParams{
			RegistrationID:    flashline.NewID(flashline.RegistrationIDPrefix),
			SaleID:            n.SaleID,
			CustomerID:        n.CustomerID,
			PaymentInstrument: optional(n.PaymentInstrument),
			Variant:           optional(n.Variant),
		})
		if notFound(err) {
			// A conflict: the customer's own registration, committed by a
			// concurrent request (the insert waited for it), or another
			// account's with this instrument.
			existing, err := q.RegistrationGet(ctx, dbsqlc.RegistrationGetParams{SaleID: n.SaleID, CustomerID: n.CustomerID})
			if notFound(err) {
				return flashline.ErrInstrumentRegistered
			}
			if err != nil {
				return err
			}
			reg = registrationFrom(existing.RegistrationID, existing.SaleID, existing.CustomerID, existing.State,
				existing.DrawRank, existing.PurchaseWindowEndsAt, existing.CreatedAt, existing.Variant, existing.WonVariant, existing.HasVariants)
			return nil
		}
		if err != nil {
			return err
		}
		reg = registrationFrom(row.RegistrationID, row.SaleID, row.CustomerID, row.State,
			row.DrawRank, row.PurchaseWindowEndsAt, row.CreatedAt, row.Variant, row.WonVariant, row.HasVariants)
		return nil
	})
	if errors.Is(err, flashline.ErrNoLottery) {
		if _, err := s.Sale(ctx, n.SaleID); err != nil {
			return flashline.Registration{}, err
		}
	}
	if err != nil {
		return flashline.Registration{}, fmt.Errorf("register in lottery %s: %w", n.SaleID, translate(err))
	}
	return reg, nil
}

// Registration reads a customer's registration in a lottery.
func (s *Store) Registration(ctx context.Context, saleID, customerID string) (flashline.Registration, error) {
	r, err := dbsqlc.New(s.room).RegistrationGet(ctx, dbsqlc.RegistrationGetParams{SaleID: saleID, CustomerID: customerID})
	if err != nil {
		return flashline.Registration{}, fmt.Errorf("registration in %s: %w", saleID, translate(err))
	}
	return registrationFrom(r.RegistrationID, r.SaleID, r.CustomerID, r.State, r.DrawRank, r.PurchaseWindowEndsAt, r.CreatedAt, r.Variant, r.WonVariant, r.HasVariants), nil
}

// DueDraws lists the lotteries whose draw is due and not made, but those
// whose sale is paused.
func (s *Store) DueDraws(ctx context.Context) ([]flashline.DueDraw, error) {
	rows, err := dbsqlc.New(s.jobs).LotteryDueDraws(ctx)
	if err != nil {
		return nil, fmt.Errorf("due draws: %w", translate(err))
	}
	out := make([]flashline.DueDraw, len(rows))
	for i, r := range rows {
		out[i] = flashline.DueDraw{SaleID: r.SaleID, DrawAt: r.DrawAt, Now: r.Now}
		if r.BeaconRound != nil && r.BeaconGenesis != nil && r.BeaconPeriodSeconds != nil {
			out[i].Beacon = &flashline.BeaconChain{PublicKey: r.BeaconPublicKey, Genesis: *r.BeaconGenesis,
				Period: time.Duration(*r.BeaconPeriodSeconds) * time.Second}
			out[i].Round = uint64(*r.BeaconRound)
		}
	}
	return out, nil
}

// CommitClosed commits the registrants of every lottery whose registration
// has closed: the Merkle root of their hashed ids (flashline.RegistrantsRoot)
// is stored, once; from then no registration is accepted (a registration
// in flight holds the lottery's row FOR SHARE, which the commitment's FOR
// UPDATE waits for; one that waited for the commitment finds the root set
// and is refused).
func (s *Store) CommitClosed(ctx context.Context) ([]flashline.CommitResult, error) {
	ids, err := dbsqlc.New(s.jobs).LotteryClosesDue(ctx)
	if err != nil {
		return nil, fmt.Errorf("lotteries closed: %w", translate(err))
	}
	var out []flashline.CommitResult
	for _, id := range ids {
		res := flashline.CommitResult{SaleID: id}
		err := withTx(ctx, s.jobs, func(q *dbsqlc.Queries) error {
			committed, err := q.LotteryLockForClose(ctx, dbsqlc.LotteryLockForCloseParams{SaleID: id})
			if err != nil || committed {
				res.SaleID = ""
				return err
			}
			rs, choices, err := registrantsOf(ctx, q, id)
			if err != nil {
				return err
			}
			res.Count, res.Root = len(rs), flashline.RegistrantsRoot(rs)
			if version, err := q.LotteryDrawVersion(ctx, dbsqlc.LotteryDrawVersionParams{SaleID: id}); err != nil {
				return err
			} else if version == flashline.DrawVersionVariants {
				res.Root = flashline.RegistrantsChoicesRoot(rs, choices)
			}
			n := int32(len(rs))
			return q.LotteryCommitRegistrants(ctx, dbsqlc.LotteryCommitRegistrantsParams{Root: res.Root[:], Count: &n, SaleID: id})
		})
		if err != nil {
			return out, fmt.Errorf("commit the registrants of %s: %w", id, translate(err))
		}
		if res.SaleID != "" {
			out = append(out, res)
		}
	}
	return out, nil
}

// registrantsOf is every registrant of a lottery, hashed, with the variant
// each named ("": any, or no variants).
func registrantsOf(ctx context.Context, q *dbsqlc.Queries, saleID string) ([]flashline.Registrant, []string, error) {
	customers, err := q.RegistrantsOfLottery(ctx, dbsqlc.RegistrantsOfLotteryParams{SaleID: saleID})
	if err != nil {
		return nil, nil, err
	}
	rs, choices := make([]flashline.Registrant, len(customers)), make([]string, len(customers))
	for i, c := range customers {
		rs[i], choices[i] = flashline.RegistrantOf(saleID, c.CustomerID), c.Variant
	}
	return rs, choices, nil
}

// PauseForBeacon pauses a lottery sale whose draw waited too long for its
// beacon round: the draw is never made without it.
func (s *Store) PauseForBeacon(ctx context.Context, saleID, reason string) error {
	err := dbsqlc.New(s.jobs).LotteryPauseForBeacon(ctx, dbsqlc.LotteryPauseForBeaconParams{SaleID: saleID, Reason: reason})
	if err != nil {
		return fmt.Errorf("pause %s for its beacon: %w", saleID, translate(err))
	}
	return nil
}

// ErrBeaconNeeded is a draw of a lottery that waits for a beacon round,
// asked without the round (or with another).
var ErrBeaconNeeded = errors.New("the draw needs its beacon round")

// DrawLottery makes a lottery's draw if it is due and not made yet, exactly
// once however many callers try at once: the conditional UPDATE of the
// lottery's row (LotteryClaimDraw) lets one transaction through; the others
// match nothing and return Drew false. In that transaction: the registrants
// are hashed and checked against the root committed at the close (committed
// now if the close's commitment has not run, in a lottery without a
// beacon), every registration's rank in the draw order
// (flashline.LotteryRanking under flashline.LotteryFinalSeed of the store's
// seed, the root and the beacon round's randomness), the first initial-stock
// win with a purchase window from now, the rest lose or are waitlisted, and
// every customer's notification goes to the outbox. beacon is the round the
// lottery waits for, verified by the caller against the chain's key (nil: a
// lottery created without a beacon); it is verified again here.
func (s *Store) DrawLottery(ctx context.Context, saleID string, beacon *flashline.BeaconRound) (flashline.DrawResult, error) {
	res := flashline.DrawResult{SaleID: saleID}
	err := withTx(ctx, s.jobs, func(q *dbsqlc.Queries) error {
		claim, err := q.LotteryClaimDraw(ctx, dbsqlc.LotteryClaimDrawParams{SaleID: saleID})
		if notFound(err) {
			return nil // drawn already, or not due
		}
		if err != nil {
			return err
		}
		var randomness []byte
		switch {
		case claim.BeaconRound == nil && beacon != nil:
			return fmt.Errorf("%w: the lottery was created without a beacon", ErrBeaconNeeded)
		case claim.BeaconRound != nil && (beacon == nil || beacon.Round != uint64(*claim.BeaconRound)):
			return fmt.Errorf("%w: round %d", ErrBeaconNeeded, *claim.BeaconRound)
		case claim.BeaconRound != nil:
			if err := flashline.VerifyBeacon(claim.BeaconPublicKey, *beacon); err != nil {
				return err
			}
			randomness = beacon.Randomness
			if err := q.LotteryRecordBeacon(ctx, dbsqlc.LotteryRecordBeaconParams{
				SaleID: saleID, Round: claim.BeaconRound, Randomness: beacon.Randomness, Signature: beacon.Signature,
			}); err != nil {
				return err
			}
		}
		regs, err := q.RegistrationsForDraw(ctx, dbsqlc.RegistrationsForDrawParams{SaleID: saleID})
		if err != nil {
			return err
		}
		byRegistrant := make(map[flashline.Registrant]int, len(regs))
		rs, choices := make([]flashline.Registrant, len(regs)), make([]string, len(regs))
		for i, r := range regs {
			rs[i], choices[i] = flashline.RegistrantOf(saleID, r.CustomerID), r.Variant
			byRegistrant[rs[i]] = i
		}
		variants := claim.DrawVersion == flashline.DrawVersionVariants
		root := flashline.RegistrantsRoot(rs)
		finalSeed := flashline.LotteryFinalSeed
		var units []flashline.LotteryVariant
		if variants {
			root, finalSeed = flashline.RegistrantsChoicesRoot(rs, choices), flashline.LotteryFinalSeedV3
			if units, err = lotteryVariants(ctx, q, saleID); err != nil {
				return err
			}
		}
		switch {
		case claim.RegistrantsRoot == nil && claim.BeaconRound != nil:
			// The root must be published before the round exists.
			return fmt.Errorf("the registrants of %s were not committed at the close", saleID)
		case claim.RegistrantsRoot == nil:
			n := int32(len(rs))
			if err := q.LotteryCommitRegistrants(ctx, dbsqlc.LotteryCommitRegistrantsParams{Root: root[:], Count: &n, SaleID: saleID}); err != nil {
				return err
			}
		case !bytes.Equal(claim.RegistrantsRoot, root[:]):
			// Registrations are closed (the lottery's row lock), so none
			// can change under the draw: a mismatch is a bug, and rolls
			// the draw back.
			return fmt.Errorf("the registrants drawn have the root %x, not the one committed at the close, %x", root, claim.RegistrantsRoot)
		}
		order := flashline.LotteryRanking(finalSeed(saleID, root, randomness, claim.DrawSeed), rs)
		n := len(order)
		ids, ranks, won, awards := make([]string, n), make([]int32, n), make([]bool, n), make([]string, n)
		ranked := make([]string, n) // each rank's choice
		for i, r := range order {
			ids[i], ranks[i], ranked[i] = regs[byRegistrant[r]].RegistrationID, int32(i+1), choices[byRegistrant[r]]
			won[i] = i < int(claim.InitialStock)
		}
		if variants {
			// Each rank in order wins a unit of what it named while units
			// of it last (lotteryvariants.go); the transcript recomputes
			// the same awards.
			awards = flashline.LotteryAwards(ranked, units)
			for i := range won {
				won[i] = awards[i] != ""
			}
		}
		applied, err := q.RegistrationsApplyDraw(ctx, dbsqlc.RegistrationsApplyDrawParams{
			RegistrationIds: ids, Ranks: ranks, Won: won, WonVariants: awards, Waitlist: claim.Waitlist,
			WindowSeconds: claim.PurchaseWindowSeconds, SaleID: saleID,
		})
		if err != nil {
			return err
		}
		if int(applied.Drawn) != len(ids) {
			return fmt.Errorf("drew %d of %d registrations", applied.Drawn, len(ids))
		}
		res.Drew, res.Registered = true, len(ids)
		if variants {
			res.WonVariants = make(map[string]int, len(units))
		}
		for i, w := range won {
			if w {
				res.Won++
			}
			if w && variants {
				res.WonVariants[awards[i]]++
			}
		}
		return nil
	})
	if err != nil {
		return flashline.DrawResult{SaleID: saleID}, fmt.Errorf("draw lottery %s: %w", saleID, translate(err))
	}
	return res, nil
}

// DrawnRegistration is one registration's outcome, for verifying a draw.
type DrawnRegistration struct {
	RegistrationID string
	CustomerID     string
	State          flashline.RegistrationState
	DrawRank       int // 0: not drawn
}

// LotteryRegistrations lists a lottery's registrations in draw order.
func (s *Store) LotteryRegistrations(ctx context.Context, saleID string) ([]DrawnRegistration, error) {
	rows, err := dbsqlc.New(s.admin).RegistrationsDrawn(ctx, dbsqlc.RegistrationsDrawnParams{SaleID: saleID})
	if err != nil {
		return nil, fmt.Errorf("lottery registrations %s: %w", saleID, translate(err))
	}
	out := make([]DrawnRegistration, len(rows))
	for i, r := range rows {
		out[i] = DrawnRegistration{RegistrationID: r.RegistrationID, CustomerID: r.CustomerID, State: flashline.RegistrationState(r.State)}
		if r.DrawRank != nil {
			out[i].DrawRank = int(*r.DrawRank)
		}
	}
	return out, nil
}

// LotteryEntries lists a lottery's registrations in draw order.
func (s *Store) LotteryEntries(ctx context.Context, saleID string) ([]flashline.LotteryEntry, error) {
	rows, err := dbsqlc.New(s.room).RegistrationsDrawn(ctx, dbsqlc.RegistrationsDrawnParams{SaleID: saleID})
	if err != nil {
		return nil, fmt.Errorf("lottery registrations %s: %w", saleID, translate(err))
	}
	out := make([]flashline.LotteryEntry, len(rows))
	for i, r := range rows {
		out[i] = flashline.LotteryEntry{CustomerID: r.CustomerID, State: flashline.RegistrationState(r.State),
			Choice: r.Variant, WonVariant: r.WonVariant}
		if r.DrawRank != nil {
			out[i].Rank = int(*r.DrawRank)
		}
	}
	return out, nil
}

// createLottery writes a new lottery sale's rules, in CreateSale's
// transaction.
func createLottery(ctx context.Context, q *dbsqlc.Queries, saleID string, r flashline.LotteryRules, beacon *flashline.BeaconChain, variants bool) error {
	version := int16(2)
	if variants {
		version = flashline.DrawVersionVariants
	}
	p := dbsqlc.LotteryCreateParams{
		DrawVersion:           version,
		SaleID:                saleID,
		RegistrationOpensAt:   r.RegistrationOpensAt,
		RegistrationClosesAt:  r.RegistrationClosesAt,
		DrawAt:                r.DrawAt,
		PurchaseWindowSeconds: int32(r.PurchaseWindowSeconds),
		Waitlist:              r.Waitlist,
	}
	if beacon != nil {
		genesis, period := beacon.Genesis, int32(beacon.Period/time.Second)
		round := int64(beacon.RoundAfter(r.RegistrationClosesAt))
		p.BeaconPublicKey, p.BeaconGenesis, p.BeaconPeriodSeconds, p.BeaconRound = beacon.PublicKey, &genesis, &period, &round
	}
	return q.LotteryCreate(ctx, p)
}
