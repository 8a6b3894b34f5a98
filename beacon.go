package flashline

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cloudflare/circl/sign/bls"
)

// The public randomness beacon a lottery's draw waits for. Its rounds are in
// drand's format and scheme "bls-unchained-g1-rfc9380" (drand's quicknet): a
// round r is published at Genesis + (r-1) × Period; its signature is a BLS
// signature on BLS12-381, in G1 (48 bytes compressed), of SHA-256(r as 8
// bytes big-endian), hashed to the curve with the domain separation tag
// BeaconDST, under the chain's public key in G2 (96 bytes compressed); its
// randomness is SHA-256(signature). Nobody, the store included, knows a
// round's value before the beacon's members publish it, and anyone holding
// the chain's public key can check it.

// BeaconScheme names the beacon's signature scheme, as drand does.
const BeaconScheme = "bls-unchained-g1-rfc9380"

// BeaconDST is the domain separation tag of the beacon's hash to G1.
const BeaconDST = "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"

// ErrBeacon is a beacon round or chain that does not verify.
var ErrBeacon = errors.New("beacon round does not verify")

// BeaconChain is a beacon's public configuration.
type BeaconChain struct {
	PublicKey []byte // compressed G2 point, 96 bytes
	Genesis   time.Time
	Period    time.Duration
}

// Validate checks the chain's parameters (the key is a point of G2).
func (c BeaconChain) Validate() error {
	var pk bls.PublicKey[bls.KeyG2SigG1]
	switch {
	case c.Period <= 0 || c.Period%time.Second != 0:
		return fmt.Errorf("%w: the period must be a whole number of seconds", ErrBeacon)
	case c.Genesis.IsZero():
		return fmt.Errorf("%w: the genesis time is not set", ErrBeacon)
	case len(c.PublicKey) != 96:
		return fmt.Errorf("%w: the public key must be 96 bytes (a compressed G2 point), not %d", ErrBeacon, len(c.PublicKey))
	case pk.UnmarshalBinary(c.PublicKey) != nil:
		return fmt.Errorf("%w: the public key is not a point of G2", ErrBeacon)
	}
	return nil
}

// RoundAt is the latest round published at or before t (0 before genesis).
func (c BeaconChain) RoundAt(t time.Time) uint64 {
	if t.Before(c.Genesis) || c.Period <= 0 {
		return 0
	}
	return uint64(t.Sub(c.Genesis)/c.Period) + 1
}

// RoundAfter is the first round published strictly after t: the round a
// lottery closing at t waits for.
func (c BeaconChain) RoundAfter(t time.Time) uint64 { return c.RoundAt(t) + 1 }

// RoundTime is when round r is published.
func (c BeaconChain) RoundTime(r uint64) time.Time {
	if r == 0 {
		return c.Genesis
	}
	return c.Genesis.Add(time.Duration(r-1) * c.Period)
}

// BeaconRound is one published round.
type BeaconRound struct {
	Round      uint64
	Randomness []byte // SHA-256(Signature)
	Signature  []byte
}

// BeaconMessage is what round r's signature signs: SHA-256 of r as 8 bytes
// big-endian.
func BeaconMessage(r uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], r)
	sum := sha256.Sum256(b[:])
	return sum[:]
}

// VerifyBeacon checks a round against the chain's public key: the signature
// is the chain's on BeaconMessage(round), and the randomness is
// SHA-256(signature). Errors wrap ErrBeacon.
func VerifyBeacon(publicKey []byte, b BeaconRound) error {
	var pk bls.PublicKey[bls.KeyG2SigG1]
	if len(publicKey) != 96 || pk.UnmarshalBinary(publicKey) != nil {
		return fmt.Errorf("%w: the public key is not a compressed G2 point", ErrBeacon)
	}
	if b.Round == 0 {
		return fmt.Errorf("%w: round 0 is not a round", ErrBeacon)
	}
	if len(b.Signature) != 48 || !bls.Verify(&pk, BeaconMessage(b.Round), b.Signature) {
		return fmt.Errorf("%w: the signature of round %d is not the chain's", ErrBeacon, b.Round)
	}
	sum := sha256.Sum256(b.Signature)
	if subtle.ConstantTimeCompare(sum[:], b.Randomness) != 1 {
		return fmt.Errorf("%w: the randomness of round %d is not SHA-256(signature)", ErrBeacon, b.Round)
	}
	return nil
}

// BeaconSigner signs rounds with a private key of its own: a beacon of a
// test's (or a rehearsal's) own, checked by the same VerifyBeacon.
type BeaconSigner struct {
	key *bls.PrivateKey[bls.KeyG2SigG1]
	pub []byte
}

// NewBeaconSigner derives a signer from at least 32 bytes of key material.
func NewBeaconSigner(ikm []byte) (*BeaconSigner, error) {
	k, err := bls.KeyGen[bls.KeyG2SigG1](ikm, nil, nil)
	if err != nil {
		return nil, err
	}
	pub, err := k.PublicKey().MarshalBinary()
	if err != nil {
		return nil, err
	}
	return &BeaconSigner{key: k, pub: pub}, nil
}

// PublicKey is the signer's public key (compressed G2).
func (s *BeaconSigner) PublicKey() []byte { return append([]byte(nil), s.pub...) }

// Round signs round r.
func (s *BeaconSigner) Round(r uint64) BeaconRound {
	sig := bls.Sign(s.key, BeaconMessage(r))
	sum := sha256.Sum256(sig)
	return BeaconRound{Round: r, Randomness: sum[:], Signature: sig}
}
