package auth_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
)

const (
	secret     = "auth-test-jwt-secret"
	adminToken = "auth-test-admin-token"
)

func newVerifier(t testing.TB) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(secret, adminToken)
	require.NoError(t, err)
	return v
}

func TestNewVerifierRequiresBothSecrets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, secret, admin string }{
		{"NoJWTSecret", "", adminToken},
		{"NoAdminToken", secret, ""},
		{"Neither", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := auth.NewVerifier(tt.secret, tt.admin)
			require.Error(t, err)
			require.Nil(t, v)
		})
	}
}

func TestIsAdmin(t *testing.T) {
	t.Parallel()
	v := newVerifier(t)
	tests := []struct {
		name  string
		token string
		want  bool
	}{
		{"Exact", adminToken, true},
		{"Empty", "", false},
		{"Prefix", adminToken[:len(adminToken)-1], false},
		{"Longer", adminToken + "x", false},
		{"SameLengthOneByteOff", adminToken[:len(adminToken)-1] + "X", false},
		{"DifferentCase", strings.ToUpper(adminToken), false},
		{"TrailingSpace", adminToken + " ", false},
		{"LeadingSpace", " " + adminToken, false},
		{"TrailingNUL", adminToken + "\x00", false},
		{"Repeated", adminToken + adminToken, false},
		{"VeryLong", strings.Repeat("a", 1<<20), false},
		{"TheJWTSecret", secret, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, v.IsAdmin(tt.token))
		})
	}
}

func TestCustomerAcceptsMintedToken(t *testing.T) {
	t.Parallel()
	v := newVerifier(t)

	t.Run("WithAccountCreated", func(t *testing.T) {
		t.Parallel()
		created := time.Date(2020, 5, 17, 9, 30, 15, 999, time.FixedZone("CEST", 2*3600))
		tok, err := auth.Mint(secret, "cust_42", time.Hour, created)
		require.NoError(t, err)
		c, err := v.Customer(tok)
		require.NoError(t, err)
		require.Equal(t, "cust_42", c.ID)
		require.Equal(t, created.Truncate(time.Second).UTC(), c.AccountCreated)
		require.Equal(t, time.UTC, c.AccountCreated.Location())
	})
	t.Run("WithoutAccountCreated", func(t *testing.T) {
		t.Parallel()
		tok, err := auth.Mint(secret, "cust_43", time.Hour, time.Time{})
		require.NoError(t, err)
		c, err := v.Customer(tok)
		require.NoError(t, err)
		require.Equal(t, "cust_43", c.ID)
		require.True(t, c.AccountCreated.IsZero())
	})
	t.Run("Subject128Bytes", func(t *testing.T) {
		t.Parallel()
		sub := strings.Repeat("s", auth.MaxSubjectLen)
		tok, err := auth.Mint(secret, sub, time.Hour, time.Time{})
		require.NoError(t, err)
		c, err := v.Customer(tok)
		require.NoError(t, err)
		require.Equal(t, sub, c.ID)
	})
	t.Run("AccountCreatedBeforeEpoch", func(t *testing.T) {
		t.Parallel()
		created := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
		tok, err := auth.Mint(secret, "old", time.Hour, created)
		require.NoError(t, err)
		c, err := v.Customer(tok)
		require.NoError(t, err)
		require.Equal(t, created, c.AccountCreated)
	})
	t.Run("AdminTokenIsNotACustomer", func(t *testing.T) {
		t.Parallel()
		_, err := v.Customer(adminToken)
		require.ErrorIs(t, err, auth.ErrInvalidToken)
	})
}

func sign(t testing.TB, method jwt.SigningMethod, key string, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString([]byte(key))
	require.NoError(t, err)
	return tok
}

func claims(edit func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "cust_1", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}

// unsigned crafts an {"alg":"none"} token by hand: header, claims, no signature.
func unsigned(t testing.TB, header string) string {
	t.Helper()
	body, err := json.Marshal(claims(nil))
	require.NoError(t, err)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString(body) + "."
}

func TestCustomerRejects(t *testing.T) {
	t.Parallel()
	v := newVerifier(t)
	valid := sign(t, jwt.SigningMethodHS256, secret, claims(nil))
	parts := strings.Split(valid, ".")
	hs256 := func(edit func(jwt.MapClaims)) string { return sign(t, jwt.SigningMethodHS256, secret, claims(edit)) }
	otherClaims, err := json.Marshal(claims(func(c jwt.MapClaims) { c["sub"] = "someone_else" }))
	require.NoError(t, err)

	tests := []struct{ name, token string }{
		{"Empty", ""},
		{"Garbage", "garbage"},
		{"TwoSegments", parts[0] + "." + parts[1]},
		{"FourSegments", valid + ".x"},
		{"EmptySegments", ".."},
		{"OtherSecret", sign(t, jwt.SigningMethodHS256, "another-secret", claims(nil))},
		{"SecretPrefix", sign(t, jwt.SigningMethodHS256, secret[:len(secret)-1], claims(nil))},
		{"AlgNone", unsigned(t, `{"alg":"none","typ":"JWT"}`)},
		{"AlgNoneCapitalised", unsigned(t, `{"alg":"None","typ":"JWT"}`)},
		{"AlgMissing", unsigned(t, `{"typ":"JWT"}`)},
		{"AlgNoneWithValidSignature", unsigned(t, `{"alg":"none","typ":"JWT"}`) + parts[2]},
		{"HS384", sign(t, jwt.SigningMethodHS384, secret, claims(nil))},
		{"HS512", sign(t, jwt.SigningMethodHS512, secret, claims(nil))},
		{"Expired", hs256(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })},
		{"ExpiredBeyondLeeway", hs256(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() })},
		{"NoExp", hs256(func(c jwt.MapClaims) { delete(c, "exp") })},
		{"ExpNull", hs256(func(c jwt.MapClaims) { c["exp"] = nil })},
		{"ExpNotNumber", hs256(func(c jwt.MapClaims) { c["exp"] = "tomorrow" })},
		{"NotYetValid", hs256(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() })},
		{"IssuedInTheFuture", hs256(func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Minute).Unix() })},
		{"NoSub", hs256(func(c jwt.MapClaims) { delete(c, "sub") })},
		{"EmptySub", hs256(func(c jwt.MapClaims) { c["sub"] = "" })},
		{"Sub129Chars", hs256(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("s", 129) })},
		{"SubNotString", hs256(func(c jwt.MapClaims) { c["sub"] = 42 })},
		{"AcctCreatedNotNumber", hs256(func(c jwt.MapClaims) { c["acct_created"] = "2020-01-01" })},
		{"SwappedClaims", parts[0] + "." + base64.RawURLEncoding.EncodeToString(otherClaims) + "." + parts[2]},
		{"NoSignature", parts[0] + "." + parts[1] + "."},
		{"TruncatedSignature", valid[:len(valid)-4]},
		{"TrailingSpace", valid + " "},
		{"LeadingSpace", " " + valid},
		{"PaddedSignature", valid + "="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := v.Customer(tt.token)
			require.ErrorIs(t, err, auth.ErrInvalidToken)
			require.Equal(t, auth.Customer{}, c)
		})
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header, token string
		ok                  bool
	}{
		{"Bearer", "Bearer abc.def.ghi", "abc.def.ghi", true},
		{"LowercaseScheme", "bearer abc", "abc", true},
		{"UppercaseScheme", "BEARER abc", "abc", true},
		{"Empty", "", "", false},
		{"SchemeOnly", "Bearer", "", false},
		{"SchemeAndSpace", "Bearer ", "", false},
		{"Basic", "Basic dXNlcjpwYXNz", "", false},
		{"NoScheme", "abc.def.ghi", "", false},
		{"SchemePrefix", "Bearerabc", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token, ok := auth.BearerToken(tt.header)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.token, token)
		})
	}
}

// fuzzToken is a token signed with the right secret. Its claims are fixed (it
// expires in 2100), so the same bytes are valid in every run and an input the
// fuzzer saved in an earlier run is judged against the same token.
func fuzzToken(t testing.TB) string {
	t.Helper()
	return sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{
		"sub":          "cust_fuzz",
		"exp":          time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix(),
		"iat":          time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Unix(),
		"acct_created": time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC).Unix(),
	})
}

// sameToken reports whether token is want, allowing only what a lenient
// base64url decoder reads the same: the HMAC covers the header and claims
// segments as sent, so those must match byte for byte, while the signature
// segment may differ in its unused trailing bits or carry CR/LF, which
// encoding/base64 skips. It is re-encoded and compared.
func sameToken(token, want string) bool {
	if token == want {
		return true
	}
	got, wp := strings.Split(token, "."), strings.Split(want, ".")
	if len(got) != 3 || got[0] != wp[0] || got[1] != wp[1] {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(got[2])
	if err != nil {
		return false
	}
	return base64.RawURLEncoding.EncodeToString(sig) == wp[2]
}

// FuzzCustomerToken: Customer never panics and accepts nothing but the one
// token signed with the right secret (up to an encoding of its signature that
// decodes to the same bytes).
func FuzzCustomerToken(f *testing.F) {
	v := newVerifier(f)
	valid := fuzzToken(f)
	parts := strings.Split(valid, ".")
	enc := base64.RawURLEncoding
	f.Add(valid)
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(parts[0] + "." + parts[1])
	f.Add(valid + ".")
	f.Add(valid + "=")
	f.Add(valid[:len(valid)-1])
	// The last signature character carries two unused bits: flipping the
	// lowest decodes to the same signature and is accepted; flipping a used
	// bit is refused.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	f.Add(valid[:len(valid)-1] + string(alphabet[strings.IndexByte(alphabet, valid[len(valid)-1])^1]))
	f.Add(valid[:len(valid)-1] + string(alphabet[strings.IndexByte(alphabet, valid[len(valid)-1])^4]))
	f.Add(parts[0] + "." + parts[1] + "." + parts[2][:10] + "\r\n" + parts[2][10:])
	f.Add(enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".")
	f.Add(enc.EncodeToString([]byte(`{"alg":"HS512","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2])
	f.Add(parts[0] + "." + enc.EncodeToString([]byte(`{"sub":"admin","exp":4102444800}`)) + "." + parts[2])
	f.Add(sign(f, jwt.SigningMethodHS256, "another-secret", jwt.MapClaims{"sub": "cust_fuzz", "exp": 4102444800}))
	f.Add("")
	f.Add("..")
	f.Add(adminToken)
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Customer(token)
		if err != nil {
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("Customer(%q): error %v does not wrap ErrInvalidToken", token, err)
			}
			return
		}
		if !sameToken(token, valid) {
			t.Fatalf("Customer accepted %q, which is not the token signed with the secret", token)
		}
		if c.ID != "cust_fuzz" {
			t.Fatalf("Customer(%q).ID = %q", token, c.ID)
		}
	})
}

// FuzzCustomerSubject: any subject the right secret signs is accepted iff it
// is 1-128 characters of text without control or format characters once JSON
// has carried it, and comes back as sent.
func FuzzCustomerSubject(f *testing.F) {
	v := newVerifier(f)
	for _, s := range []string{"", "c", "cust_42", strings.Repeat("s", 128), strings.Repeat("s", 129),
		strings.Repeat("é", 64), strings.Repeat("é", 128), strings.Repeat("é", 129), "\x00", "a\x00b", "\x1b[2J", "a\u200bb", "\u202egnp.exe", "\ufeffc", "\xff", "a\"b", "<script>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sub string) {
		tok, err := auth.Mint(secret, sub, time.Hour, time.Time{})
		if err != nil {
			t.Fatalf("Mint(%q): %v", sub, err)
		}
		c, err := v.Customer(tok)
		// JSON carries invalid UTF-8 as U+FFFD, so the subject that arrives
		// is the one encoding/json produces.
		sent := sub
		if !utf8.ValidString(sub) {
			b, _ := json.Marshal(sub)
			_ = json.Unmarshal(b, &sent)
		}
		n := utf8.RuneCountInString(sent)
		want := n >= 1 && n <= auth.MaxSubjectLen && flashline.ValidText(sent)
		if (err == nil) != want {
			t.Fatalf("Customer(sub %q, %d characters) error = %v, want accepted=%v", sent, n, err, want)
		}
		if err == nil && c.ID != sent {
			t.Fatalf("Customer(sub %q).ID = %q", sent, c.ID)
		}
	})
}

// FuzzBearerToken: the Authorization header parser never panics, and a token
// it returns is non-empty and came after a "Bearer" scheme.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer abc", "Bearer  abc ", "Bearer", "Bearer ", "Basic abc", "", "Bearer a b", "Bearer \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		token, ok := auth.BearerToken(header)
		if !ok {
			return
		}
		scheme, _, _ := strings.Cut(header, " ")
		if token == "" || !strings.EqualFold(scheme, "Bearer") || !strings.Contains(header, token) {
			t.Fatalf("BearerToken(%q) = %q", header, token)
		}
	})
}
