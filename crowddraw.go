package flashline

import (
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// The pre-open crowd of a randomized_at_open waiting room, committed at the
// open (docs/waiting-room.md gives the same formula in prose). It is the
// lottery's draw (lotterydraw.go) with the crowd for the registrants:
//
//	holder      r = RegistrantOf(sale, customer), the lottery's hashed id
//	root        RegistrantsRoot of the holders, computed by the freeze at
//	            the open, in the transaction after which no holder is added
//	final seed  F = LotteryFinalSeed(sale, root, beacon, seed): the room's
//	            draw seed (its SHA-256 published before the open, the seed
//	            from the open), and the randomness of the beacon round
//	            CrowdRound fixed at the sale's creation (32 zero bytes in a
//	            deployment without a beacon, and in rooms committed before
//	            rooms had one: the same formula, whose beacon was always
//	            zero)
//	key         k = H(F ‖ r), the lottery's key
//	rank        DrawRank(first 8 bytes of k as a big-endian uint64,
//	            preopenCount): the place in the line the watermark passes,
//	            among the preopenCount holders committed at the open (N is
//	            the list's length, which anyone can count; in rooms frozen
//	            before issue 48, the pre-open tickets counted)
//
// The root is committed at the freeze, a quarter second or so after the
// open; the round is the first published CrowdBeaconDelay after the open,
// so nobody, the store included, knows F before the holders are fixed. No
// rank is admitted until the round is had (the watermark stays at 0).
//
// Ranks are the waiting room's own (several holders may share one: the
// watermark moves by ranks, not by people), listed in the transcript in the
// lottery's order (k ascending), so the same verifier checks both.

// CrowdRank is holder r's rank under final seed f in a pre-open crowd of
// preopenCount tickets.
func CrowdRank(f [32]byte, r Registrant, preopenCount int64) int64 {
	var b [64]byte
	copy(b[:32], f[:])
	copy(b[32:], r[:])
	k := sha256.Sum256(b[:])
	return DrawRank(binary.BigEndian.Uint64(k[:8]), preopenCount)
}

// CrowdBeaconDelay is how long after a room's opening time its crowd's
// beacon round is published at the earliest: time for the freeze (the first
// lease or pacer tick a quarter second after the open) to commit the
// holders before the round exists.
const CrowdBeaconDelay = 2 * time.Second

// CrowdRound is the beacon round of a crowd opening at opensAt: the first
// published CrowdBeaconDelay after it.
func CrowdRound(c BeaconChain, opensAt time.Time) uint64 {
	return c.RoundAfter(opensAt.Add(CrowdBeaconDelay))
}

// Crowd is a randomized_at_open room's pre-open crowd as committed at the
// open.
type Crowd struct {
	SaleID   string
	Fairness Fairness
	OpensAt  time.Time
	// Seed is the room's draw seed (revealed from the open).
	Seed []byte
	// PreopenCount is the crowd's N, the ranks' scale (-1: not frozen
	// yet): the holders committed at the open (HolderCount; in a room
	// frozen before that was so, the pre-open tickets counted).
	PreopenCount int64
	// Root, HolderCount, CommittedAt and FinalSeed are nil and zero until
	// the freeze commits the crowd (a room frozen before commitments
	// existed never has them).
	Root        []byte
	HolderCount int64
	CommittedAt *time.Time
	FinalSeed   []byte
	// Holders is every committed holder's customer id.
	Holders []string
	// Beacon is the beacon the crowd waits for (nil: none; Round 0: not
	// fixed yet), with the round's value once had.
	Beacon *BeaconRecord
}

// NewCrowdTranscript is the transcript of a room's committed crowd, in the
// shape of a lottery's (VerifyDrawTranscript checks both): the seed, the
// root, every holder's hashed id in the draw's order with its rank. Before
// the commitment, no holder.
func NewCrowdTranscript(c Crowd) DrawTranscript {
	commitment := sha256.Sum256(c.Seed)
	t := DrawTranscript{SaleID: c.SaleID, Crowd: true, PreopenCount: c.PreopenCount,
		Commitment: commitment[:], Root: c.Root, RegistrantCount: int(c.HolderCount)}
	if c.CommittedAt != nil {
		t.RegistrationClosesAt = *c.CommittedAt
	}
	if c.Beacon != nil && c.Beacon.Round != 0 {
		t.Beacon = c.Beacon
	}
	if c.Root == nil || c.FinalSeed == nil {
		return t
	}
	t.Seed = c.Seed
	rs := make([]Registrant, len(c.Holders))
	for i, h := range c.Holders {
		rs[i] = RegistrantOf(c.SaleID, h)
	}
	var f [32]byte
	copy(f[:], c.FinalSeed)
	// The keys the ranking sorted by are the ranks' (CrowdRank): hashed
	// once, not again for the ranks.
	ranked, keys := lotteryRanking(f, rs)
	t.Ranked, t.Ranks = ranked, make([]int, len(ranked))
	for i, k := range keys {
		t.Ranks[i] = int(DrawRank(k, c.PreopenCount))
	}
	return t
}
