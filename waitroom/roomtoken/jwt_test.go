package roomtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

const (
	secret1 = "0123456789abcdef0123456789abcdef"
	secret2 = "fedcba9876543210fedcba9876543210"
)

// The golden tokens below were computed independently, with Python's json,
// hmac, hashlib and base64 (json.dumps with separators=(",", ":") and
// ensure_ascii=False, the claims in the order shown in TestGoldenLayout);
// they pin the wire format, which other instances, edge workers, in-flight
// tokens and stored admission ids depend on.
const (
	// {"alg":"HS256","kid":"k1","typ":"JWT"}
	goldenHeaderK1 = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImsxIiwidHlwIjoiSldUIn0"
	// goldenTicket() under "k1:"+secret1.
	goldenTicketToken = goldenHeaderK1 + ".eyJhdWQiOiJmbGFzaGxpbmUtdGlja2V0Iiwic3ViIjoiY3VzdF8xIiwiaWF0IjoxNzY3MjI1NjAwLCJleHAiOjE3NjczMTIwMDAsInNhbGUiOiJzYWxlXzEiLCJwb3MiOjcsInByZW9wZW4iOmZhbHNlLCJkcmF3Ijo0Mn0.nQp_UaTaD-bGuOUmtBwR6Rk7oczDrUWqqEkEuf-DEhQ"
	// goldenEscapesTicket() under "k1:"+secret1: no HTML escaping, UTF-8
	// as is, the largest numbers written in full.
	goldenEscapesTicketToken = goldenHeaderK1 + ".eyJhdWQiOiJmbGFzaGxpbmUtdGlja2V0Iiwic3ViIjoiY2xpZW50IFwiw6lcIiA8Jj4gXFwg5a6i5oi3IiwiaWF0IjoxNzY3MjI1NjU5LCJleHAiOjE3NjczMTIwNTksInNhbGUiOiJ2ZW50ZS3DqXTDqSIsInBvcyI6OTIyMzM3MjAzNjg1NDc3NTgwNywicHJlb3BlbiI6dHJ1ZSwiZHJhdyI6MTg0NDY3NDQwNzM3MDk1NTE2MTV9.UlJDvXRXI7Cu8SthIcoZEjkqljrG0LmsoIrNmCa3o9E"
	// AdmissionID(goldenTicket()): base64url of the first 16 bytes of
	// SHA-256 over {"s":"sale_1","c":"cust_1","t":1767225600,"p":7,"o":false,"d":42},
	// the same as before tokens were JWTs.
	goldenAdmissionID = "TmqQ_tneFxVLgdprRL1Y_Q"
	// goldenAdmission() under "k1:"+secret1.
	goldenAdmissionToken = goldenHeaderK1 + ".eyJhdWQiOiJmbGFzaGxpbmUtYWRtaXNzaW9uIiwic3ViIjoiY3VzdF8xIiwianRpIjoiVG1xUV90bmVGeFZMZ2RwclJMMVlfUSIsImV4cCI6MTc2NzIyNTcyMCwic2FsZSI6InNhbGVfMSJ9.FxyYYRp4cgDztLCpLx4IxGX1lbYSJ2Cez3jYui5E69E"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns a copy of k whose clock, by which tickets expire, stands at now.
func (k *Keyring) at(now time.Time) *Keyring {
	c := *k
	c.now = func() time.Time { return now }
	return &c
}

// testRing parses spec into a keyring whose clock stands at t0, when
// goldenTicket() arrived.
func testRing(tb testing.TB, spec string) *Keyring {
	tb.Helper()
	k, err := ParseKeyring(spec)
	require.NoError(tb, err)
	return k.at(t0)
}

func goldenTicket() Ticket {
	return Ticket{SaleID: "sale_1", CustomerID: "cust_1", ArrivedAt: t0, Position: 7, Draw: 42}
}

func goldenEscapesTicket() Ticket {
	return Ticket{SaleID: "vente-été", CustomerID: `client "é" <&> \ 客户`, ArrivedAt: t0.Add(59 * time.Second),
		Position: 1<<63 - 1, PreOpen: true, Draw: 1<<64 - 1}
}

func goldenAdmission() Admission {
	return Admission{ID: goldenAdmissionID, SaleID: "sale_1", CustomerID: "cust_1", ExpiresAt: t0.Add(2 * time.Minute)}
}

// tokenSentinels are the errors a refused token wraps exactly one of.
var tokenSentinels = []error{ErrMalformed, ErrBadSignature, ErrUnknownKey, ErrWrongKind, ErrTicketExpired}

// requireSentinel fails unless err wraps exactly the sentinel want.
func requireSentinel(t *testing.T, err, want error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, want)
	for _, other := range tokenSentinels {
		if other != want {
			require.NotErrorIs(t, err, other)
		}
	}
}

// segment decodes segment i (0: header, 1: claims) of a token.
func segment(tb testing.TB, token string, i int) string {
	tb.Helper()
	parts := strings.Split(token, ".")
	require.Len(tb, parts, 3)
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	require.NoError(tb, err)
	return string(b)
}

// kidOf is the key id in a token's header.
func kidOf(tb testing.TB, token string) string {
	tb.Helper()
	var h struct{ Kid string }
	require.NoError(tb, json.Unmarshal([]byte(segment(tb, token, 0)), &h))
	return h.Kid
}

// signRaw signs header and claims as given, with the standard library only.
func signRaw(secret, header, claims string) string {
	enc := base64.RawURLEncoding
	s := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(s))
	return s + "." + enc.EncodeToString(m.Sum(nil))
}

const headerK1 = `{"alg":"HS256","kid":"k1","typ":"JWT"}`

func TestGolden(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)

	require.Equal(t, goldenTicketToken, k.SignTicket(goldenTicket()))
	require.Equal(t, goldenEscapesTicketToken, k.SignTicket(goldenEscapesTicket()))
	require.Equal(t, goldenAdmissionID, AdmissionID(goldenTicket()))
	require.Equal(t, goldenAdmissionToken, k.SignAdmission(goldenAdmission()))

	tk, err := k.ParseTicket(goldenTicketToken)
	require.NoError(t, err)
	require.Equal(t, goldenTicket(), tk)
	tk, err = k.ParseTicket(goldenEscapesTicketToken)
	require.NoError(t, err)
	require.Equal(t, goldenEscapesTicket(), tk)
	a, err := k.ParseAdmission(goldenAdmissionToken)
	require.NoError(t, err)
	require.Equal(t, goldenAdmission(), a)
}

// TestGoldenLayout shows what the golden tokens carry.
func TestGoldenLayout(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{goldenTicketToken, goldenEscapesTicketToken, goldenAdmissionToken} {
		require.Equal(t, headerK1, segment(t, tok, 0))
	}
	require.Equal(t,
		`{"aud":"flashline-ticket","sub":"cust_1","iat":1767225600,"exp":1767312000,"sale":"sale_1","pos":7,"preopen":false,"draw":42}`,
		segment(t, goldenTicketToken, 1))
	require.Equal(t,
		`{"aud":"flashline-ticket","sub":"client \"é\" <&> \\ 客户","iat":1767225659,"exp":1767312059,"sale":"vente-été","pos":9223372036854775807,"preopen":true,"draw":18446744073709551615}`,
		segment(t, goldenEscapesTicketToken, 1))
	require.Equal(t,
		`{"aud":"flashline-admission","sub":"cust_1","jti":"TmqQ_tneFxVLgdprRL1Y_Q","exp":1767225720,"sale":"sale_1"}`,
		segment(t, goldenAdmissionToken, 1))
}

// verifyHS256 is what an edge worker or CDN runs, written with the standard
// library only and nothing of this package: the header names HS256 and a known
// kid, the HMAC-SHA256 over header.claims matches, aud is the expected one and
// exp is required and in the future.
func verifyHS256(token string, keys map[string]string, aud string, now time.Time) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWS")
	}
	var header struct{ Alg, Kid string }
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(hb, &header); err != nil {
		return nil, err
	}
	if header.Alg != "HS256" {
		return nil, fmt.Errorf("alg %q", header.Alg)
	}
	secret, ok := keys[header.Kid]
	if !ok {
		return nil, fmt.Errorf("unknown kid %q", header.Kid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, m.Sum(nil)) {
		return nil, errors.New("bad signature")
	}
	cb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(cb, &claims); err != nil {
		return nil, err
	}
	if claims["aud"] != aud {
		return nil, fmt.Errorf("aud %v", claims["aud"])
	}
	exp, ok := claims["exp"].(float64)
	if !ok {
		return nil, errors.New("no exp")
	}
	if now.Unix() >= int64(exp) {
		return nil, errors.New("expired")
	}
	return claims, nil
}

// TestStandardLibraryVerifies: the point of the format is that a token can be
// checked without this package, by a plain HS256 JWT check.
func TestStandardLibraryVerifies(t *testing.T) {
	t.Parallel()
	k := testRing(t, "new:"+secret2+",old:"+secret1)
	keys := map[string]string{"new": secret2, "old": secret1}
	ticket := k.SignTicket(goldenTicket())
	admission := k.SignAdmission(goldenAdmission())

	c, err := verifyHS256(ticket, keys, "flashline-ticket", t0)
	require.NoError(t, err)
	require.Equal(t, "cust_1", c["sub"])
	require.Equal(t, "sale_1", c["sale"])
	require.Equal(t, float64(t0.Add(TicketTTL).Unix()), c["exp"])
	c, err = verifyHS256(admission, keys, "flashline-admission", t0)
	require.NoError(t, err)
	require.Equal(t, goldenAdmissionID, c["jti"])
	require.Equal(t, float64(goldenAdmission().ExpiresAt.Unix()), c["exp"])

	// And it refuses what the service refuses.
	_, err = verifyHS256(ticket, keys, "flashline-admission", t0)
	require.ErrorContains(t, err, "aud")
	_, err = verifyHS256(admission, keys, "flashline-ticket", t0)
	require.ErrorContains(t, err, "aud")
	_, err = verifyHS256(admission, keys, "flashline-admission", goldenAdmission().ExpiresAt)
	require.ErrorContains(t, err, "expired")
	_, err = verifyHS256(ticket, keys, "flashline-ticket", t0.Add(TicketTTL))
	require.ErrorContains(t, err, "expired")
	_, err = verifyHS256(ticket, map[string]string{"old": secret1}, "flashline-ticket", t0)
	require.ErrorContains(t, err, "unknown kid")
	_, err = verifyHS256(ticket, map[string]string{"new": secret1}, "flashline-ticket", t0)
	require.ErrorContains(t, err, "bad signature")
	_, err = verifyHS256(testRing(t, "other:"+secret2).SignTicket(goldenTicket()), keys, "flashline-ticket", t0)
	require.ErrorContains(t, err, "unknown kid")
}

// TestJWTLibraryVerifies: a stock JWT library (golang-jwt with map claims, as
// an edge worker might use any other) accepts the tokens with its usual
// checks and refuses the wrong audience or an expired token.
func TestJWTLibraryVerifies(t *testing.T) {
	t.Parallel()
	k := testRing(t, "new:"+secret2+",old:"+secret1)
	keyfunc := func(tok *jwt.Token) (any, error) {
		switch tok.Header["kid"] {
		case "new":
			return []byte(secret2), nil
		case "old":
			return []byte(secret1), nil
		}
		return nil, errors.New("unknown kid")
	}
	parse := func(tok, aud string, now time.Time) (jwt.MapClaims, error) {
		var c jwt.MapClaims
		_, err := jwt.ParseWithClaims(tok, &c, keyfunc,
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience(aud), jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(), jwt.WithTimeFunc(func() time.Time { return now }))
		return c, err
	}
	ticket := k.SignTicket(goldenTicket())
	admission := k.SignAdmission(goldenAdmission())

	c, err := parse(ticket, "flashline-ticket", t0)
	require.NoError(t, err)
	require.Equal(t, "cust_1", c["sub"])
	c, err = parse(admission, "flashline-admission", t0)
	require.NoError(t, err)
	require.Equal(t, goldenAdmissionID, c["jti"])

	_, err = parse(ticket, "flashline-admission", t0)
	require.ErrorIs(t, err, jwt.ErrTokenInvalidAudience)
	_, err = parse(admission, "flashline-ticket", t0)
	require.ErrorIs(t, err, jwt.ErrTokenInvalidAudience)
	_, err = parse(admission, "flashline-admission", goldenAdmission().ExpiresAt)
	require.ErrorIs(t, err, jwt.ErrTokenExpired)
	_, err = parse(ticket, "flashline-ticket", t0.Add(TicketTTL))
	require.ErrorIs(t, err, jwt.ErrTokenExpired)
}

// TestParseRefused covers tokens that are refused before their claims are
// trusted, and claims that are signed but not acceptable (only a signer bug
// could produce those, so they are signed here with the standard library).
func TestParseRefused(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1+",k2:"+secret2)
	ticket := k.SignTicket(goldenTicket())
	admission := k.SignAdmission(goldenAdmission())
	segs := strings.Split(ticket, ".")
	other := testRing(t, "k1:"+secret2)

	type parser func(string) error
	parseTicket := func(s string) error { _, err := k.ParseTicket(s); return err }
	parseAdmission := func(s string) error { _, err := k.ParseAdmission(s); return err }
	validTicket := `"aud":"flashline-ticket","sub":"c","iat":1767225600,"exp":1767312000,"sale":"s","pos":1,"preopen":false,"draw":0`
	validAdmission := `"aud":"flashline-admission","sub":"c","jti":"a","exp":1767225600,"sale":"s"`
	signed := func(claims string) string { return signRaw(secret1, headerK1, claims) }
	withHeader := func(header string) string { return signRaw(secret1, header, "{"+validTicket+"}") }
	// with replaces a claim of valid claims.
	with := func(valid, claim, value string) string {
		parts := strings.Split(valid, ",")
		for i, p := range parts {
			if strings.HasPrefix(p, `"`+claim+`":`) {
				parts[i] = `"` + claim + `":` + value
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	without := func(valid, claim string) string {
		var kept []string
		for _, p := range strings.Split(valid, ",") {
			if !strings.HasPrefix(p, `"`+claim+`":`) {
				kept = append(kept, p)
			}
		}
		return "{" + strings.Join(kept, ",") + "}"
	}
	b64s := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	// withSig puts a signature of the right length on header and claims.
	withSig := func(header, claims string) string {
		return b64s(header) + "." + b64s(claims) + "." + segs[2]
	}

	tests := []struct {
		name    string
		parse   parser
		token   string
		want    error
		wantMsg string // substring; "" means any
	}{
		// The token's shape, checked before anything is decoded.
		{"Empty", parseTicket, "", ErrMalformed, "parse ticket: malformed token: want 3 dot-separated segments"},
		{"TooLong", parseTicket, ticket + "." + strings.Repeat("A", MaxTokenLen), ErrMalformed, "longer than 1280 bytes"},
		{"PaddedToTooLong", parseTicket, strings.Repeat("A", MaxTokenLen+1), ErrMalformed, "longer than 1280 bytes"},
		{"Newline", parseTicket, ticket[:len(ticket)-4] + "\n" + ticket[len(ticket)-4:], ErrMalformed, "unexpected character"},
		{"NewlineInClaims", parseTicket, ticket[:len(segs[0])+5] + "\r\n" + ticket[len(segs[0])+5:], ErrMalformed, "unexpected character"},
		{"Padding", parseTicket, ticket + "=", ErrMalformed, "unexpected character"},
		{"StandardBase64", parseTicket, strings.ReplaceAll(strings.ReplaceAll(ticket, "-", "+"), "_", "/") + "+", ErrMalformed, "unexpected character"},
		{"Space", parseTicket, " " + ticket, ErrMalformed, "unexpected character"},
		{"TwoSegments", parseTicket, strings.Join(segs[:2], "."), ErrMalformed, "want 3"},
		{"FourSegments", parseTicket, ticket + ".AAAA", ErrMalformed, "want 3"},
		{"NoSignature", parseTicket, strings.Join(segs[:2], ".") + ".", ErrMalformed, "signature is not 43 characters"},
		{"ShortSignature", parseTicket, ticket[:len(ticket)-1], ErrMalformed, "signature is not 43 characters"},
		{"SignatureTrailingBits", parseTicket, ticket[:len(ticket)-1] + "B", ErrMalformed, "signature"},
		{"HeaderTrailingBits", parseTicket, segs[0][:len(segs[0])-1] + "1." + strings.Join(segs[1:], "."), ErrMalformed, "header"},
		{"ClaimsTrailingBits", parseTicket, segs[0] + "." + segs[1][:len(segs[1])-1] + "1." + segs[2], ErrMalformed, "claim"},

		// The header: HS256 only, refused before any key is looked up.
		{"AlgNone", parseTicket, withSig(`{"alg":"none","kid":"k1","typ":"JWT"}`, "{"+validTicket+"}"), ErrMalformed, `algorithm "none", want HS256`},
		{"AlgNoneNoSignature", parseTicket, b64s(`{"alg":"none","typ":"JWT"}`) + "." + segs[1] + ".", ErrMalformed, "signature is not 43 characters"},
		{"AlgHS384", parseTicket, withSig(`{"alg":"HS384","kid":"k1","typ":"JWT"}`, "{"+validTicket+"}"), ErrMalformed, `algorithm "HS384"`},
		{"AlgRS256", parseTicket, withSig(`{"alg":"RS256","kid":"k1","typ":"JWT"}`, "{"+validTicket+"}"), ErrMalformed, `algorithm "RS256"`},
		{"AlgLowerCase", parseTicket, withHeader(`{"alg":"hs256","kid":"k1","typ":"JWT"}`), ErrMalformed, "alg"},
		{"AlgMissing", parseTicket, withHeader(`{"kid":"k1","typ":"JWT"}`), ErrMalformed, "alg"},
		{"HeaderNotJSON", parseTicket, withHeader(`alg`), ErrMalformed, "header"},
		{"HeaderArray", parseTicket, withHeader(`["HS256"]`), ErrMalformed, "header"},
		{"HeaderExtraParameter", parseTicket, withHeader(`{"alg":"HS256","kid":"k1","typ":"JWT","crit":["exp"]}`), ErrMalformed, "header must be exactly"},
		{"HeaderJKU", parseTicket, withHeader(`{"alg":"HS256","jku":"https://evil.example/","typ":"JWT"}`), ErrMalformed, "bad key id"},
		{"HeaderOtherOrder", parseTicket, withHeader(`{"typ":"JWT","kid":"k1","alg":"HS256"}`), ErrMalformed, "header must be exactly"},
		{"HeaderSpaces", parseTicket, withHeader(`{"alg": "HS256", "kid": "k1", "typ": "JWT"}`), ErrMalformed, "header must be exactly"},
		{"HeaderDuplicateKid", parseTicket, withHeader(`{"alg":"HS256","kid":"k2","typ":"JWT","kid":"k1"}`), ErrMalformed, "header must be exactly"},
		{"TypMissing", parseTicket, withHeader(`{"alg":"HS256","kid":"k1"}`), ErrMalformed, "header must be exactly"},
		{"TypOther", parseTicket, withHeader(`{"alg":"HS256","kid":"k1","typ":"at+jwt"}`), ErrMalformed, "header must be exactly"},
		{"KidMissing", parseTicket, withHeader(`{"alg":"HS256","typ":"JWT","x":1}`), ErrMalformed, "bad key id"},
		{"KidEmpty", parseTicket, withHeader(`{"alg":"HS256","kid":"","typ":"JWT"}`), ErrMalformed, "bad key id"},
		{"KidNumber", parseTicket, withHeader(`{"alg":"HS256","kid":1,"typ":"JWT"}`), ErrMalformed, "bad key id"},
		{"KidTooLong", parseTicket, withHeader(`{"alg":"HS256","kid":"` + strings.Repeat("k", 17) + `","typ":"JWT"}`), ErrMalformed, "bad key id"},
		{"KidWithDot", parseTicket, withHeader(`{"alg":"HS256","kid":"k.1","typ":"JWT"}`), ErrMalformed, "bad key id"},

		// The key and the signature.
		{"UnknownKeyID", parseTicket, withHeader(`{"alg":"HS256","kid":"k3","typ":"JWT"}`), ErrUnknownKey, `key id "k3"`},
		{"OtherKeyID", parseTicket, withSig(`{"alg":"HS256","kid":"k2","typ":"JWT"}`, segment(t, ticket, 1)), ErrBadSignature, `key id "k2"`},
		{"SameKeyIDOtherSecret", parseTicket, other.SignTicket(goldenTicket()), ErrBadSignature, ""},
		{"AudienceSwappedKeepingSignature", parseAdmission, withSig(headerK1, strings.Replace(segment(t, ticket, 1), "flashline-ticket", "flashline-admission", 1)), ErrBadSignature, ""},
		{"ClaimsOfAnotherTicket", parseTicket, segs[0] + "." + strings.Split(k.SignTicket(Ticket{SaleID: "sale_1", CustomerID: "cust_1", ArrivedAt: t0, Position: 1}), ".")[1] + "." + segs[2], ErrBadSignature, ""},

		// The kind.
		{"AdmissionAsTicket", parseTicket, admission, ErrWrongKind, "an admission token, want a ticket"},
		{"TicketAsAdmission", parseAdmission, ticket, ErrWrongKind, "a ticket, want an admission token"},
		{"UnknownAudience", parseTicket, signed(with(validTicket, "aud", `"flashline"`)), ErrMalformed, "unknown audience"},
		{"AudienceArray", parseTicket, signed(with(validTicket, "aud", `["flashline-ticket"]`)), ErrMalformed, `claim "aud"`},
		{"AudienceMissing", parseTicket, signed(without(validTicket, "aud")), ErrMalformed, `"aud" missing`},

		// The claims, decoded strictly.
		{"EmptyClaims", parseTicket, signed(""), ErrMalformed, "claim"},
		{"ClaimsNotJSON", parseTicket, signed("hello"), ErrMalformed, "claim"},
		{"ClaimsArray", parseTicket, signed("[]"), ErrMalformed, "not a JSON object"},
		{"ClaimsString", parseTicket, signed(`"aud"`), ErrMalformed, "not a JSON object"},
		{"ClaimsNull", parseTicket, signed("null"), ErrMalformed, `"aud" missing`},
		{"ClaimsEmptyObject", parseTicket, signed("{}"), ErrMalformed, `"aud" missing`},
		{"ClaimsTrailingData", parseTicket, signed("{" + validTicket + "}{}"), ErrMalformed, "after top-level value"},
		{"ClaimsTrailingGarbage", parseTicket, signed("{" + validTicket + "}x"), ErrMalformed, "after top-level value"},
		{"UnknownClaim", parseTicket, signed("{" + validTicket + `,"x":1}`), ErrMalformed, `unknown claim "x"`},
		{"NotBefore", parseTicket, signed("{" + validTicket + `,"nbf":1767225600}`), ErrMalformed, `unknown claim "nbf"`},
		{"ClaimOtherCase", parseTicket, signed("{" + validTicket + `,"Sale":"s"}`), ErrMalformed, `unknown claim "Sale"`},
		{"DuplicateClaim", parseTicket, signed("{" + validTicket + `,"sale":"t"}`), ErrMalformed, `claim "sale" appears twice`},
		{"DuplicateAudience", parseAdmission, signed("{" + validTicket + `,"aud":"flashline-admission"}`), ErrMalformed, `claim "aud" appears twice`},
		{"DuplicateNull", parseTicket, signed("{" + validTicket + `,"pos":null}`), ErrMalformed, `claim "pos" appears twice`},
		{"AdmissionClaimInTicket", parseTicket, signed("{" + validTicket + `,"jti":"a"}`), ErrMalformed, `"jti" does not belong in a ticket`},
		{"MissingCustomer", parseTicket, signed(without(validTicket, "sub")), ErrMalformed, `"sub" missing`},
		{"MissingArrival", parseTicket, signed(without(validTicket, "iat")), ErrMalformed, `"iat" missing`},
		{"MissingExpiry", parseTicket, signed(without(validTicket, "exp")), ErrMalformed, `"exp" missing`},
		{"MissingSale", parseTicket, signed(without(validTicket, "sale")), ErrMalformed, `"sale" missing`},
		{"MissingPosition", parseTicket, signed(without(validTicket, "pos")), ErrMalformed, `"pos" missing`},
		{"MissingPreOpen", parseTicket, signed(without(validTicket, "preopen")), ErrMalformed, `"preopen" missing`},
		{"MissingDraw", parseTicket, signed(without(validTicket, "draw")), ErrMalformed, `"draw" missing`},
		{"NullPosition", parseTicket, signed(with(validTicket, "pos", "null")), ErrMalformed, `"pos" missing`},
		{"EmptySale", parseTicket, signed(with(validTicket, "sale", `""`)), ErrMalformed, "sale id must be 1-128 bytes"},
		{"SaleTooLong", parseTicket, signed(with(validTicket, "sale", `"`+strings.Repeat("s", MaxIDLen+1)+`"`)), ErrMalformed, "sale id must be 1-128 bytes"},
		{"CustomerTooLongInBytes", parseTicket, signed(with(validTicket, "sub", `"`+strings.Repeat("é", MaxIDLen/2+1)+`"`)), ErrMalformed, "customer id must be 1-128 bytes"},
		{"CustomerControl", parseTicket, signed(with(validTicket, "sub", `"a\nb"`)), ErrMalformed, "customer id has a control character"},
		{"CustomerNUL", parseTicket, signed(with(validTicket, "sub", `"\u0000"`)), ErrMalformed, "control character"},
		{"CustomerDEL", parseTicket, signed(with(validTicket, "sub", "\"a\x7f\"")), ErrMalformed, "control character"},
		{"CustomerC1", parseTicket, signed(with(validTicket, "sub", `"\u0085"`)), ErrMalformed, "control character"},
		{"SaleNumber", parseTicket, signed(with(validTicket, "sale", "1")), ErrMalformed, `claim "sale"`},
		{"PositionZero", parseTicket, signed(with(validTicket, "pos", "0")), ErrMalformed, "position must be at least 1"},
		{"PositionNegative", parseTicket, signed(with(validTicket, "pos", "-5")), ErrMalformed, "position must be at least 1"},
		{"PositionOverflow", parseTicket, signed(with(validTicket, "pos", "9223372036854775808")), ErrMalformed, `claim "pos"`},
		{"PositionFloat", parseTicket, signed(with(validTicket, "pos", "1.5")), ErrMalformed, `claim "pos"`},
		{"PositionString", parseTicket, signed(with(validTicket, "pos", `"1"`)), ErrMalformed, `claim "pos"`},
		{"ArrivalExponent", parseTicket, signed(with(validTicket, "iat", "1.7e9")), ErrMalformed, `claim "iat"`},
		{"ArrivalBefore2000", parseTicket, signed(with(validTicket, "iat", "946684799")), ErrMalformed, "arrival time is outside the years 2000-2200"},
		{"ArrivalAfter2200", parseTicket, signed(with(validTicket, "iat", "7289654400")), ErrMalformed, "arrival time is outside"},
		{"ArrivalZeroTime", parseTicket, k.SignTicket(Ticket{SaleID: "s", CustomerID: "c", Position: 1}), ErrMalformed, "arrival time is outside"},
		{"ExpiryNotArrivalPlusTTL", parseTicket, signed(with(validTicket, "exp", "1767312001")), ErrMalformed, "exp must be iat + 24h0m0s"},
		{"ExpiryEarlier", parseTicket, signed(with(validTicket, "exp", "1767225601")), ErrMalformed, "exp must be iat + 24h0m0s"},
		{"ExpiryFloat", parseTicket, signed(with(validTicket, "exp", "1767312000.0")), ErrMalformed, `claim "exp"`},
		{"PreOpenNumber", parseTicket, signed(with(validTicket, "preopen", "0")), ErrMalformed, `claim "preopen"`},
		{"DrawNegative", parseTicket, signed(with(validTicket, "draw", "-1")), ErrMalformed, `claim "draw"`},
		{"DrawOverflow", parseTicket, signed(with(validTicket, "draw", "18446744073709551616")), ErrMalformed, `claim "draw"`},

		{"AdmissionMissingID", parseAdmission, signed(without(validAdmission, "jti")), ErrMalformed, `"jti" missing`},
		{"AdmissionMissingSale", parseAdmission, signed(without(validAdmission, "sale")), ErrMalformed, `"sale" missing`},
		{"AdmissionMissingCustomer", parseAdmission, signed(without(validAdmission, "sub")), ErrMalformed, `"sub" missing`},
		{"AdmissionMissingExpiry", parseAdmission, signed(without(validAdmission, "exp")), ErrMalformed, `"exp" missing`},
		{"AdmissionUnknownClaim", parseAdmission, signed("{" + validAdmission + `,"x":1}`), ErrMalformed, `unknown claim "x"`},
		{"AdmissionIssuedAt", parseAdmission, signed("{" + validAdmission + `,"iat":1767225600}`), ErrMalformed, `"iat" does not belong in an admission token`},
		{"AdmissionTicketClaims", parseAdmission, signed(with(validTicket, "aud", `"flashline-admission"`)), ErrMalformed, "does not belong in an admission token"},
		{"AdmissionDuplicateID", parseAdmission, signed("{" + validAdmission + `,"jti":"b"}`), ErrMalformed, `claim "jti" appears twice`},
		{"AdmissionEmptyID", parseAdmission, signed(with(validAdmission, "jti", `""`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDTooLong", parseAdmission, signed(with(validAdmission, "jti", `"`+strings.Repeat("a", MaxIDLen+1)+`"`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDDot", parseAdmission, signed(with(validAdmission, "jti", `"a.b"`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDSpace", parseAdmission, signed(with(validAdmission, "jti", `"a b"`)), ErrMalformed, "admission id must be"},
		{"AdmissionIDNotASCII", parseAdmission, signed(with(validAdmission, "jti", `"é"`)), ErrMalformed, "admission id must be"},
		{"AdmissionEmptyCustomer", parseAdmission, signed(with(validAdmission, "sub", `""`)), ErrMalformed, "customer id must be"},
		{"AdmissionSaleControl", parseAdmission, signed(with(validAdmission, "sale", `"\t"`)), ErrMalformed, "sale id has a control character"},
		{"AdmissionExpiryBefore2000", parseAdmission, signed(with(validAdmission, "exp", "0")), ErrMalformed, "expiry is outside"},
		{"AdmissionExpiryNegative", parseAdmission, signed(with(validAdmission, "exp", "-1")), ErrMalformed, "expiry is outside"},
		{"AdmissionExpiryAfter2200", parseAdmission, signed(with(validAdmission, "exp", "9223372036854775807")), ErrMalformed, "expiry is outside"},
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

	t.Run("ValidClaimsAccepted", func(t *testing.T) {
		t.Parallel()
		// The helpers above build the refused tokens from these.
		_, err := k.ParseTicket(signed("{" + validTicket + "}"))
		require.NoError(t, err)
		_, err = k.ParseTicket(withHeader(headerK1))
		require.NoError(t, err)
		_, err = k.ParseAdmission(signed("{" + validAdmission + "}"))
		require.NoError(t, err)
		// Whitespace around the claims is JSON's, as before.
		_, err = k.ParseTicket(signed(" {" + validTicket + "}\n"))
		require.NoError(t, err)
	})
}

// TestTamper changes every byte of a token, header, claims, signature and dots
// alike, to several other characters: no change is accepted.
func TestTamper(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1+",k2:"+secret2+",k3:"+secret1+",d1:"+secret2)
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
	require.Equal(t, "old", kidOf(t, ticket))
	require.Equal(t, "old", kidOf(t, admission))

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
		require.Equal(t, "new", kidOf(t, tok))
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

func TestKeyIDsAreNotAudiences(t *testing.T) {
	t.Parallel()
	// The kind is the signed audience: a key id that spells the other
	// kind's audience changes nothing.
	k := testRing(t, "flashline-ticket:"+secret1)
	tok := k.SignAdmission(goldenAdmission())
	require.Equal(t, "flashline-ticket", kidOf(t, tok))
	_, err := k.ParseAdmission(tok)
	require.NoError(t, err)
	_, err = k.ParseTicket(tok)
	requireSentinel(t, err, ErrWrongKind)
}

// TestLongestTokensFit: the longest ticket and admission that parse, with the
// longest key id, are within MaxTokenLen.
func TestLongestTokensFit(t *testing.T) {
	t.Parallel()
	k := testRing(t, strings.Repeat("K", MaxKeyIDLen)+":"+secret1).at(time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC))
	for _, id := range []string{worst, worstRunes} {
		tk := Ticket{SaleID: id, CustomerID: id, ArrivedAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC),
			Position: 1<<63 - 1, PreOpen: false, Draw: 1<<64 - 1}
		tok := k.SignTicket(tk)
		require.LessOrEqual(t, len(tok), MaxTokenLen)
		_, err := k.ParseTicket(tok)
		require.NoError(t, err)
		a := Admission{ID: strings.Repeat("_", MaxIDLen), SaleID: id, CustomerID: id, ExpiresAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC),
			Variant: strings.Repeat("v", 64)}
		tok = k.SignAdmission(a)
		require.LessOrEqual(t, len(tok), MaxTokenLen)
		_, err = k.ParseAdmission(tok)
		require.NoError(t, err)
		t.Logf("longest admission: %d bytes", len(tok))
	}
}
