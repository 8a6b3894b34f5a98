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
