package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
)

// signClaims signs raw claims JSON under the header Mint writes.
func signClaims(t testing.TB, header, claims string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	tok := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	return tok + "." + hmacSig(secret, tok)
}

func TestFastCustomer(t *testing.T) {
	t.Parallel()
	v := newVerifier(t)
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	minted, err := auth.Mint(secret, "cust_1", time.Hour, time.Time{})
	require.NoError(t, err)
	hdr := `{"alg":"HS256","typ":"JWT"}`
	for _, tt := range []struct {
		name  string
		token string
		want  string // "" : not decided
	}{
		{"Minted", minted, "cust_1"},
		{"Spaces", signClaims(t, hdr, ` { "sub" : "a" , "exp" : `+itoa(exp)+` } `), "a"},
		{"UnknownKeys", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(exp)+`,"x":1,"y":"z"}`), "a"},
		{"Expired", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(now.Add(-time.Minute).Unix())+`}`), ""},
		{"NoExp", signClaims(t, hdr, `{"sub":"a"}`), ""},
		{"NotYet", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(exp)+`,"nbf":`+itoa(exp)+`}`), ""},
		{"IssuedLater", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(exp)+`,"iat":`+itoa(now.Add(time.Minute).Unix())+`}`), ""},
		{"IssuedNow", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(exp)+`,"iat":`+itoa(now.Unix())+`}`), "a"},
		{"Escapes", signClaims(t, hdr, `{"sub":"\u0061","exp":`+itoa(exp)+`}`), ""},
		{"TwoSubs", signClaims(t, hdr, `{"sub":"a","sub":"b","exp":`+itoa(exp)+`}`), ""},
		{"UpperCaseKey", signClaims(t, hdr, `{"sub":"a","SUB":"b","exp":`+itoa(exp)+`}`), ""},
		{"FoldedKey", signClaims(t, hdr, `{"sub":"a","ſub":"b","exp":`+itoa(exp)+`}`), ""},
		{"FloatExp", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(exp)+`.5}`), ""},
		{"StringExp", signClaims(t, hdr, `{"sub":"a","exp":"`+itoa(exp)+`"}`), ""},
		{"NumberSub", signClaims(t, hdr, `{"sub":1,"exp":`+itoa(exp)+`}`), ""},
		{"NestedValue", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(exp)+`,"x":{}}`), ""},
		{"LeadingZero", signClaims(t, hdr, `{"sub":"a","exp":`+itoa(exp)+`,"x":01}`), ""},
		{"OtherHeader", signClaims(t, `{"typ":"JWT","alg":"HS256"}`, `{"sub":"a","exp":`+itoa(exp)+`}`), ""},
		{"WrongSignature", wrongSignature(minted), ""},
		{"AdminToken", adminToken, ""},
		{"Empty", "", ""},
		{"LongSub", signClaims(t, hdr, `{"sub":"`+strings.Repeat("s", 129)+`","exp":`+itoa(exp)+`}`), ""},
		{"ControlInSub", signClaims(t, hdr, "{\"sub\":\"a\u200bb\",\"exp\":"+itoa(exp)+"}"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s auth.Scratch
			id, ok := v.FastCustomer(tt.token, &s, now)
			require.Equal(t, tt.want != "", ok, "decided")
			require.Equal(t, tt.want, strings.Clone(id))
		})
	}
}

// TestFastCustomerAllocatesNothing: the whole verification (nothing
// remembered) makes no allocation. Not parallel: AllocsPerRun counts the
// process's.
func TestFastCustomerAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop the HMACs it pools")
	}
	v := newVerifier(t)
	minted, err := auth.Mint(secret, "cust_1", time.Hour, time.Time{})
	require.NoError(t, err)
	var s auth.Scratch
	now := time.Now()
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := v.FastCustomer(minted, &s, now); !ok {
			t.Fatal("not decided")
		}
	})
	require.Zero(t, allocs)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// hmacSig is the encoded HS256 signature of signing under key.
func hmacSig(key, signing string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(signing))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// FuzzFastCustomerAgrees: whatever FastCustomer decides, Customer (the
// full verification, by golang-jwt) decides the same: the same customer,
// never a token it refuses. The fuzzer writes the claims; they are signed
// with the right secret, so the signature is not what refuses them.
func FuzzFastCustomerAgrees(f *testing.F) {
	exp := itoa(time.Now().Add(24 * time.Hour).Unix())
	for _, c := range []string{
		`{"sub":"a","exp":` + exp + `}`,
		`{"sub":"a","exp":` + exp + `,"sub":"b"}`,
		`{"sub":"a","exp":` + exp + `,"Sub":"b"}`,
		`{"sub":"a","exp":` + exp + `,"aud":1}`,
		`{"sub":"a","exp":` + exp + `,"acct_created":"x"}`,
		`{"sub":"a","exp":` + exp + `,"iat":-1}`,
		`{"sub":"a","exp":-` + exp + `}`,
		`{"sub":"a","exp":` + exp + `,"nbf":0}`,
		`{"sub":"a","exp":` + exp + `,"iat":` + exp + `}`,
		`{"sub":"a","exp":` + exp + `,"iat":9223371974719179263}`,
		`{"sub":"\xff","exp":` + exp + `}`,
		`{"sub":"a","exp":` + exp + `}x`,
		`{"sub":"a","exp":9223372036854775807}`,
		// time.Unix overflows near the int64 limit: this nbf came out in
		// the past, and FastCustomer accepted what Customer refuses.
		`{"sub":"a","exp":` + exp + `,"nbf":9223371974719179263}`,
		`{"sub":"a","exp":9223371974719179263}`,
		`{"sub":"a","exp":` + exp + `,"nbf":-9223372036854775808}`,
		`{"sub":"a","exp":` + exp + `,"x":-0}`,
		`{}`,
	} {
		f.Add(c, false)
		f.Add(c, true)
	}
	f.Fuzz(func(t *testing.T, claims string, raw bool) {
		token := claims // raw: the fuzzer's string is the whole token
		if !raw {
			token = signClaims(t, `{"alg":"HS256","typ":"JWT"}`, claims)
		}
		var s auth.Scratch
		now := time.Now()
		id, ok := newVerifier(t).FastCustomer(token, &s, now)
		if !ok {
			return
		}
		got := strings.Clone(id)
		c, err := newVerifier(t).Customer(token)
		if err != nil {
			t.Fatalf("FastCustomer accepted %q as %q; Customer refuses it: %v", token, got, err)
		}
		if c.ID != got {
			t.Fatalf("FastCustomer read %q as %q; Customer as %q", token, got, c.ID)
		}
	})
}

// wrongSignature is token with its signature's next-to-last character (six
// bits of the MAC, all its own) changed. It wrote "AA" over the last two,
// which left about one token in a thousand as it was: run 25 failed so.
func wrongSignature(token string) string {
	c := byte('A')
	if token[len(token)-2] == c {
		c = 'B'
	}
	return token[:len(token)-2] + string(c) + token[len(token)-1:]
}
