package waitroom

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each fuzz input is tried twice: as a token, as a client would send it, and
// as a payload signed with the fuzz key, so that the strict payload decoding
// behind the MAC is fuzzed too (the fuzzer cannot forge a MAC).

func fuzzRing(tb testing.TB) *Keyring {
	return testRing(tb, "k1:"+secret1)
}

// requireKnownError fails unless err wraps one of the parse sentinels: every
// refusal must be one a handler can map.
func requireKnownError(t *testing.T, err error) {
	t.Helper()
	require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrBadSignature) ||
		errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrWrongKind), "unexpected error: %v", err)
}

func FuzzParseTicket(f *testing.F) {
	k := fuzzRing(f)
	for _, tk := range []Ticket{
		goldenTicket(),
		{SaleID: "01JH0000000000000000000000", CustomerID: "客户 🛒", ArrivedAt: t0, Position: 1 << 40, PreOpen: true, Draw: 1<<64 - 1},
		{SaleID: worst, CustomerID: worstRunes, ArrivedAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC), Position: 1<<63 - 1},
	} {
		f.Add(k.SignTicket(tk))
	}
	f.Add(k.SignAdmission(goldenAdmission()))
	f.Add(`{"s":"s","c":"c","t":1767225600,"p":1,"o":false,"d":0}`)
	f.Add(`{"s":"s\u2028","c":"\"<>","t":946684800,"p":9223372036854775807,"o":true,"d":18446744073709551615}`)
	f.Add(`{"S":"s","C":"c","T":1767225600,"P":1,"O":true,"D":0,"s":"x"}`)
	f.Add(`{"s":"s","c":"c","t":1767225600,"p":1,"o":false,"d":0} `)
	f.Add("")
	f.Add("t1...")
	f.Add("t1.k1.e30.AAAA")
	f.Add(strings.Repeat("A", MaxTokenLen+1))
	f.Add("\x00\xff.\n")

	f.Fuzz(func(t *testing.T, s string) {
		// As a token.
		tk, err := k.ParseTicket(s)
		if err != nil {
			requireKnownError(t, err)
		} else {
			// Only our signer makes tokens that parse, and it makes one
			// spelling of each ticket: no accepted token can be altered.
			require.Equal(t, s, k.SignTicket(tk))
		}

		// As a signed payload.
		tok := k.sign(kindTicket, []byte(s))
		tk, err = k.ParseTicket(tok)
		if err != nil {
			requireKnownError(t, err)
			return
		}
		again := k.SignTicket(tk)
		require.LessOrEqual(t, len(again), MaxTokenLen)
		tk2, err := k.ParseTicket(again)
		require.NoError(t, err)
		require.Equal(t, tk, tk2)
		require.Equal(t, again, k.SignTicket(tk2))
		require.Equal(t, AdmissionID(tk), AdmissionID(tk2))
	})
}

func FuzzParseAdmission(f *testing.F) {
	k := fuzzRing(f)
	for _, a := range []Admission{
		goldenAdmission(),
		{ID: "a", SaleID: "vente-été", CustomerID: "客户 🛒", ExpiresAt: t0},
		{ID: strings.Repeat("_", MaxIDLen), SaleID: worst, CustomerID: worstRunes, ExpiresAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC)},
	} {
		f.Add(k.SignAdmission(a))
	}
	f.Add(k.SignTicket(goldenTicket()))
	f.Add(`{"i":"a","s":"s","c":"c","e":1767225600}`)
	f.Add(`{"i":"a-_","s":"\\\"","c":"\u2029","e":946684800}`)
	f.Add(`{"i":"a","s":"s","c":"c","e":1767225600,"i":"b"}`)
	f.Add(`{"i":null,"s":"s","c":"c","e":1767225600}`)
	f.Add("")
	f.Add("a1...")
	f.Add("a1.k1.e30.AAAA")
	f.Add(strings.Repeat(".", 100))

	f.Fuzz(func(t *testing.T, s string) {
		a, err := k.ParseAdmission(s)
		if err != nil {
			requireKnownError(t, err)
		} else {
			require.Equal(t, s, k.SignAdmission(a))
		}

		tok := k.sign(kindAdmission, []byte(s))
		a, err = k.ParseAdmission(tok)
		if err != nil {
			requireKnownError(t, err)
			return
		}
		again := k.SignAdmission(a)
		require.LessOrEqual(t, len(again), MaxTokenLen)
		a2, err := k.ParseAdmission(again)
		require.NoError(t, err)
		require.Equal(t, a, a2)
		require.Equal(t, again, k.SignAdmission(a2))
		// Whatever parses is checked without surprise.
		require.NoError(t, a.Check(a.SaleID, a.CustomerID, a.ExpiresAt.Add(-time.Second)))
		require.ErrorIs(t, a.Check(a.SaleID, a.CustomerID, a.ExpiresAt), ErrAdmissionExpired)
	})
}

// FuzzParseKeyring: the keyring spec never panics, an error never quotes a
// secret, and every key it accepts has a secret of MinSecretLen bytes or more.
func FuzzParseKeyring(f *testing.F) {
	for _, s := range []string{"k1:" + secret1, "k1:" + secret1 + ",k2:" + secret2, "k1:short", "", ",", ":", "k1", "k 1:" + secret1, "k1:" + secret1 + ",k1:" + secret2} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		k, err := ParseKeyring(spec)
		if err != nil {
			for _, entry := range strings.Split(spec, ",") {
				if _, secret, ok := strings.Cut(entry, ":"); ok && len(strings.TrimSpace(secret)) >= 8 {
					require.NotContains(t, err.Error(), strings.TrimSpace(secret), "an error must never quote a secret")
				}
			}
			return
		}
		for _, key := range k.keys {
			require.GreaterOrEqual(t, len(key.secret), MinSecretLen)
			require.True(t, validKeyID(key.id))
		}
	})
}

// FuzzVerifyChallenge: any solution a client sends is checked without
// panicking, and one that passes really has the leading zero bits.
func FuzzVerifyChallenge(f *testing.F) {
	k := fuzzRing(f)
	tk := Ticket{SaleID: "sale_1", CustomerID: "cust_1", ArrivedAt: t0, Position: 1}
	for _, s := range []string{"0", "1", "12345", "", "-1", "1e9", "99999999999999999999999", "\x00", " 1"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, solution string, bits int) {
		bits = bits & 7 // a few bits: passing is possible, checking stays cheap
		if k.VerifyChallenge(tk, solution, bits) && bits > 0 &&
			LeadingZeroBits(sha256.Sum256([]byte(k.ChallengeNonce(tk)+":"+solution))) < bits {
			t.Fatalf("VerifyChallenge accepted %q for %d bits", solution, bits)
		}
	})
}
