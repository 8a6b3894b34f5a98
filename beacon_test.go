package flashline_test

import (
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/flashline/flashline"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBeaconVerifiesDrandQuicknet: a round of drand's quicknet chain (its
// public key and round 1, as the chain published them) verifies with the
// code the draw uses, and a changed byte does not.
func TestBeaconVerifiesDrandQuicknet(t *testing.T) {
	t.Parallel()
	pub := unhex(t, "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a")
	round := flashline.BeaconRound{
		Round:      1,
		Randomness: unhex(t, "1466a6cd24e327188770752f6134001c64d6efcc590ccc26b721611ad96f165a"),
		Signature:  unhex(t, "b55e7cb2d5c613ee0b2e28d6750aabbb78c39dcc96bd9d38c2c2e12198df95571de8e8e402a0cc48871c7089a2b3af4b"),
	}
	if err := flashline.VerifyBeacon(pub, round); err != nil {
		t.Fatalf("quicknet round 1: %v", err)
	}
	chain := flashline.BeaconChain{PublicKey: pub, Genesis: time.Unix(1692803367, 0), Period: 3 * time.Second}
	if err := chain.Validate(); err != nil {
		t.Fatal(err)
	}
	other := round
	other.Round = 2
	if err := flashline.VerifyBeacon(pub, other); !errors.Is(err, flashline.ErrBeacon) {
		t.Fatalf("round 1's signature as round 2's: %v, want ErrBeacon", err)
	}
	bad := round
	bad.Randomness = append([]byte(nil), round.Randomness...)
	bad.Randomness[0] ^= 1
	if err := flashline.VerifyBeacon(pub, bad); !errors.Is(err, flashline.ErrBeacon) {
		t.Fatalf("altered randomness: %v, want ErrBeacon", err)
	}
}

// TestBeaconSignerRounds: a test's own beacon signs rounds that verify under
// its key only; the round schedule follows genesis and period.
func TestBeaconSignerRounds(t *testing.T) {
	t.Parallel()
	s, err := flashline.NewBeaconSigner([]byte("a test beacon's key material, 32+ bytes"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := flashline.NewBeaconSigner([]byte("another beacon's key material, 32+ bytes"))
	if err != nil {
		t.Fatal(err)
	}
	r := s.Round(7)
	if err := flashline.VerifyBeacon(s.PublicKey(), r); err != nil {
		t.Fatal(err)
	}
	if err := flashline.VerifyBeacon(o.PublicKey(), r); !errors.Is(err, flashline.ErrBeacon) {
		t.Fatalf("another key: %v", err)
	}
	g := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := flashline.BeaconChain{PublicKey: s.PublicKey(), Genesis: g, Period: 3 * time.Second}
	for _, tc := range []struct {
		at    time.Duration
		round uint64
	}{{-time.Second, 0}, {0, 1}, {2 * time.Second, 1}, {3 * time.Second, 2}, {10 * time.Second, 4}} {
		if got := c.RoundAt(g.Add(tc.at)); got != tc.round {
			t.Errorf("RoundAt(genesis%+v) = %d, want %d", tc.at, got, tc.round)
		}
		if after := c.RoundAfter(g.Add(tc.at)); !c.RoundTime(after).After(g.Add(tc.at)) {
			t.Errorf("RoundAfter(genesis%+v) = %d, published at %v, not after", tc.at, after, c.RoundTime(after))
		}
	}
}
