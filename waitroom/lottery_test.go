package waitroom_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom"
)

func TestLotteryOrder(t *testing.T) {
	seed := []byte("0123456789abcdef")
	customers := []string{"c", "a", "b", "d", "e"}
	order := waitroom.LotteryOrder(seed, "sale_1", customers)
	require.Equal(t, []string{"c", "a", "b", "d", "e"}, customers, "the input is not modified")
	require.ElementsMatch(t, customers, order)
	for i := 1; i < len(order); i++ {
		require.Less(t, waitroom.Draw(seed, "sale_1", order[i-1]), waitroom.Draw(seed, "sale_1", order[i]))
	}
	// The order depends only on the seed, the sale and who registered.
	reversed := slices.Clone(customers)
	slices.Reverse(reversed)
	require.Equal(t, order, waitroom.LotteryOrder(seed, "sale_1", reversed))
	require.NotEqual(t, order, waitroom.LotteryOrder([]byte("another seed 123"), "sale_1", customers))
}

func TestAuditLottery(t *testing.T) {
	seed := []byte("0123456789abcdef")
	const sale, units = "sale_1", 2
	var customers []string
	for i := range 6 {
		customers = append(customers, fmt.Sprintf("cust_%d", i))
	}
	order := waitroom.LotteryOrder(seed, sale, customers)
	// A faithful record: the first two won (the second let the window pass),
	// the third promoted, the rest waitlisted.
	faithful := func() []waitroom.LotteryEntry {
		var e []waitroom.LotteryEntry
		for i, c := range order {
			state := flashline.RegistrationWaitlisted
			switch {
			case i == 1:
				state = flashline.RegistrationExpired
			case i < units+1:
				state = flashline.RegistrationWon
			}
			e = append(e, waitroom.LotteryEntry{CustomerID: c, State: state, Rank: i + 1})
		}
		return e
	}
	a := waitroom.AuditLottery(seed, sale, units, true, faithful())
	require.Zero(t, a.Problems(), "%+v", a.Checks)
	require.Equal(t, 1, a.Promoted)
	require.Equal(t, 1, a.Expired)

	cases := map[string]func([]waitroom.LotteryEntry){
		"RankSwapped": func(e []waitroom.LotteryEntry) { e[0].Rank, e[1].Rank = e[1].Rank, e[0].Rank },
		"WinnerLost":  func(e []waitroom.LotteryEntry) { e[0].State = flashline.RegistrationLost },
		"PromotedOutOfOrder": func(e []waitroom.LotteryEntry) {
			e[2].State, e[4].State = flashline.RegistrationWaitlisted, flashline.RegistrationWon
		},
		"PromotedWithoutExpiry": func(e []waitroom.LotteryEntry) {
			e[1].State = flashline.RegistrationWon
			e[3].State = flashline.RegistrationWon
		},
		"NotDrawn": func(e []waitroom.LotteryEntry) { e[5].State, e[5].Rank = flashline.RegistrationRegistered, 0 },
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			e := faithful()
			tamper(e)
			require.NotZero(t, waitroom.AuditLottery(seed, sale, units, true, e).Problems())
		})
	}
	t.Run("NoWaitlist", func(t *testing.T) {
		e := faithful()
		require.NotZero(t, waitroom.AuditLottery(seed, sale, units, false, e).Problems())
		for i := range e[units:] {
			e[units+i].State = flashline.RegistrationLost
		}
		e[1].State = flashline.RegistrationWon
		require.Zero(t, waitroom.AuditLottery(seed, sale, units, false, e).Problems())
	})
}

func TestRegistrationChallenge(t *testing.T) {
	k := waitroom.DeriveKeyring("registration-challenge-test-secret")
	nonce := k.RegistrationNonce("sale_1", "cust_1")
	require.NotEqual(t, nonce, k.RegistrationNonce("sale_1", "cust_2"))
	require.NotEqual(t, nonce, k.RegistrationNonce("sale_2", "cust_1"))
	solution := waitroom.Solve(nonce, 8)
	require.True(t, k.VerifyRegistrationChallenge("sale_1", "cust_1", solution, 8))
	require.True(t, k.VerifyRegistrationChallenge("sale_1", "cust_1", "", 0), "no challenge")
	require.False(t, k.VerifyRegistrationChallenge("sale_1", "cust_2", waitroom.Solve(nonce, 16), 16))
	require.False(t, k.VerifyRegistrationChallenge("sale_1", "cust_1", "-1", 8))
}
