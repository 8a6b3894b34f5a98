package flashline

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// The lottery's orders (lotterydraw.go): the registrants sorted for their
// Merkle tree, and ranked by the draw.

// SortRegistrants sorts rs ascending in place.
func SortRegistrants(rs []Registrant) { slices.SortFunc(rs, compareRegistrants) }

// compareRegistrants is bytes.Compare of a and b, their first 8 bytes
// compared as one number (they are hashes: that nearly always decides).
func compareRegistrants(a, b Registrant) int {
	return cmp.Or(cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])), bytes.Compare(a[8:], b[8:]))
}

// LotteryRanking orders rs by the draw under final seed f: rank 1 first.
func LotteryRanking(f [32]byte, rs []Registrant) []Registrant {
	out, _ := lotteryRanking(f, rs)
	return out
}

// lotteryRanking is LotteryRanking with, for each registrant in its order,
// the first 8 bytes of its key k = H(f ‖ r) as a big-endian number (what a
// crowd's rank is drawn from: CrowdRank).
func lotteryRanking(f [32]byte, rs []Registrant) ([]Registrant, []uint64) {
	type keyed struct {
		r Registrant
		k [32]byte
	}
	ks := make([]keyed, len(rs))
	var b [64]byte
	copy(b[:32], f[:])
	for i, r := range rs {
		copy(b[32:], r[:])
		ks[i] = keyed{r, sha256.Sum256(b[:])}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(compareRegistrants(a.k, b.k), compareRegistrants(a.r, b.r))
	})
	out, keys := make([]Registrant, len(ks)), make([]uint64, len(ks))
	for i := range ks {
		out[i], keys[i] = ks[i].r, binary.BigEndian.Uint64(ks[i].k[:8])
	}
	return out, keys
}
