package waitroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	secret1 = "0123456789abcdef0123456789abcdef"
	secret2 = "fedcba9876543210fedcba9876543210"
)

// The golden values below were computed independently (Python's hashlib,
// hmac and base64) from the format documented in token.go; they pin the wire
// format, which other instances, in-flight tokens and stored admission ids
// depend on.
const (
	goldenTicketToken    = "t1.k1.eyJzIjoic2FsZV8xIiwiYyI6ImN1c3RfMSIsInQiOjE3NjcyMjU2MDAsInAiOjcsIm8iOmZhbHNlLCJkIjo0Mn0.3Lk80xanlx1y6swV0vtDO8Qt0qWisWfpEXlun2ti9kM"
	goldenAdmissionID    = "TmqQ_tneFxVLgdprRL1Y_Q"
	goldenAdmissionToken = "a1.k1.eyJpIjoiVG1xUV90bmVGeFZMZ2RwclJMMVlfUSIsInMiOiJzYWxlXzEiLCJjIjoiY3VzdF8xIiwiZSI6MTc2NzIyNTcyMH0.5aK5z4ZbsSQcQNuEeoDQYKkWQiaDwQmLjA1z4jNjiNE"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testRing(tb testing.TB, spec string) *Keyring {
	tb.Helper()
	k, err := ParseKeyring(spec)
	require.NoError(tb, err)
	return k
}

func goldenTicket() Ticket {
	return Ticket{SaleID: "sale_1", CustomerID: "cust_1", ArrivedAt: t0, Position: 7, Draw: 42}
}

func goldenAdmission() Admission {
	return Admission{ID: goldenAdmissionID, SaleID: "sale_1", CustomerID: "cust_1", ExpiresAt: t0.Add(2 * time.Minute)}
}

// requireSentinel fails unless err wraps exactly the sentinel want.
func requireSentinel(t *testing.T, err, want error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, want)
	for _, other := range []error{ErrMalformed, ErrBadSignature, ErrUnknownKey, ErrWrongKind} {
		if other != want {
			require.NotErrorIs(t, err, other)
		}
	}
}

func TestParseKeyring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    string
		wantIDs []string
		wantErr string // substring; "" means valid
	}{
		{"One", "k1:" + secret1, []string{"k1"}, ""},
		{"TwoSignsWithFirst", "new:" + secret2 + ",old:" + secret1, []string{"new", "old"}, ""},
		{"WhitespaceTrimmed", " \tk2:" + secret2 + " ,\n k1:" + secret1 + "\n", []string{"k2", "k1"}, ""},
		{"SecretWithColons", "k1:a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:", []string{"k1"}, ""},
		{"SecretOfMinLength", "k1:" + strings.Repeat("x", MinSecretLen), []string{"k1"}, ""},
		{"LongestKeyID", strings.Repeat("K", MaxKeyIDLen) + ":" + secret1, []string{strings.Repeat("K", MaxKeyIDLen)}, ""},
		{"KeyIDAlphabet", "Az09_-:" + secret1, []string{"Az09_-"}, ""},
		{"Empty", "", nil, "keyring is empty"},
		{"Blank", " \t\n", nil, "keyring is empty"},
		{"TrailingComma", "k1:" + secret1 + ",", nil, "entry 2 is empty"},
		{"EmptyEntryBetween", "k1:" + secret1 + ", ,k2:" + secret2, nil, "entry 2 is empty"},
		{"NoColon", secret1, nil, `entry 1 is not "kid:secret"`},
		{"EmptyKeyID", ":" + secret1, nil, "entry 1: key id must be 1-16 characters"},
		{"KeyIDTooLong", strings.Repeat("K", MaxKeyIDLen+1) + ":" + secret1, nil, "entry 1: key id must be 1-16 characters"},
		{"KeyIDWithDot", "k.1:" + secret1, nil, "key id must be"},
		{"KeyIDWithSpace", "k 1:" + secret1, nil, "key id must be"},
		{"KeyIDNotASCII", "ké:" + secret1, nil, "key id must be"},
		{"ShortSecret", "k1:" + secret1[:MinSecretLen-1], nil, `entry 1 (key "k1"): secret is 31 bytes, want at least 32`},
		{"EmptySecret", "k1:", nil, "secret is 0 bytes"},
		{"ShortSecretAfterTrim", "k1:" + secret1[:MinSecretLen-1] + "  ", nil, "secret is 31 bytes"},
		{"DuplicateKeyID", "k1:" + secret1 + ",k2:" + secret2 + ",k1:" + secret2, nil, `entry 3: key id "k1" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := ParseKeyring(tt.spec)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, k)
				for _, s := range []string{secret1, secret2, secret1[:MinSecretLen-1]} {
					require.NotContains(t, err.Error(), s, "an error must never quote a secret")
				}
				return
			}
			require.NoError(t, err)
			var ids []string
			for _, key := range k.keys {
				ids = append(ids, key.id)
			}
			require.Equal(t, tt.wantIDs, ids)
		})
	}

	t.Run("SecretUsedAsGiven", func(t *testing.T) {
		t.Parallel()
		k := testRing(t, "k1:"+secret1+", k2:a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:")
		require.Equal(t, []byte(secret1), k.keys[0].secret)
		require.Equal(t, []byte("a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:"), k.keys[1].secret)
	})

	t.Run("StringHidesSecrets", func(t *testing.T) {
		t.Parallel()
		k := testRing(t, "new:"+secret2+",old:"+secret1)
		for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
			s := fmt.Sprintf(format, k)
			require.Equal(t, "waitroom.Keyring(new,old)", s, format)
		}
	})
}

func TestDeriveKeyring(t *testing.T) {
	t.Parallel()
	k := DeriveKeyring("jwt-secret")
	require.Len(t, k.keys, 1)
	require.Equal(t, "d1", k.keys[0].id)
	// HMAC-SHA256("jwt-secret", "flashline waitroom keys v1"), from Python.
	want, err := hex.DecodeString("a29e2d7a593a8a4a317702479ea73a96bcc8a4b2c9d4d0248390bedae8cf1b05")
	require.NoError(t, err)
	require.Equal(t, want, k.keys[0].secret)

	t.Run("SameSecretSameKeys", func(t *testing.T) {
		t.Parallel()
		tok := DeriveKeyring("jwt-secret").SignTicket(goldenTicket())
		got, err := k.ParseTicket(tok)
		require.NoError(t, err)
		require.Equal(t, goldenTicket(), got)
	})

	t.Run("OtherSecretRefused", func(t *testing.T) {
		t.Parallel()
		_, err := DeriveKeyring("other-secret").ParseTicket(k.SignTicket(goldenTicket()))
		requireSentinel(t, err, ErrBadSignature)
	})

	t.Run("NotTheSecretItself", func(t *testing.T) {
		t.Parallel()
		secret := "a-jwt-secret-of-some-length-0123456789"
		_, err := testRing(t, "d1:"+secret).ParseTicket(DeriveKeyring(secret).SignTicket(goldenTicket()))
		requireSentinel(t, err, ErrBadSignature)
	})
}

func TestGolden(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)

	require.Equal(t, goldenTicketToken, k.SignTicket(goldenTicket()))
	require.Equal(t, goldenAdmissionID, AdmissionID(goldenTicket()))
	require.Equal(t, goldenAdmissionToken, k.SignAdmission(goldenAdmission()))

	tk, err := k.ParseTicket(goldenTicketToken)
	require.NoError(t, err)
	require.Equal(t, goldenTicket(), tk)
	a, err := k.ParseAdmission(goldenAdmissionToken)
	require.NoError(t, err)
	require.Equal(t, goldenAdmission(), a)
}

// worst is an id of MaxIDLen bytes that JSON escapes to twice its length.
var worst = strings.Repeat(`"`, MaxIDLen)

// worstRunes is an id of MaxIDLen bytes of U+2028, which JSON also escapes.
var worstRunes = strings.Repeat("\u2028", MaxIDLen/3) + "xx"

func TestTicketRoundTrip(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	tests := []struct {
		name string
		in   Ticket
		want Ticket // zero means in
	}{
		{"Plain", goldenTicket(), Ticket{}},
		{"PreOpenWithDraw", Ticket{SaleID: "01JH0000000000000000000000", CustomerID: "c", ArrivedAt: t0, Position: 1, PreOpen: true, Draw: math.MaxUint64}, Ticket{}},
		{"LargestPosition", Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0, Position: math.MaxInt64}, Ticket{}},
		{"NotASCII", Ticket{SaleID: "vente-été", CustomerID: "客户 🛒 <&>", ArrivedAt: t0, Position: 3}, Ticket{}},
		{"QuotesAndBackslashes", Ticket{SaleID: `s"\`, CustomerID: `\"\u0000`, ArrivedAt: t0, Position: 3}, Ticket{}},
		{"EarliestTime", Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Position: 1}, Ticket{}},
		{"LatestTime", Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC), Position: 1}, Ticket{}},
		{"LongestWorstIDs", Ticket{SaleID: worst, CustomerID: worst, ArrivedAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC), Position: math.MaxInt64, PreOpen: true, Draw: math.MaxUint64}, Ticket{}},
		{"LongestWorstRunes", Ticket{SaleID: worstRunes, CustomerID: worstRunes, ArrivedAt: t0, Position: math.MaxInt64, Draw: math.MaxUint64}, Ticket{}},
		{
			"KeptToTheSecond",
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0.Add(999 * time.Millisecond), Position: 1},
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0, Position: 1},
		},
		{
			"AnyZoneComesBackUTC",
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0.In(time.FixedZone("X", 5*3600)), Position: 1},
			Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0, Position: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := tt.want
			if want == (Ticket{}) {
				want = tt.in
			}
			tok := k.SignTicket(tt.in)
			require.LessOrEqual(t, len(tok), MaxTokenLen)
			require.True(t, strings.HasPrefix(tok, "t1.k1."), tok)
			got, err := k.ParseTicket(tok)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, tok, k.SignTicket(got), "a parsed ticket signs to the same token")
		})
	}
}

func TestAdmissionRoundTrip(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	tests := []struct {
		name string
		in   Admission
		want Admission // zero means in
	}{
		{"Plain", goldenAdmission(), Admission{}},
		{"FromTicket", Admission{ID: AdmissionID(goldenTicket()), SaleID: "s", CustomerID: "c", ExpiresAt: t0}, Admission{}},
		{"IDAlphabet", Admission{ID: "Az09-_", SaleID: "s", CustomerID: "c", ExpiresAt: t0}, Admission{}},
		{"NotASCII", Admission{ID: "a", SaleID: "vente-été", CustomerID: "客户 🛒 <&>", ExpiresAt: t0}, Admission{}},
		{"LongestWorstIDs", Admission{ID: strings.Repeat("_", MaxIDLen), SaleID: worst, CustomerID: worst, ExpiresAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC)}, Admission{}},
		{"LongestWorstRunes", Admission{ID: strings.Repeat("-", MaxIDLen), SaleID: worstRunes, CustomerID: worstRunes, ExpiresAt: t0}, Admission{}},
		{
			"KeptToTheSecond",
			Admission{ID: "a", SaleID: "s", CustomerID: "c", ExpiresAt: t0.Add(time.Second - 1)},
			Admission{ID: "a", SaleID: "s", CustomerID: "c", ExpiresAt: t0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := tt.want
			if want == (Admission{}) {
				want = tt.in
			}
			tok := k.SignAdmission(tt.in)
			require.LessOrEqual(t, len(tok), MaxTokenLen)
			require.True(t, strings.HasPrefix(tok, "a1.k1."), tok)
			got, err := k.ParseAdmission(tok)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, tok, k.SignAdmission(got), "a parsed admission signs to the same token")
		})
	}
}

// TestParseRefused covers tokens that are refused before their payload is
// read, and payloads that are signed but not acceptable (only a signer bug
// could produce those, so they are signed here with the unexported signer).
func TestParseRefused(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1+",k2:"+secret2)
	ticket := k.SignTicket(goldenTicket())
	admission := k.SignAdmission(goldenAdmission())
	fields := strings.Split(ticket, ".")
	other := testRing(t, "k1:"+secret2)

	type parser func(string) error
	parseTicket := func(s string) error { _, err := k.ParseTicket(s); return err }
	parseAdmission := func(s string) error { _, err := k.ParseAdmission(s); return err }
	validTicket := `"s":"s","c":"c","t":1767225600,"p":1,"o":false,"d":0`
	validAdmission := `"i":"a","s":"s","c":"c","e":1767225600`
	signedTicket := func(fields string) string { return k.sign(kindTicket, []byte(fields)) }
	signedAdmission := func(fields string) string { return k.sign(kindAdmission, []byte(fields)) }
	// with replaces a field of a valid payload.
	with := func(valid, field, value string) string {
		parts := strings.Split(valid, ",")
		for i, p := range parts {
			if strings.HasPrefix(p, `"`+field+`":`) {
				parts[i] = `"` + field + `":` + value
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	without := func(valid, field string) string {
		var kept []string
		for _, p := range strings.Split(valid, ",") {
			if !strings.HasPrefix(p, `"`+field+`":`) {
				kept = append(kept, p)
			}
		}
		return "{" + strings.Join(kept, ",") + "}"
	}

	tests := []struct {
		name    string
		parse   parser
		token   string
		want    error
		wantMsg string // substring; "" means any
	}{
		{"Empty", parseTicket, "", ErrMalformed, "parse ticket: malformed token: want 4 dot-separated fields"},
		{"TooLong", parseTicket, ticket + "." + strings.Repeat("A", MaxTokenLen), ErrMalformed, "longer than 1024 bytes"},
		{"PaddedToTooLong", parseTicket, strings.Repeat("A", MaxTokenLen+1), ErrMalformed, "longer than 1024 bytes"},
		{"Newline", parseTicket, ticket[:len(ticket)-4] + "\n" + ticket[len(ticket)-4:], ErrMalformed, "unexpected character"},
		{"Padding", parseTicket, ticket + "=", ErrMalformed, "unexpected character"},
		{"StandardBase64", parseTicket, strings.ReplaceAll(strings.ReplaceAll(ticket, "-", "+"), "_", "/") + "+", ErrMalformed, "unexpected character"},
		{"Space", parseTicket, " " + ticket, ErrMalformed, "unexpected character"},
		{"ThreeFields", parseTicket, strings.Join(fields[:3], "."), ErrMalformed, "want 4"},
		{"FiveFields", parseTicket, ticket + ".AAAA", ErrMalformed, "want 4"},
		{"UnknownKind", parseTicket, "t2." + strings.Join(fields[1:], "."), ErrMalformed, "unknown kind"},
		{"EmptyKind", parseTicket, "." + strings.Join(fields[1:], "."), ErrMalformed, "unknown kind"},
		{"AdmissionAsTicket", parseTicket, admission, ErrWrongKind, "an admission token, want a ticket"},
		{"TicketAsAdmission", parseAdmission, ticket, ErrWrongKind, "a ticket, want an admission token"},
		{"EmptyKeyID", parseTicket, "t1.." + strings.Join(fields[2:], "."), ErrMalformed, "bad key id"},
		{"KeyIDTooLong", parseTicket, "t1." + strings.Repeat("k", 17) + "." + strings.Join(fields[2:], "."), ErrMalformed, "bad key id"},
		{"UnknownKeyID", parseTicket, "t1.k3." + strings.Join(fields[2:], "."), ErrUnknownKey, `key id "k3"`},
		{"OtherKeyID", parseTicket, "t1.k2." + strings.Join(fields[2:], "."), ErrBadSignature, ""},
		{"SameKeyIDOtherSecret", parseTicket, other.SignTicket(goldenTicket()), ErrBadSignature, ""},
		{"KindSwappedKeepingMAC", parseAdmission, "a1." + strings.Join(fields[1:], "."), ErrBadSignature, ""},
		{"NoSignature", parseTicket, strings.Join(fields[:3], ".") + ".", ErrMalformed, "signature is not 43 characters"},
		{"ShortSignature", parseTicket, ticket[:len(ticket)-1], ErrMalformed, "signature is not 43 characters"},
		{"SignatureTrailingBits", parseTicket, ticket[:len(ticket)-1] + "B", ErrMalformed, "signature"},
		{"EmptyPayload", parseTicket, signedTicket(""), ErrMalformed, "payload"},
		{"PayloadNotJSON", parseTicket, signedTicket("hello"), ErrMalformed, "payload"},
		{"PayloadArray", parseTicket, signedTicket("[]"), ErrMalformed, "payload"},
		{"PayloadNull", parseTicket, signedTicket("null"), ErrMalformed, `field "s" missing`},
		{"PayloadTrailingData", parseTicket, signedTicket("{" + validTicket + "}{}"), ErrMalformed, "data after the object"},
		{"PayloadTrailingGarbage", parseTicket, signedTicket("{" + validTicket + "}x"), ErrMalformed, "data after the object"},
		{"UnknownField", parseTicket, signedTicket("{" + validTicket + `,"x":1}`), ErrMalformed, `unknown field "x"`},
		{"MissingSale", parseTicket, signedTicket(without(validTicket, "s")), ErrMalformed, `field "s" missing`},
		{"MissingCustomer", parseTicket, signedTicket(without(validTicket, "c")), ErrMalformed, `field "c" missing`},
		{"MissingArrival", parseTicket, signedTicket(without(validTicket, "t")), ErrMalformed, `field "t" missing`},
		{"MissingPosition", parseTicket, signedTicket(without(validTicket, "p")), ErrMalformed, `field "p" missing`},
		{"MissingPreOpen", parseTicket, signedTicket(without(validTicket, "o")), ErrMalformed, `field "o" missing`},
		{"MissingDraw", parseTicket, signedTicket(without(validTicket, "d")), ErrMalformed, `field "d" missing`},
		{"NullPosition", parseTicket, signedTicket(with(validTicket, "p", "null")), ErrMalformed, `field "p" missing`},
		{"EmptySale", parseTicket, signedTicket(with(validTicket, "s", `""`)), ErrMalformed, "sale id must be 1-128 bytes"},
		{"SaleTooLong", parseTicket, signedTicket(with(validTicket, "s", `"`+strings.Repeat("s", MaxIDLen+1)+`"`)), ErrMalformed, "sale id must be 1-128 bytes"},
		{"CustomerTooLongInBytes", parseTicket, signedTicket(with(validTicket, "c", `"`+strings.Repeat("é", MaxIDLen/2+1)+`"`)), ErrMalformed, "customer id must be 1-128 bytes"},
		{"CustomerControl", parseTicket, signedTicket(with(validTicket, "c", `"a\nb"`)), ErrMalformed, "customer id has a control character"},
		{"CustomerNUL", parseTicket, signedTicket(with(validTicket, "c", `"\u0000"`)), ErrMalformed, "control character"},
		{"CustomerDEL", parseTicket, signedTicket(with(validTicket, "c", "\"a\x7f\"")), ErrMalformed, "control character"},
		{"CustomerC1", parseTicket, signedTicket(with(validTicket, "c", `"\u0085"`)), ErrMalformed, "control character"},
		{"SaleNumber", parseTicket, signedTicket(with(validTicket, "s", "1")), ErrMalformed, "payload"},
		{"PositionZero", parseTicket, signedTicket(with(validTicket, "p", "0")), ErrMalformed, "position must be at least 1"},
		{"PositionNegative", parseTicket, signedTicket(with(validTicket, "p", "-5")), ErrMalformed, "position must be at least 1"},
		{"PositionOverflow", parseTicket, signedTicket(with(validTicket, "p", "9223372036854775808")), ErrMalformed, "payload"},
		{"PositionFloat", parseTicket, signedTicket(with(validTicket, "p", "1.5")), ErrMalformed, "payload"},
		{"PositionString", parseTicket, signedTicket(with(validTicket, "p", `"1"`)), ErrMalformed, "payload"},
		{"ArrivalExponent", parseTicket, signedTicket(with(validTicket, "t", "1.7e9")), ErrMalformed, "payload"},
		{"ArrivalBefore2000", parseTicket, signedTicket(with(validTicket, "t", "946684799")), ErrMalformed, "arrival time is outside the years 2000-2200"},
		{"ArrivalAfter2200", parseTicket, signedTicket(with(validTicket, "t", "7289654400")), ErrMalformed, "arrival time is outside"},
		{"ArrivalZeroTime", parseTicket, k.SignTicket(Ticket{SaleID: "s", CustomerID: "c", Position: 1}), ErrMalformed, "arrival time is outside"},
		{"PreOpenNumber", parseTicket, signedTicket(with(validTicket, "o", "0")), ErrMalformed, "payload"},
		{"DrawNegative", parseTicket, signedTicket(with(validTicket, "d", "-1")), ErrMalformed, "payload"},
		{"DrawOverflow", parseTicket, signedTicket(with(validTicket, "d", "18446744073709551616")), ErrMalformed, "payload"},
		{"AdmissionMissingID", parseAdmission, signedAdmission(without(validAdmission, "i")), ErrMalformed, `field "i" missing`},
		{"AdmissionMissingSale", parseAdmission, signedAdmission(without(validAdmission, "s")), ErrMalformed, `field "s" missing`},
		{"AdmissionMissingCustomer", parseAdmission, signedAdmission(without(validAdmission, "c")), ErrMalformed, `field "c" missing`},
		{"AdmissionMissingExpiry", parseAdmission, signedAdmission(without(validAdmission, "e")), ErrMalformed, `field "e" missing`},
		{"AdmissionUnknownField", parseAdmission, signedAdmission("{" + validAdmission + `,"p":1}`), ErrMalformed, `unknown field "p"`},
		{"AdmissionTicketPayload", parseAdmission, signedAdmission("{" + validTicket + "}"), ErrMalformed, "unknown field"},
		{"AdmissionEmptyID", parseAdmission, signedAdmission(with(validAdmission, "i", `""`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDTooLong", parseAdmission, signedAdmission(with(validAdmission, "i", `"`+strings.Repeat("a", MaxIDLen+1)+`"`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDDot", parseAdmission, signedAdmission(with(validAdmission, "i", `"a.b"`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDSpace", parseAdmission, signedAdmission(with(validAdmission, "i", `"a b"`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDNotASCII", parseAdmission, signedAdmission(with(validAdmission, "i", `"é"`)), ErrMalformed, "admission id must be"},
		{"AdmissionEmptyCustomer", parseAdmission, signedAdmission(with(validAdmission, "c", `""`)), ErrMalformed, "customer id must be"},
		{"AdmissionSaleControl", parseAdmission, signedAdmission(with(validAdmission, "s", `"\t"`)), ErrMalformed, "sale id has a control character"},
		{"AdmissionExpiryBefore2000", parseAdmission, signedAdmission(with(validAdmission, "e", "0")), ErrMalformed, "expiry is outside"},
		{"AdmissionExpiryNegative", parseAdmission, signedAdmission(with(validAdmission, "e", "-1")), ErrMalformed, "expiry is outside"},
		{"AdmissionExpiryAfter2200", parseAdmission, signedAdmission(with(validAdmission, "e", "9223372036854775807")), ErrMalformed, "expiry is outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.parse(tt.token)
			requireSentinel(t, err, tt.want)
			if tt.wantMsg != "" {
				require.ErrorContains(t, err, tt.wantMsg)
			}
		})
	}

	t.Run("ValidPayloadsAccepted", func(t *testing.T) {
		t.Parallel()
		// The helpers above build the refused payloads from these.
		_, err := k.ParseTicket(signedTicket("{" + validTicket + "}"))
		require.NoError(t, err)
		_, err = k.ParseAdmission(signedAdmission("{" + validAdmission + "}"))
		require.NoError(t, err)
	})
}

// TestTamper changes every byte of a token, kind, key id, payload, signature
// and dots alike, to several other characters: no change is accepted.
func TestTamper(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1+",k2:"+secret2+",t1:"+secret1+",a1:"+secret2)
	replacements := "AaBbQgw019-_.=+/ \n\x00é"
	tests := []struct {
		name  string
		token string
		parse func(string) error
	}{
		{"Ticket", k.SignTicket(goldenTicket()), func(s string) error { _, err := k.ParseTicket(s); return err }},
		{"PreOpenTicket", k.SignTicket(Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0, Position: 9, PreOpen: true, Draw: 1 << 63}), func(s string) error { _, err := k.ParseTicket(s); return err }},
		{"Admission", k.SignAdmission(goldenAdmission()), func(s string) error { _, err := k.ParseAdmission(s); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, tt.parse(tt.token))
			for i := range len(tt.token) {
				for _, r := range replacements {
					tampered := tt.token[:i] + string(r) + tt.token[i+1:]
					if tampered == tt.token {
						continue
					}
					err := tt.parse(tampered)
					require.Error(t, err, "byte %d set to %q", i, r)
					require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrBadSignature) ||
						errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrWrongKind), "byte %d set to %q: %v", i, r, err)
				}
				// Removing a byte, or inserting one before it.
				require.Error(t, tt.parse(tt.token[:i]+tt.token[i+1:]), "byte %d removed", i)
				require.Error(t, tt.parse(tt.token[:i]+"A"+tt.token[i:]), "byte inserted at %d", i)
			}
			require.Error(t, tt.parse(tt.token+"A"))
		})
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	old := testRing(t, "old:"+secret1)
	rotated := testRing(t, "new:"+secret2+",old:"+secret1)
	dropped := testRing(t, "new:"+secret2)

	ticket := old.SignTicket(goldenTicket())
	admission := old.SignAdmission(goldenAdmission())
	require.True(t, strings.HasPrefix(ticket, "t1.old."))

	t.Run("OldTokensAcceptedAfterNewKeyAdded", func(t *testing.T) {
		t.Parallel()
		tk, err := rotated.ParseTicket(ticket)
		require.NoError(t, err)
		require.Equal(t, goldenTicket(), tk)
		a, err := rotated.ParseAdmission(admission)
		require.NoError(t, err)
		require.Equal(t, goldenAdmission(), a)
	})

	t.Run("NewRingSignsWithNewKey", func(t *testing.T) {
		t.Parallel()
		tok := rotated.SignTicket(goldenTicket())
		require.True(t, strings.HasPrefix(tok, "t1.new."), tok)
		_, err := dropped.ParseTicket(tok)
		require.NoError(t, err)
		// An instance not yet rotated cannot read it: roll the new key out to
		// every instance (second) before making it the signing key (first).
		_, err = old.ParseTicket(tok)
		requireSentinel(t, err, ErrUnknownKey)
	})

	t.Run("OldTokensRefusedOnceKeyDropped", func(t *testing.T) {
		t.Parallel()
		_, err := dropped.ParseTicket(ticket)
		requireSentinel(t, err, ErrUnknownKey)
		require.ErrorContains(t, err, `key id "old"`)
		_, err = dropped.ParseAdmission(admission)
		requireSentinel(t, err, ErrUnknownKey)
	})

	t.Run("AdmissionIDUnchanged", func(t *testing.T) {
		t.Parallel()
		tk, err := rotated.ParseTicket(ticket)
		require.NoError(t, err)
		require.Equal(t, AdmissionID(tk), AdmissionID(goldenTicket()))
		require.Equal(t, rotated.SignTicket(tk), rotated.SignTicket(goldenTicket()))
	})
}

func TestCheck(t *testing.T) {
	t.Parallel()
	a := goldenAdmission() // sale_1, cust_1, expires t0+2m
	tests := []struct {
		name     string
		sale     string
		customer string
		now      time.Time
		want     error // nil means admitted
	}{
		{"Good", "sale_1", "cust_1", t0, nil},
		{"GoodUntilTheLastInstant", "sale_1", "cust_1", a.ExpiresAt.Add(-time.Nanosecond), nil},
		{"ExpiredAtExpiry", "sale_1", "cust_1", a.ExpiresAt, ErrAdmissionExpired},
		{"ExpiredAfter", "sale_1", "cust_1", a.ExpiresAt.Add(time.Hour), ErrAdmissionExpired},
		{"OtherSale", "sale_2", "cust_1", t0, ErrAdmissionOtherSale},
		{"OtherCustomer", "sale_1", "cust_2", t0, ErrAdmissionOtherCustomer},
		{"CustomerCaseMatters", "sale_1", "CUST_1", t0, ErrAdmissionOtherCustomer},
		{"OtherSaleWinsOverExpiry", "sale_2", "cust_2", a.ExpiresAt, ErrAdmissionOtherSale},
		{"OtherCustomerWinsOverExpiry", "sale_1", "cust_2", a.ExpiresAt, ErrAdmissionOtherCustomer},
		{"EmptyCaller", "", "", t0, ErrAdmissionOtherSale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := a.Check(tt.sale, tt.customer, tt.now)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.ErrorContains(t, err, "check admission "+goldenAdmissionID)
			for _, other := range []error{ErrAdmissionExpired, ErrAdmissionOtherSale, ErrAdmissionOtherCustomer} {
				if other != tt.want {
					require.NotErrorIs(t, err, other)
				}
			}
		})
	}

	t.Run("ZeroAdmissionChecksNothingIn", func(t *testing.T) {
		t.Parallel()
		require.Error(t, Admission{}.Check("", "", t0))
	})
}

func TestDraw(t *testing.T) {
	t.Parallel()
	seed := []byte("seed-0123456789ab")
	// From Python: first 8 bytes of SHA-256(seed || "sale_1" || 0x00 || "cust_1").
	require.Equal(t, uint64(394214697377342774), Draw(seed, "sale_1", "cust_1"))

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
			da := Draw([]byte(tt.a[0]), tt.a[1], tt.a[2])
			require.Equal(t, da, Draw([]byte(tt.a[0]), tt.a[1], tt.a[2]), "deterministic")
			require.NotEqual(t, da, Draw([]byte(tt.b[0]), tt.b[1], tt.b[2]))
		})
	}

	t.Run("Spread", func(t *testing.T) {
		t.Parallel()
		// 1000 customers fall into the top and bottom halves about evenly
		// and never collide.
		seen := make(map[uint64]bool)
		top := 0
		for i := range 1000 {
			d := Draw(seed, "sale_1", "cust_"+strconv.Itoa(i))
			require.False(t, seen[d])
			seen[d] = true
			if d >= 1<<63 {
				top++
			}
		}
		require.InDelta(t, 500, top, 100)
	})
}

func TestAdmissionID(t *testing.T) {
	t.Parallel()
	tk := goldenTicket()
	id := AdmissionID(tk)
	require.Equal(t, goldenAdmissionID, id)
	require.Len(t, id, 22)
	require.True(t, validAlphabet(id))

	t.Run("Stable", func(t *testing.T) {
		t.Parallel()
		for range 3 {
			require.Equal(t, id, AdmissionID(goldenTicket()))
		}
		sub := tk
		sub.ArrivedAt = tk.ArrivedAt.Add(500 * time.Millisecond)
		require.Equal(t, id, AdmissionID(sub), "kept to the second, as signed")
		parsed, err := testRing(t, "x:"+secret2).ParseTicket(testRing(t, "x:"+secret2).SignTicket(sub))
		require.NoError(t, err)
		require.Equal(t, id, AdmissionID(parsed), "the same after a round trip, whatever the key")
	})

	t.Run("EveryFieldCounts", func(t *testing.T) {
		t.Parallel()
		changes := map[string]func(*Ticket){
			"SaleID":     func(t *Ticket) { t.SaleID = "sale_2" },
			"CustomerID": func(t *Ticket) { t.CustomerID = "cust_2" },
			"ArrivedAt":  func(t *Ticket) { t.ArrivedAt = t.ArrivedAt.Add(time.Second) },
			"Position":   func(t *Ticket) { t.Position++ },
			"PreOpen":    func(t *Ticket) { t.PreOpen = true },
			"Draw":       func(t *Ticket) { t.Draw++ },
		}
		for name, change := range changes {
			other := goldenTicket()
			change(&other)
			require.NotEqual(t, id, AdmissionID(other), name)
		}
	})

	t.Run("FitsAnAdmission", func(t *testing.T) {
		t.Parallel()
		k := testRing(t, "k1:"+secret1)
		a := Admission{ID: id, SaleID: tk.SaleID, CustomerID: tk.CustomerID, ExpiresAt: t0}
		got, err := k.ParseAdmission(k.SignAdmission(a))
		require.NoError(t, err)
		require.Equal(t, id, got.ID)
	})
}

func TestKeyIDsNotKinds(t *testing.T) {
	t.Parallel()
	// The MAC covers the kind: a key id that looks like a kind changes
	// nothing.
	k := testRing(t, "a1:"+secret1)
	tok := k.SignTicket(goldenTicket())
	require.True(t, strings.HasPrefix(tok, "t1.a1."))
	_, err := k.ParseTicket(tok)
	require.NoError(t, err)
	_, err = k.ParseAdmission(tok)
	requireSentinel(t, err, ErrWrongKind)
}

func TestMACIsHMACSHA256(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	tok := k.SignAdmission(goldenAdmission())
	i := strings.LastIndexByte(tok, '.')
	m := hmac.New(sha256.New, []byte(secret1))
	m.Write([]byte(tok[:i]))
	require.Equal(t, b64.EncodeToString(m.Sum(nil)), tok[i+1:])
}

func BenchmarkParseAdmission(b *testing.B) {
	k := testRing(b, "k1:"+secret1)
	tok := k.SignAdmission(goldenAdmission())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.ParseAdmission(tok); err != nil {
			b.Fatal(err)
		}
	}
}
