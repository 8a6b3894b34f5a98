package flashline_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// committedCrowd is a room's crowd as the freeze commits it.
func committedCrowd(saleID string, holders []string, preopen int64) flashline.Crowd {
	seed := []byte("0123456789abcdef")
	rs := make([]flashline.Registrant, len(holders))
	for i, h := range holders {
		rs[i] = flashline.RegistrantOf(saleID, h)
	}
	root := flashline.RegistrantsRoot(rs)
	f := flashline.LotteryFinalSeed(saleID, root, nil, seed)
	at := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	return flashline.Crowd{SaleID: saleID, Fairness: flashline.FairnessRandomizedAtOpen, Seed: seed, PreopenCount: preopen,
		Root: root[:], HolderCount: int64(len(holders)), CommittedAt: &at, FinalSeed: f[:], Holders: holders}
}

// firstFailure is the name of the first step that fails ("" none).
func firstFailure(steps []flashline.DrawStep) string {
	for _, s := range steps {
		if !s.OK {
			return s.Name
		}
	}
	return ""
}

// TestCrowdTranscriptShowsTampering: a committed crowd's transcript checks
// out, a customer finds their own rank in it, and each alteration (a holder
// added or dropped after the commitment, two ranks swapped, another seed)
// fails the step that says so.
func TestCrowdTranscriptShowsTampering(t *testing.T) {
	t.Parallel()
	const sale = "sale_01JCROWD0000000000000000"
	holders := make([]string, 50)
	for i := range holders {
		holders[i] = fmt.Sprintf("cust-%02d", i)
	}
	c := committedCrowd(sale, holders, 60)
	tr := flashline.NewCrowdTranscript(c)
	me := flashline.RegistrantOf(sale, "cust-07")
	require.Empty(t, firstFailure(flashline.VerifyDrawTranscript(tr, flashline.DrawPins{Root: c.Root, Registrant: &me})))

	// My rank, from the document alone.
	var f [32]byte
	copy(f[:], c.FinalSeed)
	i := slices.Index(tr.Ranked, me)
	require.GreaterOrEqual(t, i, 0)
	require.EqualValues(t, flashline.CrowdRank(f, me, 60), tr.Ranks[i])
	require.True(t, slices.IsSorted(tr.Ranks), "listed in the draw's order")

	t.Run("HoldersChangeTheRoot", func(t *testing.T) {
		more := committedCrowd(sale, append(slices.Clone(holders), "cust-extra"), 60)
		fewer := committedCrowd(sale, holders[1:], 60)
		require.NotEqual(t, c.Root, more.Root)
		require.NotEqual(t, c.Root, fewer.Root)
		require.NotEqual(t, c.FinalSeed, more.FinalSeed, "the final seed follows the root")
	})
	t.Run("HolderAdded", func(t *testing.T) {
		bad := c
		bad.Holders = append(slices.Clone(holders), "cust-extra")
		require.Equal(t, "registrants", firstFailure(flashline.VerifyDrawTranscript(flashline.NewCrowdTranscript(bad), flashline.DrawPins{})))
	})
	t.Run("HolderDropped", func(t *testing.T) {
		bad := c
		bad.Holders = slices.DeleteFunc(slices.Clone(holders), func(h string) bool { return h == "cust-07" })
		bad.HolderCount--
		tr := flashline.NewCrowdTranscript(bad)
		require.Equal(t, "registrants", firstFailure(flashline.VerifyDrawTranscript(tr, flashline.DrawPins{})))
		require.Equal(t, "inclusion", firstFailure(flashline.VerifyDrawTranscript(tr, flashline.DrawPins{Registrant: &me})[2:3]))
	})
	t.Run("RanksSwapped", func(t *testing.T) {
		bad := flashline.NewCrowdTranscript(c)
		bad.Ranks = slices.Clone(bad.Ranks)
		bad.Ranks[0], bad.Ranks[len(bad.Ranks)-1] = bad.Ranks[len(bad.Ranks)-1], bad.Ranks[0]
		require.Equal(t, "ranks", firstFailure(flashline.VerifyDrawTranscript(bad, flashline.DrawPins{})))
	})
	t.Run("SeedChanged", func(t *testing.T) {
		bad := flashline.NewCrowdTranscript(c)
		bad.Seed = []byte("fedcba9876543210")
		require.Equal(t, "commitment", firstFailure(flashline.VerifyDrawTranscript(bad, flashline.DrawPins{})))
	})
}

// TestCrowdTranscriptWithBeacon: a crowd ranked with its beacon round
// checks out from the transcript alone, and a changed beacon value, a
// round published before the commitment, another chain's signature, or
// the beacon left out (the seed computed without it) each fail.
func TestCrowdTranscriptWithBeacon(t *testing.T) {
	t.Parallel()
	const sale = "sale_01JCROWDBEACON00000000000"
	signer, err := flashline.NewBeaconSigner([]byte("crowd beacon test key material ................................"))
	require.NoError(t, err)
	holders := make([]string, 30)
	for i := range holders {
		holders[i] = fmt.Sprintf("cust-%02d", i)
	}
	c := committedCrowd(sale, holders, 40)
	opens := c.CommittedAt.Add(-300 * time.Millisecond)
	chain := flashline.BeaconChain{PublicKey: signer.PublicKey(), Genesis: opens.Add(-time.Hour), Period: 3 * time.Second}
	round := signer.Round(flashline.CrowdRound(chain, opens))
	withBeacon := func(c flashline.Crowd, b flashline.BeaconRound) flashline.Crowd {
		var root [32]byte
		copy(root[:], c.Root)
		f := flashline.LotteryFinalSeed(sale, root, b.Randomness, c.Seed)
		c.FinalSeed = f[:]
		c.Beacon = &flashline.BeaconRecord{Chain: chain, BeaconRound: b}
		return c
	}
	good := withBeacon(c, round)
	require.True(t, chain.RoundTime(round.Round).After(*c.CommittedAt), "the round comes after the commitment")
	tr := flashline.NewCrowdTranscript(good)
	require.NotNil(t, tr.Beacon)
	require.Empty(t, firstFailure(flashline.VerifyDrawTranscript(tr, flashline.DrawPins{BeaconPublicKey: signer.PublicKey()})))
	require.NotEqual(t, flashline.NewCrowdTranscript(c).Ranked, tr.Ranked, "the beacon changes the order")

	t.Run("RandomnessChanged", func(t *testing.T) {
		bad := flashline.NewCrowdTranscript(good)
		b := *bad.Beacon
		b.Randomness = slices.Clone(b.Randomness)
		b.Randomness[0] ^= 1
		bad.Beacon = &b
		require.Equal(t, "beacon", firstFailure(flashline.VerifyDrawTranscript(bad, flashline.DrawPins{})))
	})
	t.Run("RoundBeforeTheCommitment", func(t *testing.T) {
		early := withBeacon(c, signer.Round(chain.RoundAt(*c.CommittedAt)))
		require.Equal(t, "beacon", firstFailure(flashline.VerifyDrawTranscript(flashline.NewCrowdTranscript(early), flashline.DrawPins{})))
	})
	t.Run("AnotherChain", func(t *testing.T) {
		other, err := flashline.NewBeaconSigner([]byte("another beacon's key material ................................."))
		require.NoError(t, err)
		bad := withBeacon(c, other.Round(round.Round))
		require.Equal(t, "beacon", firstFailure(flashline.VerifyDrawTranscript(flashline.NewCrowdTranscript(bad), flashline.DrawPins{})))
	})
	t.Run("BeaconLeftOut", func(t *testing.T) {
		bad := flashline.NewCrowdTranscript(good)
		bad.Beacon = nil
		require.Equal(t, "ranks", firstFailure(flashline.VerifyDrawTranscript(bad, flashline.DrawPins{})))
	})
	t.Run("NotRankedBeforeTheRound", func(t *testing.T) {
		waiting := good
		waiting.FinalSeed = nil
		waiting.Beacon = &flashline.BeaconRecord{Chain: chain, BeaconRound: flashline.BeaconRound{Round: round.Round}}
		tr := flashline.NewCrowdTranscript(waiting)
		require.Nil(t, tr.Seed)
		require.Empty(t, tr.Ranked)
		require.Equal(t, round.Round, tr.Beacon.Round, "the round is published before its value")
	})
}
