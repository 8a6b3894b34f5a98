package flashline_test

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashline/flashline"
)

// drawnLottery makes a drawn lottery's transcript the way the service does:
// registrants committed at the close, the beacon's first round after it,
// the store's seed.
func drawnLottery(t *testing.T, signer *flashline.BeaconSigner, customers []string, units int, waitlist bool) flashline.DrawTranscript {
	t.Helper()
	const sale = "sale_01JTESTTRANSCRIPT000000000"
	seed := []byte("0123456789abcdef")
	commitment := sha256.Sum256(seed)
	closes := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	chain := flashline.BeaconChain{PublicKey: signer.PublicKey(), Genesis: closes.Add(-time.Hour), Period: 3 * time.Second}
	round := signer.Round(chain.RoundAfter(closes))
	rs := make([]flashline.Registrant, len(customers))
	for i, c := range customers {
		rs[i] = flashline.RegistrantOf(sale, c)
	}
	root := flashline.RegistrantsRoot(rs)
	ranked := flashline.LotteryRanking(flashline.LotteryFinalSeed(sale, root, round.Randomness, seed), rs)
	tr := flashline.DrawTranscript{
		SaleID: sale, RegistrationClosesAt: closes, Units: units, Waitlist: waitlist,
		Commitment: commitment[:], Seed: seed, Root: root[:], RegistrantCount: len(rs),
		Beacon: &flashline.BeaconRecord{Chain: chain, BeaconRound: round},
		Ranked: ranked, Winners: ranked[:min(units, len(ranked))],
	}
	for i := range ranked {
		tr.Ranks = append(tr.Ranks, i+1)
	}
	if waitlist {
		tr.Waitlisted = ranked[min(units, len(ranked)):]
	}
	return tr
}

func testSigner(t *testing.T) *flashline.BeaconSigner {
	t.Helper()
	s, err := flashline.NewBeaconSigner([]byte("the lottery tests' beacon key material"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func customers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cust_%d", i)
	}
	return out
}

// failed is the name of the first step that failed ("" none).
func failed(steps []flashline.DrawStep) string {
	for _, s := range steps {
		if !s.OK {
			return s.Name + ": " + s.Detail
		}
	}
	return ""
}

// TestDrawTranscriptAltered: a transcript as drawn checks out; each piece
// altered (a registrant added after the close, one dropped, the seed, the
// beacon's value, two ranks swapped, the winners) fails, at the step that
// names it.
func TestDrawTranscriptAltered(t *testing.T) {
	t.Parallel()
	signer := testSigner(t)
	good := drawnLottery(t, signer, customers(9), 3, true)
	if f := failed(flashline.VerifyDrawTranscript(good, flashline.DrawPins{})); f != "" {
		t.Fatalf("the transcript as drawn: %s", f)
	}
	pinnedRoot := slices.Clone(good.Root)
	pinnedCommitment := slices.Clone(good.Commitment)
	me := flashline.RegistrantOf(good.SaleID, "cust_4")

	// redraw recomputes ranks, winners and waitlist from the transcript's
	// own (altered) pieces, as a store covering its tracks would.
	redraw := func(tr flashline.DrawTranscript, rs []flashline.Registrant) flashline.DrawTranscript {
		root := flashline.RegistrantsRoot(rs)
		tr.Root, tr.RegistrantCount = root[:], len(rs)
		tr.Ranked = flashline.LotteryRanking(flashline.LotteryFinalSeed(tr.SaleID, root, tr.Beacon.Randomness, tr.Seed), rs)
		tr.Ranks = nil
		for i := range tr.Ranked {
			tr.Ranks = append(tr.Ranks, i+1)
		}
		tr.Winners, tr.Waitlisted = tr.Ranked[:tr.Units], tr.Ranked[tr.Units:]
		return tr
	}
	clone := func() flashline.DrawTranscript {
		tr := good
		tr.Ranked, tr.Ranks = slices.Clone(good.Ranked), slices.Clone(good.Ranks)
		tr.Winners, tr.Waitlisted = slices.Clone(good.Winners), slices.Clone(good.Waitlisted)
		b := *good.Beacon
		tr.Beacon = &b
		return tr
	}
	late := flashline.RegistrantOf(good.SaleID, "cust_late")
	for _, tc := range []struct {
		name  string
		alter func() flashline.DrawTranscript
		pins  flashline.DrawPins
		step  string
	}{
		{"registrant added after the close, root kept", func() flashline.DrawTranscript {
			tr := redraw(clone(), append(slices.Clone(good.Ranked), late))
			tr.Root = good.Root
			tr.RegistrantCount = good.RegistrantCount
			return tr
		}, flashline.DrawPins{}, "registrants"},
		{"registrant added after the close, root recomputed", func() flashline.DrawTranscript {
			return redraw(clone(), append(slices.Clone(good.Ranked), late))
		}, flashline.DrawPins{Root: pinnedRoot}, "registrants"},
		{"registrant dropped, root kept", func() flashline.DrawTranscript {
			rs := slices.DeleteFunc(slices.Clone(good.Ranked), func(r flashline.Registrant) bool { return r == me })
			tr := redraw(clone(), rs)
			tr.Root, tr.RegistrantCount = good.Root, good.RegistrantCount
			return tr
		}, flashline.DrawPins{}, "registrants"},
		{"registrant dropped, root recomputed: the dropped customer checks", func() flashline.DrawTranscript {
			rs := slices.DeleteFunc(slices.Clone(good.Ranked), func(r flashline.Registrant) bool { return r == me })
			return redraw(clone(), rs)
		}, flashline.DrawPins{Registrant: &me}, "inclusion"},
		{"seed", func() flashline.DrawTranscript {
			tr := clone()
			tr.Seed = []byte("fedcba9876543210")
			return redraw(tr, good.Ranked)
		}, flashline.DrawPins{}, "commitment"},
		{"seed and commitment", func() flashline.DrawTranscript {
			tr := clone()
			tr.Seed = []byte("fedcba9876543210")
			c := sha256.Sum256(tr.Seed)
			tr.Commitment = c[:]
			return redraw(tr, good.Ranked)
		}, flashline.DrawPins{Commitment: pinnedCommitment}, "commitment"},
		{"beacon value", func() flashline.DrawTranscript {
			tr := clone()
			tr.Beacon.Randomness = slices.Clone(tr.Beacon.Randomness)
			tr.Beacon.Randomness[0] ^= 0x80
			return redraw(tr, good.Ranked)
		}, flashline.DrawPins{}, "beacon"},
		{"beacon round of another time", func() flashline.DrawTranscript {
			tr := clone()
			tr.Beacon.BeaconRound = signer.Round(tr.Beacon.Round - 1)
			return redraw(tr, good.Ranked)
		}, flashline.DrawPins{}, "beacon"},
		{"beacon of another key", func() flashline.DrawTranscript {
			other, err := flashline.NewBeaconSigner([]byte("a key the store made for itself, 32+ bytes"))
			if err != nil {
				t.Fatal(err)
			}
			tr := clone()
			tr.Beacon.Chain.PublicKey = other.PublicKey()
			tr.Beacon.BeaconRound = other.Round(tr.Beacon.Round)
			return redraw(tr, good.Ranked)
		}, flashline.DrawPins{BeaconPublicKey: signer.PublicKey()}, "beacon"},
		{"two ranks swapped", func() flashline.DrawTranscript {
			tr := clone()
			tr.Ranked[0], tr.Ranked[5] = tr.Ranked[5], tr.Ranked[0]
			return tr
		}, flashline.DrawPins{}, "ranks"},
		{"a winner swapped with the first waitlisted", func() flashline.DrawTranscript {
			tr := clone()
			tr.Winners[2], tr.Waitlisted[0] = tr.Waitlisted[0], tr.Winners[2]
			return tr
		}, flashline.DrawPins{}, "outcome"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := failed(flashline.VerifyDrawTranscript(tc.alter(), tc.pins))
			if !strings.HasPrefix(f, tc.step+":") {
				t.Fatalf("failed at %q, want the step %q", f, tc.step)
			}
		})
	}
}

// TestInsiderCannotTellRanks: an insider holding everything stored before
// the close (the store's seed, every registrant, the root, the beacon's
// chain and the round to come) mints customer ids until one ranks first by
// what they can compute; the draw, with the beacon round published after
// the close, does not rank it first. Under the seed alone (the draw before
// the beacon), the same insider's pick ranked first.
func TestInsiderCannotTellRanks(t *testing.T) {
	t.Parallel()
	const sale = "sale_01JTESTINSIDER00000000000"
	seed := []byte("0123456789abcdef") // read from the database before the close
	honest := customers(20)

	// The insider's pick: the minted id ranked first by the seed and the
	// registrants, the beacon's value unknown (taken as none).
	bestUnder := func(order func(ids []string) []string) string {
		best := ""
		for i := range 200 {
			minted := fmt.Sprintf("cust_minted_%d", i)
			if order(append(slices.Clone(honest), minted))[0] == minted {
				best = minted
				break
			}
		}
		if best == "" {
			t.Fatal("no minted id ranked first")
		}
		return best
	}
	predict := func(ids []string) []string {
		rs := make([]flashline.Registrant, len(ids))
		for i, c := range ids {
			rs[i] = flashline.RegistrantOf(sale, c)
		}
		return flashline.LotteryOrderV2(sale, flashline.LotteryFinalSeed(sale, flashline.RegistrantsRoot(rs), nil, seed), ids)
	}
	pick := bestUnder(predict)

	// The draw: the beacon's round, published after the close.
	signer := testSigner(t)
	ids := append(slices.Clone(honest), pick)
	rs := make([]flashline.Registrant, len(ids))
	for i, c := range ids {
		rs[i] = flashline.RegistrantOf(sale, c)
	}
	root := flashline.RegistrantsRoot(rs)
	ranksOfPick := map[int]bool{}
	for round := uint64(1000); round < 1008; round++ {
		b := signer.Round(round)
		order := flashline.LotteryOrderV2(sale, flashline.LotteryFinalSeed(sale, root, b.Randomness, seed), ids)
		ranksOfPick[slices.Index(order, pick)+1] = true
	}
	if len(ranksOfPick) < 2 {
		t.Fatalf("the minted id's rank is the same whatever the beacon's value: %v", ranksOfPick)
	}
	drawn := flashline.LotteryOrderV2(sale, flashline.LotteryFinalSeed(sale, root, signer.Round(1000).Randomness, seed), ids)
	if drawn[0] == pick {
		t.Fatalf("the insider's pick %s ranked first by the draw", pick)
	}

	// Before: the order followed from the seed alone.
	old := bestUnder(func(ids []string) []string { return flashline.LotteryOrder(seed, sale, ids) })
	if flashline.LotteryOrder(seed, sale, append(slices.Clone(honest), old))[0] != old {
		t.Fatal("under the seed alone the insider's pick should rank first")
	}
}

// TestRegistrantProof: every registrant's inclusion proof leads to the
// root, for sizes around powers of two; a proof does not serve another
// registrant or another root.
func TestRegistrantProof(t *testing.T) {
	t.Parallel()
	if got, want := flashline.RegistrantsRoot(nil), sha256.Sum256(nil); got != want {
		t.Fatalf("the empty root is %x, want SHA-256(\"\")", got)
	}
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17} {
		rs := make([]flashline.Registrant, n)
		for i := range rs {
			rs[i] = flashline.RegistrantOf("sale_x", fmt.Sprint("c", i))
		}
		root := flashline.RegistrantsRoot(rs)
		for i, r := range rs {
			p, ok := flashline.RegistrantProof(rs, r)
			if !ok || !flashline.VerifyRegistrantProof(root, r, p) {
				t.Fatalf("n=%d: registrant %d's proof does not verify", n, i)
			}
			if n > 1 && flashline.VerifyRegistrantProof(root, rs[(i+1)%n], p) {
				t.Fatalf("n=%d: registrant %d's proof verifies another", n, i)
			}
		}
		if _, ok := flashline.RegistrantProof(rs, flashline.RegistrantOf("sale_x", "absent")); ok {
			t.Fatalf("n=%d: a proof for an absent registrant", n)
		}
	}
	// A leaf is not a node: H(0x00 ‖ r) and H(0x01 ‖ l ‖ r) never meet,
	// and the leaves are sorted, so the root does not depend on the order given.
	a := []flashline.Registrant{flashline.RegistrantOf("s", "a"), flashline.RegistrantOf("s", "b"), flashline.RegistrantOf("s", "c")}
	b := []flashline.Registrant{a[2], a[0], a[1]}
	if flashline.RegistrantsRoot(a) != flashline.RegistrantsRoot(b) {
		t.Fatal("the root depends on the order given")
	}
}
