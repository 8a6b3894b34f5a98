package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/internal/testkit/testidp"
)

// everyAlgorithm is a provider with a key of each algorithm a provider's
// token may use, a Verifier taking them and HS256 tokens of secret, and a
// good token of each algorithm (by name).
func everyAlgorithm(t testing.TB, o auth.Options) (*testidp.Provider, map[string]testidp.Key, *auth.Verifier, map[string]string) {
	t.Helper()
	p := testidp.New(t)
	keys := map[string]testidp.Key{}
	// HS256's is fixed (fuzzToken: cust_fuzz, expiring in 2100), so that an
	// input the fuzzer saved in an earlier run is judged against the same
	// one; the provider's keys are new in each run.
	tokens := map[string]string{"HS256": fuzzToken(t)}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		keys[string(alg)] = testidp.NewKey(t, alg)
		p.Add("k-"+string(alg), keys[string(alg)])
		tokens[string(alg)] = testidp.Sign(t, keys[string(alg)], "k-"+string(alg), p.Claims("cust_"+string(alg), nil))
	}
	o.JWTSecret, o.JWKSURL = secret, p.JWKSURL()
	return p, keys, providerVerifier(t, o, nil, nil), tokens
}

// signedPart is a token's header and claims, what its signature covers.
func signedPart(token string) string {
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return token
	}
	return token[:i]
}

// FuzzCustomerTokenEveryAlgorithm: with HS256 and a provider's RS256,
// ES256 and EdDSA keys all accepted, Customer never panics and accepts no
// token but one signed (its header and claims exactly those of a token
// signed with the secret or a published key), as the customer it names;
// FastCustomer, asked first, never accepts what Customer refuses nor names
// another customer.
func FuzzCustomerTokenEveryAlgorithm(f *testing.F) {
	p, keys, v, tokens := everyAlgorithm(f, auth.Options{})
	want := map[string]string{}
	for alg, tok := range tokens {
		want[signedPart(tok)] = "cust_" + alg
		if alg == "HS256" {
			want[signedPart(tok)] = "cust_fuzz"
		}
		parts := strings.Split(tok, ".")
		f.Add(tok)
		f.Add(parts[0] + "." + parts[1] + ".")
		f.Add(tok[:len(tok)-2])
		f.Add(tok + "=")
		// Another algorithm's header over these claims and signature.
		for other, o := range tokens {
			if other != alg {
				f.Add(strings.Split(o, ".")[0] + "." + parts[1] + "." + parts[2])
			}
		}
	}
	// The alg confusion: HS256 over the provider's claims, keyed by what
	// is public (the JWK, as the provider publishes it).
	jwks, err := (&jose.JSONWebKey{Key: keys["RS256"].Priv.Public()}).MarshalJSON()
	require.NoError(f, err)
	f.Add(signHSHeader(f, string(jwks), `{"alg":"HS256","typ":"JWT","kid":"k-RS256"}`, p.Claims("mallory", nil)))
	f.Add(signHSHeader(f, "", `{"alg":"HS256","typ":"JWT"}`, p.Claims("mallory", nil)))
	f.Add(b64(`{"alg":"none","kid":"k-ES256"}`) + "." + strings.Split(tokens["ES256"], ".")[1] + ".")
	f.Add(testidp.Sign(f, keys["ES256"], "k-EdDSA", p.Claims("mallory", nil)))
	f.Add(testidp.Sign(f, testidp.NewKey(f, jose.EdDSA), "k-EdDSA", p.Claims("mallory", nil)))
	f.Add(testidp.Sign(f, keys["RS256"], "k-RS256", p.Claims("mallory", func(c map[string]any) { c["exp"] = time.Now().Add(48 * time.Hour).Unix() })))
	f.Add("")
	f.Add("..")
	f.Fuzz(func(t *testing.T, token string) {
		var s auth.Scratch
		fast, decided := v.FastCustomer(token, &s, time.Now())
		fast = strings.Clone(fast)
		c, err := v.Customer(token)
		if decided && (err != nil || c.ID != fast) {
			t.Fatalf("FastCustomer accepted %q as %q; Customer: %q, %v", token, fast, c.ID, err)
		}
		if err != nil {
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("Customer(%q): error %v does not wrap ErrInvalidToken", token, err)
			}
			return
		}
		sub, ok := want[signedPart(token)]
		if !ok {
			t.Fatalf("Customer accepted %q, which no key signed", token)
		}
		if c.ID != sub {
			t.Fatalf("Customer(%q).ID = %q, want %q", token, c.ID, sub)
		}
	})
}

// BenchmarkVerify is what deciding a customer's token costs, by algorithm:
//
//   - verify: the whole verification, nothing remembered (a token seen for
//     the first time, through Customer);
//   - fast: HS256's fast path for a token not seen before (what the front
//     door pays for a flood of distinct buyers; a provider's token has
//     none, it goes to Customer once);
//   - remembered: the front door's check of a token verified before (a
//     retrying shopper's sold-out refusal).
func BenchmarkVerify(b *testing.B) {
	_, _, v, tokens := everyAlgorithm(b, auth.Options{})
	_, _, forgetful, ftokens := everyAlgorithm(b, auth.Options{})
	auth.Forgetful(forgetful)
	hs := newVerifier(b)
	for _, alg := range []string{"HS256", "RS256", "ES256", "EdDSA"} {
		tok := tokens[alg]
		b.Run(alg+"/verify", func(b *testing.B) {
			tok := ftokens[alg]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := forgetful.Customer(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
		if alg == "HS256" {
			b.Run(alg+"/fast", func(b *testing.B) {
				var s auth.Scratch
				b.ReportAllocs()
				for b.Loop() {
					if _, ok := hs.FastCustomer(tok, &s, time.Now()); !ok {
						b.Fatal("not decided")
					}
				}
			})
		}
		b.Run(alg+"/remembered", func(b *testing.B) {
			_, err := v.Customer(tok)
			require.NoError(b, err)
			var s auth.Scratch
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := v.FastCustomer(tok, &s, time.Now()); !ok {
					b.Fatal("not decided")
				}
			}
		})
	}
}
