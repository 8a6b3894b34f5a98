package roomtoken

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goldenNonce is ChallengeNonce(goldenTicket()) under "k1:"+secret1, computed
// with Python's hmac and base64.
const goldenNonce = "lyLyDvkQ-w2XAssJtJ1kvA"

// TestChallengeBrowserContract pins what a browser computes: SHA-256 over the
// UTF-8 bytes of nonce + ":" + solution, leading zero bits counted from the
// first byte's most significant bit. The solutions and hashes come from
// Python's hashlib.
func TestChallengeBrowserContract(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	require.Equal(t, goldenNonce, k.ChallengeNonce(goldenTicket()))

	tests := []struct {
		bits     int
		solution string
		hash     string
	}{
		{8, "391", "00dbef480bc60a3e0f7cd857c2b74cb23a6efec9acab0536c60642fa01c73c86"},
		{12, "6747", "000247f4e64ede775cd978cb1ea2f607f5c089dce13674a0513c42ad1627b4af"},
	}
	for _, tt := range tests {
		t.Run("Bits"+strconv.Itoa(tt.bits), func(t *testing.T) {
			t.Parallel()
			sum := sha256.Sum256([]byte(goldenNonce + ":" + tt.solution))
			require.Equal(t, tt.hash, hex.EncodeToString(sum[:]))
			require.Equal(t, tt.solution, Solve(goldenNonce, tt.bits), "the smallest solution")
			require.True(t, k.VerifyChallenge(goldenTicket(), tt.solution, tt.bits))
		})
	}
}

func TestVerifyChallenge(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	tk := goldenTicket()
	nonce := k.ChallengeNonce(tk)

	for _, bits := range []int{0, 1, 8, 12} {
		t.Run("Solved"+strconv.Itoa(bits), func(t *testing.T) {
			t.Parallel()
			solution := Solve(nonce, bits)
			require.True(t, k.VerifyChallenge(tk, solution, bits))
			require.True(t, k.VerifyChallenge(tk, solution, min(bits, 4)), "a solution also meets a lower difficulty")
		})
	}

	t.Run("NoChallengeAcceptsAnything", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"", "0", "x", "-1", strings.Repeat("9", 25)} {
			require.True(t, k.VerifyChallenge(tk, s, 0), s)
			require.True(t, k.VerifyChallenge(tk, s, -3), s)
		}
	})

	t.Run("MatchesTheHash", func(t *testing.T) {
		t.Parallel()
		// Every candidate is accepted exactly when its hash has the bits:
		// wrong solutions are refused, right ones accepted, at each difficulty.
		refused := 0
		for n := range 600 {
			s := strconv.Itoa(n)
			lz := LeadingZeroBits(sha256.Sum256([]byte(nonce + ":" + s)))
			for _, bits := range []int{1, 4, 8} {
				got := k.VerifyChallenge(tk, s, bits)
				require.Equal(t, lz >= bits, got, "solution %s at %d bits (hash has %d)", s, bits, lz)
				if !got {
					refused++
				}
			}
		}
		require.Greater(t, refused, 600)
	})

	t.Run("SolutionOfAnotherTicketRefused", func(t *testing.T) {
		t.Parallel()
		other := tk
		other.CustomerID = "cust_2"
		solution := Solve(k.ChallengeNonce(other), 12)
		require.True(t, k.VerifyChallenge(other, solution, 12))
		require.False(t, k.VerifyChallenge(tk, solution, 12))
	})

	t.Run("SolutionUnderAnotherKeyRefused", func(t *testing.T) {
		t.Parallel()
		stranger := testRing(t, "k1:"+secret2)
		solution := Solve(stranger.ChallengeNonce(tk), 12)
		require.False(t, k.VerifyChallenge(tk, solution, 12))
	})

	t.Run("ImpossibleDifficulty", func(t *testing.T) {
		t.Parallel()
		require.False(t, k.VerifyChallenge(tk, Solve(nonce, 8), 257))
		require.False(t, k.VerifyChallenge(tk, Solve(nonce, 8), 256))
		require.Panics(t, func() { Solve(nonce, 257) })
	})
}

// TestVerifyChallengeMalformed refuses solutions that are not canonical
// decimal strings even when their hash has enough leading zero bits, so one
// solution cannot be spelled several ways.
func TestVerifyChallengeMalformed(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	tk := goldenTicket()
	nonce := k.ChallengeNonce(tk)
	const bits = 6

	// find returns the first spelling made by spell whose hash meets bits.
	find := func(t *testing.T, spell func(n int) string) string {
		t.Helper()
		for n := 1; n < 100_000; n++ {
			s := spell(n)
			if LeadingZeroBits(sha256.Sum256([]byte(nonce+":"+s))) >= bits {
				return s
			}
		}
		t.Fatal("no spelling has the bits")
		return ""
	}
	tests := []struct {
		name  string
		spell func(n int) string
	}{
		{"Empty", func(int) string { return "" }},
		{"Negative", func(n int) string { return "-" + strconv.Itoa(n) }},
		{"Plus", func(n int) string { return "+" + strconv.Itoa(n) }},
		{"LeadingZero", func(n int) string { return "0" + strconv.Itoa(n) }},
		{"TwentyOneDigits", func(n int) string { return fmt.Sprintf("1%020d", n) }},
		{"TwentyFiveDigits", func(n int) string { return fmt.Sprintf("1%024d", n) }},
		{"Exponent", func(n int) string { return strconv.Itoa(n) + "e3" }},
		{"Space", func(n int) string { return " " + strconv.Itoa(n) }},
		{"TrailingNewline", func(n int) string { return strconv.Itoa(n) + "\n" }},
		{"Hex", func(n int) string { return "0x" + strconv.FormatInt(int64(n), 16) }},
		{"Decimal", func(n int) string { return strconv.Itoa(n) + ".0" }},
		{"ArabicIndicDigits", func(n int) string { return strings.Repeat("١", n%5+1) + strconv.Itoa(n) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.spell(1)
			if tt.name != "Empty" {
				s = find(t, tt.spell)
			}
			require.False(t, validSolution(s), "%q", s)
			require.False(t, k.VerifyChallenge(tk, s, bits), "%q", s)
			require.False(t, k.VerifyChallenge(tk, s, 1), "%q", s)
		})
	}

	t.Run("Literals", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"", "-1", "01", "00", "1e3", strings.Repeat("1", 25), strings.Repeat("1", 21), "1.0", " ", "١"} {
			require.False(t, validSolution(s), "%q", s)
		}
		for _, s := range []string{"0", "1", "10", "18446744073709551615", "99999999999999999999"} {
			require.True(t, validSolution(s), "%q", s)
		}
	})
}

func TestChallengeRotation(t *testing.T) {
	t.Parallel()
	old := testRing(t, "old:"+secret1)
	rotated := testRing(t, "new:"+secret2+",old:"+secret1)
	dropped := testRing(t, "new:"+secret2)
	tk := goldenTicket()

	oldSolution := Solve(old.ChallengeNonce(tk), 12)
	require.True(t, old.VerifyChallenge(tk, oldSolution, 12))
	require.True(t, rotated.VerifyChallenge(tk, oldSolution, 12), "a nonce handed out before the rotation is still good")
	require.False(t, dropped.VerifyChallenge(tk, oldSolution, 12))

	require.Equal(t, dropped.ChallengeNonce(tk), rotated.ChallengeNonce(tk), "the new key makes the nonce")
	require.NotEqual(t, old.ChallengeNonce(tk), rotated.ChallengeNonce(tk))
	require.True(t, rotated.VerifyChallenge(tk, Solve(rotated.ChallengeNonce(tk), 12), 12))
}

func TestChallengeNonce(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	tk := goldenTicket()
	n := k.ChallengeNonce(tk)
	require.Len(t, n, 22)
	require.True(t, validAlphabet(n))
	require.Equal(t, n, testRing(t, "k1:"+secret1+",k2:"+secret2).ChallengeNonce(tk), "stateless: same key, same nonce")

	other := tk
	other.Position++
	require.NotEqual(t, n, k.ChallengeNonce(other))
	require.NotEqual(t, n, testRing(t, "k1:"+secret2).ChallengeNonce(tk))
}

func TestLeadingZeroBits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		prefix []byte
		want   int
	}{
		{"AllZero", nil, 256},
		{"TopBitSet", []byte{0x80}, 0},
		{"AllOnes", []byte{0xff}, 0},
		{"Seven", []byte{0x01}, 7},
		{"Nine", []byte{0x00, 0x40}, 9},
		{"ThirtyOne", []byte{0, 0, 0, 1}, 31},
		{"LastBit", append(make([]byte, 31), 1), 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sum [32]byte
			if tt.prefix == nil {
				require.Equal(t, tt.want, LeadingZeroBits(sum))
				return
			}
			copy(sum[:], tt.prefix)
			require.Equal(t, tt.want, LeadingZeroBits(sum))
			for i := len(tt.prefix); i < 32; i++ {
				sum[i] = 0xff // bits after the first one do not count
			}
			require.Equal(t, tt.want, LeadingZeroBits(sum))
		})
	}
}

func BenchmarkVerifyChallenge(b *testing.B) {
	tk := goldenTicket()
	for _, bb := range []struct {
		name string
		ring *Keyring
		// nonceRing made the nonce that was solved.
		nonceRing *Keyring
	}{
		{"OneKey", testRing(b, "k1:"+secret1), testRing(b, "k1:"+secret1)},
		{"TwoKeysOldNonce", testRing(b, "k2:"+secret2+",k1:"+secret1), testRing(b, "k1:"+secret1)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			solution := Solve(bb.nonceRing.ChallengeNonce(tk), 12)
			b.ReportAllocs()
			for b.Loop() {
				if !bb.ring.VerifyChallenge(tk, solution, 12) {
					b.Fatal("refused")
				}
			}
		})
	}
}
