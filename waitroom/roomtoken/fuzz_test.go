package roomtoken

import (
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each fuzz input is tried three times: as a token, as a client would send it;
// as claims signed with the fuzz key, so that the strict claims decoding
// behind the signature is fuzzed too (the fuzzer cannot forge an HMAC); and
// as a header signed with the fuzz key over valid claims, so that the header
// checks are.

// fuzzRing's clock stands at t0, when the seeds' tickets arrived.
func fuzzRing(tb testing.TB) *Keyring {
	return testRing(tb, "k1:"+secret1)
}

// requireKnownError fails unless err wraps one of the parse sentinels: every
// refusal must be one a handler can map.
func requireKnownError(t *testing.T, err error) {
	t.Helper()
	require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrBadSignature) ||
		errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrWrongKind) || errors.Is(err, ErrTicketExpired),
		"unexpected error: %v", err)
}

// requireHeaderOK: a token whose header is s parses only if s is the header
// the keyring writes, byte for byte.
func requireHeaderOK(t *testing.T, s string, err error) {
	t.Helper()
	if err != nil {
		requireKnownError(t, err)
		return
	}
	require.Equal(t, headerK1, s, "only our header is accepted")
}

const (
	fuzzTicketClaims    = `{"aud":"flashline-ticket","sub":"c","iat":1767225600,"exp":1767312000,"sale":"s","pos":1,"preopen":false,"draw":0}`
	fuzzAdmissionClaims = `{"aud":"flashline-admission","sub":"c","jti":"a","exp":1767225600,"sale":"s"}`
)

func FuzzParseTicket(f *testing.F) {
	k := fuzzRing(f)
	for _, tk := range []Ticket{
		goldenTicket(),
		goldenEscapesTicket(),
		{SaleID: "01JH0000000000000000000000", CustomerID: "客户 🛒", ArrivedAt: t0, Position: 1 << 40, PreOpen: true, Draw: 1<<64 - 1},
		{SaleID: worst, CustomerID: worstRunes, ArrivedAt: t0.Add(-time.Hour), Position: 1<<63 - 1},
	} {
		f.Add(k.SignTicket(tk))
	}
	f.Add(k.SignAdmission(goldenAdmission()))
	f.Add(fuzzTicketClaims)
	f.Add(`{"aud":"flashline-ticket","sub":"s\u2028","iat":1767225000,"exp":1767311400,"sale":"\"<>","pos":9223372036854775807,"preopen":true,"draw":18446744073709551615}`)
	f.Add(`{"aud":"flashline-ticket","sub":"c","iat":946684800,"exp":946771200,"sale":"s","pos":1,"preopen":false,"draw":0}`)
	f.Add(`{"AUD":"flashline-ticket","Sub":"c","iat":1767225600,"exp":1767312000,"sale":"s","pos":1,"preopen":true,"draw":0,"sale":"x"}`)
	f.Add(`{"aud":"flashline-ticket","sub":"c","iat":1767225600,"exp":1767312000,"sale":"s","pos":1,"preopen":false,"draw":0} `)
	f.Add(`{"aud":["flashline-ticket"],"sub":"c","iat":1767225600,"exp":1767312000,"sale":"s","pos":1,"preopen":false,"draw":0,"jti":"a"}`)
	f.Add(headerK1)
	f.Add(`{"alg":"none","kid":"k1","typ":"JWT"}`)
	f.Add(`{"typ":"JWT","kid":"k1","alg":"HS256"}`)
	f.Add("")
	f.Add("..")
	f.Add(goldenHeaderK1 + ".e30.AAAA")
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

		// As a signed header.
		_, err = k.ParseTicket(signRaw(secret1, s, fuzzTicketClaims))
		requireHeaderOK(t, s, err)

		// As signed claims.
		tk, err = k.ParseTicket(k.keys[0].sign([]byte(s)))
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
	f.Add(fuzzAdmissionClaims)
	f.Add(`{"aud":"flashline-admission","sub":"\u2029","jti":"a-_","exp":946684800,"sale":"\\\""}`)
	f.Add(`{"aud":"flashline-admission","sub":"c","jti":"a","exp":1767225600,"sale":"s","jti":"b"}`)
	f.Add(`{"aud":"flashline-admission","sub":"c","jti":null,"exp":1767225600,"sale":"s"}`)
	f.Add(`{"aud":"flashline-admission","sub":"c","jti":"a","exp":1767225600,"sale":"s","iat":1767225600}`)
	f.Add(headerK1)
	f.Add(`{"alg":"HS256","kid":"k1","typ":"JWT","kid":"k2"}`)
	f.Add("")
	f.Add("..")
	f.Add(goldenHeaderK1 + ".e30.AAAA")
	f.Add(strings.Repeat(".", 100))

	f.Fuzz(func(t *testing.T, s string) {
		a, err := k.ParseAdmission(s)
		if err != nil {
			requireKnownError(t, err)
		} else {
			require.Equal(t, s, k.SignAdmission(a))
		}

		_, err = k.ParseAdmission(signRaw(secret1, s, fuzzAdmissionClaims))
		requireHeaderOK(t, s, err)

		a, err = k.ParseAdmission(k.keys[0].sign([]byte(s)))
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
			// Errors may name a key id, quoted; a secret that happens to
			// spell a key id ("00000000:00000000") is not quoted for that.
			msg := err.Error()
			for _, entry := range strings.Split(spec, ",") {
				if kid, _, ok := strings.Cut(strings.TrimSpace(entry), ":"); ok {
					msg = strings.ReplaceAll(msg, strconv.Quote(kid), "")
				}
			}
			for _, entry := range strings.Split(spec, ",") {
				if _, secret, ok := strings.Cut(entry, ":"); ok && len(strings.TrimSpace(secret)) >= 8 {
					require.NotContains(t, msg, strings.TrimSpace(secret), "an error must never quote a secret")
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
