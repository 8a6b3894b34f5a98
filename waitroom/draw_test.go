package waitroom_test

import (
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom"
)

func TestDrawCommitment(t *testing.T) {
	t.Parallel()
	seed := []byte("0123456789abcdef")
	// echo -n 0123456789abcdef | sha256sum
	const want = "9f9f5111f7b27a781f1f1ddde5ebc2dd2b796bfc7365c9c28b548e564176929f"
	require.Equal(t, want, waitroom.DrawCommitment(seed))

	before := waitroom.DiscloseDraw(seed, false)
	require.Equal(t, want, before.Commitment)
	require.Nil(t, before.Seed, "the seed stays secret before the open")
	after := waitroom.DiscloseDraw(seed, true)
	require.Equal(t, seed, after.Seed)

	got, err := waitroom.VerifyDrawSeed(after.Commitment, hex.EncodeToString(after.Seed))
	require.NoError(t, err)
	require.Equal(t, seed, got)
	for name, tt := range map[string][2]string{
		"OtherSeed":         {want, hex.EncodeToString([]byte("0123456789abcdeF"))},
		"NoSeed":            {want, ""},
		"SeedNotHex":        {want, "zz"},
		"CommitmentShort":   {want[:62], hex.EncodeToString(seed)},
		"CommitmentNotHex":  {"x" + want[1:], hex.EncodeToString(seed)},
		"CommitmentToOther": {waitroom.DrawCommitment([]byte("other")), hex.EncodeToString(seed)},
	} {
		_, err := waitroom.VerifyDrawSeed(tt[0], tt[1])
		require.ErrorIs(t, err, waitroom.ErrDrawMismatch, name)
	}
}

func TestAuditDraw(t *testing.T) {
	t.Parallel()
	seed := []byte("fedcba9876543210")
	const sale, n = "sale_audit", 100
	rank := func(c string) int64 {
		return waitroom.Rank(waitroom.Ticket{PreOpen: true, Position: 1, Draw: waitroom.Draw(seed, sale, c)}, flashline.FairnessRandomizedAtOpen, n)
	}
	var inside, outside []waitroom.AdmittedCustomer
	for i := 0; len(inside) < 5 || len(outside) < 1; i++ {
		c := waitroom.AdmittedCustomer{CustomerID: fmt.Sprintf("cust-%d", i)}
		if rank(c.CustomerID) <= 20 {
			inside = append(inside, c)
		} else if len(outside) == 0 {
			outside = append(outside, c)
		}
	}
	rec := waitroom.DrawRecord{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen, PreopenCount: n, AdmittedThrough: 20, Admitted: inside}

	t.Run("InOrder", func(t *testing.T) {
		a := waitroom.AuditDraw(seed, rec)
		require.True(t, a.Decisive)
		require.Zero(t, a.Problems())
		for _, c := range a.Checks {
			require.Equal(t, waitroom.Draw(seed, sale, c.CustomerID), c.Draw)
			require.LessOrEqual(t, c.Rank, int64(20))
		}
	})
	t.Run("OutOfOrder", func(t *testing.T) {
		bad := rec
		bad.Admitted = append(append([]waitroom.AdmittedCustomer(nil), inside...), outside...)
		a := waitroom.AuditDraw(seed, bad)
		require.Equal(t, 1, a.Problems())
		require.Contains(t, a.Checks[len(a.Checks)-1].Problem, "beyond the watermark 20")
	})
	t.Run("WrongSeedShowsUp", func(t *testing.T) {
		// Audited with another seed, the same admissions fall out of order.
		a := waitroom.AuditDraw([]byte("not the seed...."), waitroom.DrawRecord{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen,
			PreopenCount: 1000, AdmittedThrough: 1, Admitted: inside})
		require.NotZero(t, a.Problems())
	})
	t.Run("NotDecisive", func(t *testing.T) {
		for _, r := range []waitroom.DrawRecord{
			{SaleID: sale, Fairness: flashline.FairnessArrivalOrder, PreopenCount: n, AdmittedThrough: 1, Admitted: outside},
			{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen, PreopenCount: -1, Admitted: outside},
			{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen, PreopenCount: n, AdmittedThrough: n + 1, Admitted: outside},
		} {
			a := waitroom.AuditDraw(seed, r)
			require.False(t, a.Decisive)
			require.Zero(t, a.Problems())
			require.NotEmpty(t, a.Note)
		}
	})
}
