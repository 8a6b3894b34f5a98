package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
)

// TestCrowdCommittedAtTheFreeze: the pre-open holders, written in batches,
// are committed by the lease that freezes the crowd (their root and the
// final seed, in its transaction); a holder written after the freeze is
// refused and left out; the published crowd checks out, and a changed
// holder set does not.
func TestCrowdCommittedAtTheFreeze(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	store := NewStore(SinglePool(pool), Options{})
	opens := time.Now().Add(time.Hour)
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_crowd", InitialStock: 10,
		Admission: flashline.AdmissionWaitingRoom, Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
	require.NoError(t, err)

	var holders []string
	for i := range 3 {
		batch := make([]string, 40)
		for j := range batch {
			batch[j] = fmt.Sprintf("cust-%d-%d", i, j)
		}
		holders = append(holders, batch...)
		require.NoError(t, store.AddHolders(ctx, sale.ID, batch))
	}
	require.NoError(t, store.AddHolders(ctx, sale.ID, holders[:5]), "a holder written twice is one holder")
	require.NoError(t, store.CountTickets(ctx, sale.ID, int64(len(holders))))
	c, err := store.Crowd(ctx, sale.ID)
	require.NoError(t, err)
	require.Nil(t, c.Root, "nothing committed before the open")

	// The open came a second ago: the next lease freezes and commits.
	_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = now() - interval '1 second' WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	_, preOpen, err := store.LeasePositions(ctx, sale.ID, 1, 0)
	require.NoError(t, err)
	require.False(t, preOpen)

	require.ErrorIs(t, store.AddHolders(ctx, sale.ID, []string{"late-customer"}), flashline.ErrCrowdCommitted)
	c, err = store.Crowd(ctx, sale.ID)
	require.NoError(t, err)
	require.NotContains(t, c.Holders, "late-customer", "a holder written after the freeze is left out")
	require.Len(t, c.Holders, len(holders))
	rs := make([]flashline.Registrant, len(holders))
	for i, h := range holders {
		rs[i] = flashline.RegistrantOf(sale.ID, h)
	}
	root := flashline.RegistrantsRoot(rs)
	require.Equal(t, root[:], c.Root)
	require.EqualValues(t, len(holders), c.HolderCount)
	require.EqualValues(t, len(holders), c.PreopenCount)
	f := flashline.LotteryFinalSeed(sale.ID, root, nil, c.Seed)
	require.Equal(t, f[:], c.FinalSeed)

	// The audit reads the final seed: a customer's rank is CrowdRank.
	rec, err := store.DrawRecord(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, c.FinalSeed, rec.FinalSeed)

	steps := flashline.VerifyDrawTranscript(flashline.NewCrowdTranscript(c), flashline.DrawPins{})
	for _, s := range steps {
		require.True(t, s.OK, "%s: %s", s.Name, s.Detail)
	}
	// A holder slipped in after the commitment shows.
	tampered := c
	tampered.Holders = append(append([]string(nil), c.Holders...), "late-customer")
	failed := ""
	for _, s := range flashline.VerifyDrawTranscript(flashline.NewCrowdTranscript(tampered), flashline.DrawPins{}) {
		if !s.OK && failed == "" {
			failed = s.Name
		}
	}
	require.Equal(t, "registrants", failed)
}
