package flashline_test

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

func TestDrawCommitment(t *testing.T) {
	t.Parallel()
	seed := []byte("0123456789abcdef")
	// echo -n 0123456789abcdef | sha256sum
	const want = "9f9f5111f7b27a781f1f1ddde5ebc2dd2b796bfc7365c9c28b548e564176929f"
	require.Equal(t, want, flashline.DrawCommitment(seed))

	before := flashline.DiscloseDraw(seed, false)
	require.Equal(t, want, before.Commitment)
	require.Nil(t, before.Seed, "the seed stays secret before the open")
	after := flashline.DiscloseDraw(seed, true)
	require.Equal(t, seed, after.Seed)

	got, err := flashline.VerifyDrawSeed(after.Commitment, hex.EncodeToString(after.Seed))
	require.NoError(t, err)
	require.Equal(t, seed, got)
	for name, tt := range map[string][2]string{
		"OtherSeed":         {want, hex.EncodeToString([]byte("0123456789abcdeF"))},
		"NoSeed":            {want, ""},
		"SeedNotHex":        {want, "zz"},
		"CommitmentShort":   {want[:62], hex.EncodeToString(seed)},
		"CommitmentNotHex":  {"x" + want[1:], hex.EncodeToString(seed)},
		"CommitmentToOther": {flashline.DrawCommitment([]byte("other")), hex.EncodeToString(seed)},
	} {
		_, err := flashline.VerifyDrawSeed(tt[0], tt[1])
		require.ErrorIs(t, err, flashline.ErrDrawMismatch, name)
	}
}

func TestAuditDraw(t *testing.T) {
	t.Parallel()
	seed := []byte("fedcba9876543210")
	const sale, n = "sale_audit", 100
	rank := func(c string) int64 {
		return flashline.DrawRank(flashline.Draw(seed, sale, c), n)
	}
	var inside, outside []flashline.AdmittedCustomer
	for i := 0; len(inside) < 5 || len(outside) < 1; i++ {
		c := flashline.AdmittedCustomer{CustomerID: fmt.Sprintf("cust-%d", i)}
		if rank(c.CustomerID) <= 20 {
			inside = append(inside, c)
		} else if len(outside) == 0 {
			outside = append(outside, c)
		}
	}
	rec := flashline.DrawRecord{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen, PreopenCount: n, AdmittedThrough: 20, Admitted: inside}

	t.Run("InOrder", func(t *testing.T) {
		a := flashline.AuditDraw(seed, rec)
		require.True(t, a.Decisive)
		require.Zero(t, a.Problems())
		for _, c := range a.Checks {
			require.Equal(t, flashline.Draw(seed, sale, c.CustomerID), c.Draw)
			require.LessOrEqual(t, c.Rank, int64(20))
		}
	})
	t.Run("OutOfOrder", func(t *testing.T) {
		bad := rec
		bad.Admitted = append(append([]flashline.AdmittedCustomer(nil), inside...), outside...)
		a := flashline.AuditDraw(seed, bad)
		require.Equal(t, 1, a.Problems())
		require.Contains(t, a.Checks[len(a.Checks)-1].Problem, "beyond the watermark 20")
	})
	t.Run("WrongSeedShowsUp", func(t *testing.T) {
		// Audited with another seed, the same admissions fall out of order.
		a := flashline.AuditDraw([]byte("not the seed...."), flashline.DrawRecord{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen,
			PreopenCount: 1000, AdmittedThrough: 1, Admitted: inside})
		require.NotZero(t, a.Problems())
	})
	t.Run("NotDecisive", func(t *testing.T) {
		for _, r := range []flashline.DrawRecord{
			{SaleID: sale, Fairness: flashline.FairnessArrivalOrder, PreopenCount: n, AdmittedThrough: 1, Admitted: outside},
			{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen, PreopenCount: -1, Admitted: outside},
			{SaleID: sale, Fairness: flashline.FairnessRandomizedAtOpen, PreopenCount: n, AdmittedThrough: n + 1, Admitted: outside},
		} {
			a := flashline.AuditDraw(seed, r)
			require.False(t, a.Decisive)
			require.Zero(t, a.Problems())
			require.NotEmpty(t, a.Note)
		}
	})
}

func TestLotteryOrder(t *testing.T) {
	seed := []byte("0123456789abcdef")
	customers := []string{"c", "a", "b", "d", "e"}
	order := flashline.LotteryOrder(seed, "sale_1", customers)
	require.Equal(t, []string{"c", "a", "b", "d", "e"}, customers, "the input is not modified")
	require.ElementsMatch(t, customers, order)
	for i := 1; i < len(order); i++ {
		require.Less(t, flashline.Draw(seed, "sale_1", order[i-1]), flashline.Draw(seed, "sale_1", order[i]))
	}
	// The order depends only on the seed, the sale and who registered.
	reversed := slices.Clone(customers)
	slices.Reverse(reversed)
	require.Equal(t, order, flashline.LotteryOrder(seed, "sale_1", reversed))
	require.NotEqual(t, order, flashline.LotteryOrder([]byte("another seed 123"), "sale_1", customers))
}

func TestAuditLottery(t *testing.T) {
	seed := []byte("0123456789abcdef")
	const sale, units = "sale_1", 2
	var customers []string
	for i := range 6 {
		customers = append(customers, fmt.Sprintf("cust_%d", i))
	}
	order := flashline.LotteryOrder(seed, sale, customers)
	// A faithful record: the first two won (the second let the window pass),
	// the third promoted, the rest waitlisted.
	faithful := func() []flashline.LotteryEntry {
		var e []flashline.LotteryEntry
		for i, c := range order {
			state := flashline.RegistrationWaitlisted
			switch {
			case i == 1:
				state = flashline.RegistrationExpired
			case i < units+1:
				state = flashline.RegistrationWon
			}
			e = append(e, flashline.LotteryEntry{CustomerID: c, State: state, Rank: i + 1})
		}
		return e
	}
	a := flashline.AuditLottery(seed, sale, units, true, faithful())
	require.Zero(t, a.Problems(), "%+v", a.Checks)
	require.Equal(t, 1, a.Promoted)
	require.Equal(t, 1, a.Expired)

	cases := map[string]func([]flashline.LotteryEntry){
		"RankSwapped": func(e []flashline.LotteryEntry) { e[0].Rank, e[1].Rank = e[1].Rank, e[0].Rank },
		"WinnerLost":  func(e []flashline.LotteryEntry) { e[0].State = flashline.RegistrationLost },
		"PromotedOutOfOrder": func(e []flashline.LotteryEntry) {
			e[2].State, e[4].State = flashline.RegistrationWaitlisted, flashline.RegistrationWon
		},
		"PromotedWithoutExpiry": func(e []flashline.LotteryEntry) {
			e[1].State = flashline.RegistrationWon
			e[3].State = flashline.RegistrationWon
		},
		"NotDrawn": func(e []flashline.LotteryEntry) { e[5].State, e[5].Rank = flashline.RegistrationRegistered, 0 },
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			e := faithful()
			tamper(e)
			require.NotZero(t, flashline.AuditLottery(seed, sale, units, true, e).Problems())
		})
	}
	t.Run("NoWaitlist", func(t *testing.T) {
		e := faithful()
		require.NotZero(t, flashline.AuditLottery(seed, sale, units, false, e).Problems())
		for i := range e[units:] {
			e[units+i].State = flashline.RegistrationLost
		}
		e[1].State = flashline.RegistrationWon
		require.Zero(t, flashline.AuditLottery(seed, sale, units, false, e).Problems())
	})
}

func TestDraw(t *testing.T) {
	t.Parallel()
	seed := []byte("seed-0123456789ab")
	// From Python: first 8 bytes of SHA-256(seed || "sale_1" || 0x00 || "cust_1").
	require.Equal(t, uint64(394214697377342774), flashline.Draw(seed, "sale_1", "cust_1"))

	tests := []struct {
		name string
		a, b [3]string // seed, sale, customer
	}{
		{"OtherCustomer", [3]string{"seed", "s", "c1"}, [3]string{"seed", "s", "c2"}},
		{"OtherSale", [3]string{"seed", "s1", "c"}, [3]string{"seed", "s2", "c"}},
		{"OtherSeed", [3]string{"seed1", "s", "c"}, [3]string{"seed2", "s", "c"}},
		{"SeparatorBetweenSaleAndCustomer", [3]string{"seed", "ab", "c"}, [3]string{"seed", "a", "bc"}},
		{"NoSeed", [3]string{"", "s", "c1"}, [3]string{"", "s", "c2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			da := flashline.Draw([]byte(tt.a[0]), tt.a[1], tt.a[2])
			require.Equal(t, da, flashline.Draw([]byte(tt.a[0]), tt.a[1], tt.a[2]), "deterministic")
			require.NotEqual(t, da, flashline.Draw([]byte(tt.b[0]), tt.b[1], tt.b[2]))
		})
	}

	t.Run("Spread", func(t *testing.T) {
		t.Parallel()
		// 1000 customers fall into the top and bottom halves about evenly
		// and never collide.
		seen := make(map[uint64]bool)
		top := 0
		for i := range 1000 {
			d := flashline.Draw(seed, "sale_1", "cust_"+strconv.Itoa(i))
			require.False(t, seen[d])
			seen[d] = true
			if d >= 1<<63 {
				top++
			}
		}
		require.InDelta(t, 500, top, 100)
	})
}

// BenchmarkDraw is a customer's draw, computed for every new pre-open ticket.
func BenchmarkDraw(b *testing.B) {
	seed := []byte("seed-0123456789abcdef0123456789ab")
	b.ReportAllocs()
	for b.Loop() {
		_ = flashline.Draw(seed, "sale_01M98BYEW9VE5Y9X8M48DE3MNA", "edge-bench-17")
	}
}
