package flashline

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"time"
)

// The lottery's draw, as anyone can recompute it (docs/lottery.md gives the
// same formula in prose). Every hash is SHA-256; ‖ is concatenation; a sale
// or customer id is its UTF-8 bytes.
//
//	registrant  r = H("flashline/lottery/registrant/v1" ‖ 0x00 ‖ sale ‖ 0x00 ‖ customer)
//	leaf        H(0x00 ‖ r)
//	node        H(0x01 ‖ left ‖ right)
//	root        the registrants' r sorted ascending (bytewise), their leaves
//	            paired left to right level by level, an odd last node
//	            carried up unchanged; no registrant: H("")
//	final seed  F = H("flashline/lottery/draw/v2" ‖ 0x00 ‖ sale ‖ 0x00 ‖ root ‖ beacon ‖ seed)
//	            beacon: the round's 32-byte randomness, or 32 zero bytes in a
//	            deployment without a beacon; seed: the store's secret seed,
//	            whose SHA-256 is the commitment published at the sale's creation
//	key         k = H(F ‖ r)
//	order       by k ascending (bytewise), ties by r; rank 1 first; the first
//	            `units` ranks win, the rest are waitlisted (or lose)
//
// A lottery with variants draws with formula v3 (lotteryvariants.go): the
// leaves commit each registrant's choice, F is tagged v3, and the units of
// each variant are awarded in rank order.
//
// The root is fixed and published when registration closes, before the
// beacon round (the first one published after the close) exists: whoever
// knew the store's seed still could not compute F, and the store cannot
// choose registrants once F can be known.

// Registrant is a registrant's hashed id in a lottery.
type Registrant [sha256.Size]byte

// String is the hex of r.
func (r Registrant) String() string { return hex.EncodeToString(r[:]) }

// ParseRegistrant reads a registrant's hex.
func ParseRegistrant(s string) (Registrant, error) {
	var r Registrant
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(r) {
		return r, fmt.Errorf("a registrant is %d hex digits, not %q", 2*len(r), s)
	}
	copy(r[:], b)
	return r, nil
}

const (
	registrantTag  = "flashline/lottery/registrant/v1"
	lotteryDrawTag = "flashline/lottery/draw/v2"
)

// RegistrantOf is a customer's hashed id in a sale's lottery.
func RegistrantOf(saleID, customerID string) Registrant {
	// One buffer on the stack, hashed at once (as Draw): a hash.Hash and
	// the ids copied into it were eight allocations a holder, a million of
	// them at a crowd's freeze (issue 48).
	var buf [256]byte
	b := append(append(append(append(append(buf[:0], registrantTag...), 0), saleID...), 0), customerID...)
	return sha256.Sum256(b)
}

// RegistrantLeaf is r's leaf in the registrants' Merkle tree.
func RegistrantLeaf(r Registrant) [32]byte {
	var b [1 + len(r)]byte
	copy(b[1:], r[:])
	return sha256.Sum256(b[:])
}

func merkleNode(l, r [32]byte) [32]byte {
	var b [65]byte
	b[0] = 1
	copy(b[1:33], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// RegistrantsRoot is the Merkle root of rs (any order: they are sorted on a
// copy).
func RegistrantsRoot(rs []Registrant) [32]byte {
	sorted := slices.Clone(rs)
	SortRegistrants(sorted)
	level := make([][32]byte, len(sorted))
	for i, r := range sorted {
		level[i] = RegistrantLeaf(r)
	}
	return merkleRoot(level)
}

// merkleRoot is the root over leaves, in their order (none: H("")).
func merkleRoot(level [][32]byte) [32]byte {
	if len(level) == 0 {
		return sha256.Sum256(nil)
	}
	for len(level) > 1 {
		next := level[:0:0]
		for i := 0; i < len(level); i += 2 {
			if i+1 == len(level) {
				next = append(next, level[i])
			} else {
				next = append(next, merkleNode(level[i], level[i+1]))
			}
		}
		level = next
	}
	return level[0]
}

// ProofStep is one sibling on the path from a leaf to the root: the hash
// goes on the left of the running hash when Left, else on its right.
type ProofStep struct {
	Left bool
	Hash [32]byte
}

// RegistrantProof is the inclusion proof of r among rs (false: r is not
// one of them).
func RegistrantProof(rs []Registrant, r Registrant) ([]ProofStep, bool) {
	sorted := slices.Clone(rs)
	SortRegistrants(sorted)
	i, found := slices.BinarySearchFunc(sorted, r, func(a, b Registrant) int { return bytes.Compare(a[:], b[:]) })
	if !found {
		return nil, false
	}
	level := make([][32]byte, len(sorted))
	for j, x := range sorted {
		level[j] = RegistrantLeaf(x)
	}
	proof := []ProofStep{}
	for len(level) > 1 {
		switch {
		case i%2 == 1:
			proof = append(proof, ProofStep{Left: true, Hash: level[i-1]})
		case i+1 < len(level):
			proof = append(proof, ProofStep{Left: false, Hash: level[i+1]})
		}
		next := level[:0:0]
		for j := 0; j < len(level); j += 2 {
			if j+1 == len(level) {
				next = append(next, level[j])
			} else {
				next = append(next, merkleNode(level[j], level[j+1]))
			}
		}
		level, i = next, i/2
	}
	return proof, true
}

// VerifyRegistrantProof checks that proof leads from r's leaf to root.
func VerifyRegistrantProof(root [32]byte, r Registrant, proof []ProofStep) bool {
	h := RegistrantLeaf(r)
	for _, s := range proof {
		if s.Left {
			h = merkleNode(s.Hash, h)
		} else {
			h = merkleNode(h, s.Hash)
		}
	}
	return subtle.ConstantTimeCompare(h[:], root[:]) == 1
}

// LotteryFinalSeed is F: the store's seed, the registrants' root and the
// beacon round's randomness (nil: no beacon, 32 zero bytes) together.
func LotteryFinalSeed(saleID string, root [32]byte, beaconRandomness, seed []byte) [32]byte {
	return lotteryFinalSeed(lotteryDrawTag, saleID, root, beaconRandomness, seed)
}

func lotteryFinalSeed(tag, saleID string, root [32]byte, beaconRandomness, seed []byte) [32]byte {
	var beacon [32]byte
	copy(beacon[:], beaconRandomness)
	h := sha256.New()
	io.WriteString(h, tag)
	h.Write([]byte{0})
	io.WriteString(h, saleID)
	h.Write([]byte{0})
	h.Write(root[:])
	h.Write(beacon[:])
	h.Write(seed)
	var f [32]byte
	h.Sum(f[:0])
	return f
}

// LotteryOrderV2 returns customerIDs in the draw's order (rank 1 first).
func LotteryOrderV2(saleID string, f [32]byte, customerIDs []string) []string {
	by := make(map[Registrant]string, len(customerIDs))
	rs := make([]Registrant, len(customerIDs))
	for i, c := range customerIDs {
		rs[i] = RegistrantOf(saleID, c)
		by[rs[i]] = c
	}
	ranked := LotteryRanking(f, rs)
	out := make([]string, len(ranked))
	for i, r := range ranked {
		out[i] = by[r]
	}
	return out
}

// BeaconRecord is a lottery's beacon as its transcript publishes it: the
// chain and the round fixed at the sale's creation, and the round's value
// once published.
type BeaconRecord struct {
	Chain BeaconChain
	BeaconRound
}

// DrawTranscript is a lottery's draw, everything needed to check it.
type DrawTranscript struct {
	SaleID               string
	RegistrationClosesAt time.Time
	Units                int
	Waitlist             bool
	Commitment           []byte // SHA-256(seed)
	Seed                 []byte // nil before the draw
	Root                 []byte // nil before the close
	RegistrantCount      int
	// Beacon is nil in a deployment without a beacon: the store's seed
	// alone then decides the order.
	Beacon *BeaconRecord
	// Ranked is every registrant in rank order (rank i+1 at i) once drawn;
	// before the draw, after the close, every registrant sorted.
	Ranked     []Registrant
	Ranks      []int // the rank published with each of Ranked (0: not drawn)
	Winners    []Registrant
	Waitlisted []Registrant
	// Crowd: the transcript is a waiting room's committed pre-open crowd
	// (crowddraw.go), RegistrationClosesAt the commitment's time, and each
	// rank CrowdRank among PreopenCount; no winners, no waitlist.
	Crowd        bool
	PreopenCount int64
	// Version is the formula: 3 for a lottery with variants
	// (lotteryvariants.go), else v2. Variants are then the sale's, in its
	// order; Choices and Awards go with Ranked: the variant each named
	// ("": any) and, once drawn, the one each won ("": none).
	Version  int
	Variants []LotteryVariant
	Choices  []string
	Awards   []string
}

// DrawPins are what a verifier saw published earlier and holds the
// transcript to: each is checked when set.
type DrawPins struct {
	Commitment      []byte      // the commitment published at creation
	Root            []byte      // the root published at the close
	BeaconPublicKey []byte      // the beacon's key, from the beacon itself
	Registrant      *Registrant // one's own registration
}

// DrawStep is one step of checking a transcript.
type DrawStep struct {
	Name   string // commitment, registrants, inclusion, beacon, ranks, outcome
	OK     bool
	Detail string
}

// VerifyDrawTranscript checks a drawn lottery's transcript, step by step:
// the seed against its commitment; the registrants against the root; one's
// own registrant's inclusion (when pinned); the beacon round (the first
// after the close, signed by the chain, its randomness the signature's
// hash); every rank recomputed; the winners and the waitlist. Every step is
// returned; the transcript checks out when all are OK.
func VerifyDrawTranscript(t DrawTranscript, pins DrawPins) []DrawStep {
	var steps []DrawStep
	step := func(name string, err error, ok string) {
		if err != nil {
			steps = append(steps, DrawStep{Name: name, Detail: err.Error()})
		} else {
			steps = append(steps, DrawStep{Name: name, OK: true, Detail: ok})
		}
	}

	// commitment
	step("commitment", func() error {
		sum := sha256.Sum256(t.Seed)
		switch {
		case len(t.Seed) == 0:
			return fmt.Errorf("no seed published: the draw has not been made")
		case pins.Commitment != nil && !bytes.Equal(pins.Commitment, t.Commitment):
			return fmt.Errorf("the transcript's commitment %x is not the one pinned, %x", t.Commitment, pins.Commitment)
		case !bytes.Equal(sum[:], t.Commitment):
			return fmt.Errorf("SHA-256(seed) is %x, the commitment %x", sum, t.Commitment)
		}
		return nil
	}(), fmt.Sprintf("SHA-256(seed) = %x", t.Commitment))

	// registrants
	v3 := t.Version == DrawVersionVariants
	sorted := slices.Clone(t.Ranked)
	SortRegistrants(sorted)
	root := RegistrantsRoot(sorted)
	if v3 && len(t.Choices) == len(t.Ranked) {
		root = RegistrantsChoicesRoot(t.Ranked, t.Choices)
	}
	step("registrants", func() error {
		if v3 {
			if err := checkVariantsTranscript(t); err != nil {
				return err
			}
		}
		for i := 1; i < len(sorted); i++ {
			if sorted[i] == sorted[i-1] {
				return fmt.Errorf("registrant %s is listed twice", sorted[i])
			}
		}
		switch {
		case len(t.Root) == 0:
			return fmt.Errorf("no registrants' root published")
		case pins.Root != nil && !bytes.Equal(pins.Root, t.Root):
			return fmt.Errorf("the transcript's root %x is not the one pinned at the close, %x", t.Root, pins.Root)
		case !bytes.Equal(root[:], t.Root):
			return fmt.Errorf("the %d registrants listed have the root %x, the root committed at the close is %x", len(sorted), root, t.Root)
		case t.RegistrantCount != len(sorted):
			return fmt.Errorf("%d registrants listed, %d committed", len(sorted), t.RegistrantCount)
		}
		return nil
	}(), fmt.Sprintf("%d registrants, root %x", len(sorted), root))

	// inclusion
	if pins.Registrant != nil {
		_, found := slices.BinarySearchFunc(sorted, *pins.Registrant, func(a, b Registrant) int { return bytes.Compare(a[:], b[:]) })
		var err error
		if !found {
			err = fmt.Errorf("registrant %s is not among the committed registrants", pins.Registrant)
		}
		step("inclusion", err, fmt.Sprintf("registrant %s is included", pins.Registrant))
	}

	// beacon
	var randomness []byte
	if t.Beacon == nil {
		steps = append(steps, DrawStep{Name: "beacon", OK: true,
			Detail: "NO BEACON: this deployment draws with the store's seed alone; whoever knew the seed before the close could compute the order"})
	} else {
		b := t.Beacon
		randomness = b.Randomness
		want := b.Chain.RoundAfter(t.RegistrationClosesAt)
		ok := fmt.Sprintf("round %d (the first after the close) signed by the chain, randomness %x", b.Round, b.Randomness)
		if t.Crowd {
			ok = fmt.Sprintf("round %d (published after the crowd was committed) signed by the chain, randomness %x", b.Round, b.Randomness)
		}
		step("beacon", func() error {
			switch {
			case pins.BeaconPublicKey != nil && !bytes.Equal(pins.BeaconPublicKey, b.Chain.PublicKey):
				return fmt.Errorf("the transcript's beacon key %x is not the one pinned, %x", b.Chain.PublicKey, pins.BeaconPublicKey)
			case t.Crowd && !b.Chain.RoundTime(b.Round).After(t.RegistrationClosesAt):
				// A crowd's round is fixed at the sale's creation from its
				// opening time (CrowdRound); what the transcript shows is
				// that it came after the holders were committed.
				return fmt.Errorf("round %d was published at %s, not after the crowd was committed (%s)", b.Round,
					b.Chain.RoundTime(b.Round).UTC().Format(time.RFC3339), t.RegistrationClosesAt.UTC().Format(time.RFC3339Nano))
			case !t.Crowd && b.Round != want:
				return fmt.Errorf("round %d used, but the first round after the close (%s) is %d",
					b.Round, t.RegistrationClosesAt.UTC().Format(time.RFC3339), want)
			}
			return VerifyBeacon(b.Chain.PublicKey, b.BeaconRound)
		}(), ok)
	}

	// ranks
	f := LotteryFinalSeed(t.SaleID, root, randomness, t.Seed)
	if v3 {
		f = LotteryFinalSeedV3(t.SaleID, root, randomness, t.Seed)
	}
	ranking := LotteryRanking(f, t.Ranked)
	step("ranks", func() error {
		if len(t.Ranks) != len(t.Ranked) {
			return fmt.Errorf("%d ranks for %d registrants", len(t.Ranks), len(t.Ranked))
		}
		for i, r := range ranking {
			want := i + 1
			if t.Crowd {
				want = int(CrowdRank(f, r, t.PreopenCount))
			}
			if t.Ranked[i] != r || t.Ranks[i] != want {
				return fmt.Errorf("rank %d is registrant %s by the draw, the transcript has %s at rank %d", want, r, t.Ranked[i], t.Ranks[i])
			}
		}
		return nil
	}(), fmt.Sprintf("every rank recomputed from F = %x", f))

	// outcome
	if t.Crowd {
		steps = append(steps, DrawStep{Name: "outcome", OK: true,
			Detail: fmt.Sprintf("a waiting room: each holder is admitted when the watermark reaches their rank (of %d pre-open tickets)", t.PreopenCount)})
		return steps
	}
	if v3 {
		detail, err := variantOutcome(t, ranking)
		step("outcome", err, detail)
		return steps
	}
	step("outcome", func() error {
		n := min(t.Units, len(ranking))
		if !slices.Equal(t.Winners, ranking[:n]) {
			return fmt.Errorf("the winners are not ranks 1-%d in order", n)
		}
		var wait []Registrant
		if t.Waitlist {
			wait = ranking[n:]
		}
		if !slices.Equal(t.Waitlisted, wait) {
			if t.Waitlist {
				return fmt.Errorf("the waitlist is not ranks %d-%d in order", n+1, len(ranking))
			}
			return fmt.Errorf("a waitlist is published, but the lottery has none")
		}
		return nil
	}(), fmt.Sprintf("%d winner(s) and %d waitlisted, in rank order", len(t.Winners), len(t.Waitlisted)))
	return steps
}

// NewDrawTranscript is the transcript of lottery l, whose registrations
// are entries: after the close, its committed registrants (sorted, or in
// rank order once drawn) and, once drawn, the seed, the beacon's value, the
// ranks, the winners and the waitlist. Before the close, no registrant.
func NewDrawTranscript(l Lottery, entries []LotteryEntry) DrawTranscript {
	commitment := sha256.Sum256(l.DrawSeed)
	t := DrawTranscript{
		SaleID: l.SaleID, RegistrationClosesAt: l.Rules.RegistrationClosesAt, Units: l.InitialStock,
		Waitlist: l.Rules.Waitlist, Commitment: commitment[:], Root: l.RegistrantsRoot,
		RegistrantCount: l.RegistrantsCount, Beacon: l.Beacon,
	}
	if l.DrawVersion == DrawVersionVariants {
		t.Version, t.Variants = DrawVersionVariants, l.Variants
	}
	if l.RegistrantsRoot == nil {
		return t
	}
	drawn := l.DrawnAt != nil
	t.Ranked = make([]Registrant, len(entries))
	t.Ranks = make([]int, len(entries))
	for i, e := range entries {
		t.Ranked[i] = RegistrantOf(l.SaleID, e.CustomerID)
		if drawn {
			t.Ranks[i] = e.Rank
		}
	}
	if l.DrawVersion == DrawVersionVariants {
		return variantTranscript(t, l, entries)
	}
	if !drawn {
		SortRegistrants(t.Ranked)
		return t
	}
	t.Seed = l.DrawSeed
	for i, r := range t.Ranked {
		switch {
		case t.Ranks[i] <= t.Units:
			t.Winners = append(t.Winners, r)
		case t.Waitlist:
			t.Waitlisted = append(t.Waitlisted, r)
		}
	}
	return t
}
