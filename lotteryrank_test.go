package flashline_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestRegistrantHashesAsTheFormulaSays: the hashing a crowd's freeze and
// its transcript do a million times (issue 48) allocates nothing, and still
// gives the formula's values (docs/lottery.md), computed here the plain
// way: r, the leaves and root, and the draw's order by k, ties by r. Not
// parallel: testing.AllocsPerRun may not be.
func TestRegistrantHashesAsTheFormulaSays(t *testing.T) {
	const sale = "sale_rank"
	plain := func(parts ...[]byte) [32]byte { return sha256.Sum256(bytes.Join(parts, nil)) }
	var rs []flashline.Registrant
	for i := range 33 {
		c := fmt.Sprintf("cust-%d", i)
		r := flashline.RegistrantOf(sale, c)
		require.Equal(t, plain([]byte("flashline/lottery/registrant/v1"), []byte{0}, []byte(sale), []byte{0}, []byte(c)), [32]byte(r))
		require.Equal(t, plain([]byte{0}, r[:]), flashline.RegistrantLeaf(r))
		rs = append(rs, r)
	}
	rs = append(rs, rs[0]) // a tie on k, broken by r
	sorted := slices.Clone(rs)
	flashline.SortRegistrants(sorted)
	require.True(t, slices.IsSortedFunc(sorted, func(a, b flashline.Registrant) int { return bytes.Compare(a[:], b[:]) }))
	level := make([][32]byte, len(sorted))
	for i, r := range sorted {
		level[i] = plain([]byte{0}, r[:])
	}
	for len(level) > 1 {
		var next [][32]byte
		for i := 0; i < len(level); i += 2 {
			if i+1 == len(level) {
				next = append(next, level[i])
			} else {
				next = append(next, plain([]byte{1}, level[i][:], level[i+1][:]))
			}
		}
		level = next
	}
	require.Equal(t, level[0], flashline.RegistrantsRoot(rs))

	f := plain([]byte("final"))
	want := slices.Clone(rs)
	slices.SortStableFunc(want, func(a, b flashline.Registrant) int {
		ka, kb := plain(f[:], a[:]), plain(f[:], b[:])
		if c := bytes.Compare(ka[:], kb[:]); c != 0 {
			return c
		}
		return bytes.Compare(a[:], b[:])
	})
	require.Equal(t, want, flashline.LotteryRanking(f, rs))

	r := rs[1]
	require.Zero(t, testing.AllocsPerRun(100, func() { r = flashline.RegistrantOf(sale, "cust-1") }), "RegistrantOf allocates")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = flashline.RegistrantLeaf(r) }), "RegistrantLeaf allocates")
}
