package auth_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/internal/testkit/testidp"
)

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// logs is a logger's output, safe for the goroutines that write it.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// providerVerifier is a Verifier of p's tokens, configured by o (the
// issuer alone unless o says more), paced by c, logging to l.
func providerVerifier(t testing.TB, o auth.Options, c *clock, l *logs) *auth.Verifier {
	t.Helper()
	if c == nil {
		c = &clock{now: time.Now()}
	}
	if l != nil {
		o.Logger = slog.New(slog.NewTextHandler(l, nil))
	}
	v, err := auth.New(t.Context(), adminToken, auth.WithClock(o, c.Now))
	require.NoError(t, err)
	return v
}

func TestProviderTokens(t *testing.T) {
	t.Parallel()
	p := testidp.New(t)
	keys := map[string]testidp.Key{}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		keys[string(alg)] = testidp.NewKey(t, alg)
		p.Add("k-"+string(alg), keys[string(alg)])
	}
	for name, o := range map[string]auth.Options{
		"Discovery":        {Issuer: p.Issuer, Audience: testidp.Audience},
		"JWKSURL":          {JWKSURL: p.Issuer + "/keys"},
		"JWKSURLAndSecret": {JWKSURL: p.Issuer + "/keys", JWTSecret: secret},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := providerVerifier(t, o, nil, nil)
			require.True(t, v.HasProvider())
			require.Equal(t, 3, v.ProviderKeys())
			for alg, k := range keys {
				created := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
				tok := testidp.Sign(t, k, "k-"+alg, p.Claims("cust|"+alg, func(c map[string]any) { c["acct_created"] = created.Unix() }))
				// Not remembered yet: the fast path leaves it to Customer.
				var s auth.Scratch
				_, ok := v.FastCustomer(tok, &s, time.Now())
				require.False(t, ok, alg)
				c, err := v.Customer(tok)
				require.NoError(t, err, alg)
				require.Equal(t, "cust|"+alg, c.ID)
				require.Equal(t, created, c.AccountCreated)
				// Remembered: the next request's refusal pays no signature.
				id, ok := v.FastCustomer(tok, &s, time.Now())
				require.True(t, ok, alg)
				require.Equal(t, "cust|"+alg, id)
				// Without a kid, every key of the algorithm's type is tried.
				c, err = v.Customer(testidp.Sign(t, k, "", p.Claims("nokid|"+alg, nil)))
				require.NoError(t, err, alg)
				require.Equal(t, "nokid|"+alg, c.ID)
			}
			if o.JWTSecret != "" {
				c, err := v.Customer(signHS(t, secret, claims(nil)))
				require.NoError(t, err, "HS256 still, beside the provider")
				require.Equal(t, "cust_1", c.ID)
			}
		})
	}
}

// signHS signs claims with HS256 under key, by hand (golang-jwt refuses an
// empty key, which is what an attacker would try).
func signHS(t testing.TB, key string, c map[string]any) string {
	t.Helper()
	return signHSHeader(t, key, `{"alg":"HS256","typ":"JWT"}`, c)
}

func signHSHeader(t testing.TB, key, header string, c map[string]any) string {
	t.Helper()
	body, err := json.Marshal(c)
	require.NoError(t, err)
	tok := b64(header) + "." + b64(string(body))
	return tok + "." + hmacSig(key, tok)
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestProviderRejects(t *testing.T) {
	t.Parallel()
	p := testidp.New(t)
	rs, es, ed := testidp.NewKey(t, jose.RS256), testidp.NewKey(t, jose.ES256), testidp.NewKey(t, jose.EdDSA)
	p.Add("rs", rs)
	p.Add("es", es)
	p.Add("ed", ed)
	enc := testidp.NewKey(t, jose.RS256)
	enc.Use = "enc"
	p.Add("enc", enc)
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	p.Add("weak", testidp.Key{Alg: jose.RS256, Priv: weak})
	v := providerVerifier(t, auth.Options{Issuer: p.Issuer, Audience: testidp.Audience}, nil, nil)

	// The public key as an HMAC secret, in the forms an attacker would try
	// (the alg confusion attack): PEM, DER, and the JWK's own modulus.
	pub := rs.Priv.Public()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	jwkJSON, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: "rs"})
	require.NoError(t, err)
	hsWithKid := func(key string) string {
		return signHSHeader(t, key, `{"alg":"HS256","typ":"JWT","kid":"rs"}`, p.Claims("mallory", nil))
	}
	good := func(edit func(map[string]any)) map[string]any { return p.Claims("cust_1", edit) }
	now := time.Now()
	otherIssuer := testidp.New(t)

	for name, tok := range map[string]string{
		"WrongIssuer":            testidp.Sign(t, rs, "rs", good(func(c map[string]any) { c["iss"] = otherIssuer.Issuer })),
		"NoIssuer":               testidp.Sign(t, rs, "rs", good(func(c map[string]any) { delete(c, "iss") })),
		"IssuerWithSlash":        testidp.Sign(t, rs, "rs", good(func(c map[string]any) { c["iss"] = p.Issuer + "/" })),
		"WrongAudience":          testidp.Sign(t, rs, "rs", good(func(c map[string]any) { c["aud"] = "another-app" })),
		"NoAudience":             testidp.Sign(t, rs, "rs", good(func(c map[string]any) { delete(c, "aud") })),
		"Expired":                testidp.Sign(t, es, "es", good(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })),
		"NoExp":                  testidp.Sign(t, es, "es", good(func(c map[string]any) { delete(c, "exp") })),
		"NotYetValid":            testidp.Sign(t, es, "es", good(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })),
		"IssuedInTheFuture":      testidp.Sign(t, ed, "ed", good(func(c map[string]any) { c["iat"] = now.Add(time.Minute).Unix() })),
		"LivesTooLong":           testidp.Sign(t, ed, "ed", good(func(c map[string]any) { c["exp"] = now.Add(25 * time.Hour).Unix() })),
		"LivesTooLongWithoutIat": testidp.Sign(t, ed, "ed", good(func(c map[string]any) { delete(c, "iat"); c["exp"] = now.Add(25 * time.Hour).Unix() })),
		"IssuedLongAgo":          testidp.Sign(t, ed, "ed", good(func(c map[string]any) { c["iat"] = now.Add(-48 * time.Hour).Unix() })),
		"NoSub":                  testidp.Sign(t, rs, "rs", good(func(c map[string]any) { delete(c, "sub") })),
		"HS256WithThePEM":        hsWithKid(pemKey),
		"HS256WithTheDER":        hsWithKid(string(der)),
		"HS256WithTheJWK":        hsWithKid(string(jwkJSON)),
		"HS256WithAnEmptySecret": hsWithKid(""),
		"ForgedUnderKnownKid":    testidp.Sign(t, testidp.NewKey(t, jose.RS256), "rs", good(nil)),
		"ES256UnderAnRSAKid":     testidp.Sign(t, es, "rs", good(nil)),
		"EdDSAUnderAnECKid":      testidp.Sign(t, ed, "es", good(nil)),
		"RS256UnderAnEdKid":      testidp.Sign(t, rs, "ed", good(nil)),
		"KeyForEncryption":       testidp.Sign(t, enc, "enc", good(nil)),
		"RSAKeyOf1024Bits":       testidp.Sign(t, testidp.Key{Alg: jose.RS256, Priv: weak}, "weak", good(nil)),
		"UnknownKid":             testidp.Sign(t, testidp.NewKey(t, jose.ES256), "nobody", good(nil)),
		"UnknownKeyWithoutKid":   testidp.Sign(t, testidp.NewKey(t, jose.ES256), "", good(nil)),
		"RS384":                  signAlg(t, jose.RS384, rs.Priv, "rs", good(nil)),
		"PS256":                  signAlg(t, jose.PS256, rs.Priv, "rs", good(nil)),
		"ES384":                  signAlg(t, jose.ES384, mustEC(t, elliptic.P384()), "es", good(nil)),
		"EmbeddedJWK":            signEmbedded(t, testidp.NewKey(t, jose.ES256), good(nil)),
		"EmbeddedJWKKnownKid":    signEmbedded(t, testidp.NewKey(t, jose.ES256), good(nil), "es"),
		"AlgNone":                b64(`{"alg":"none","typ":"JWT","kid":"rs"}`) + "." + b64(mustJSON(t, good(nil))) + ".",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := v.Customer(tok)
			require.ErrorIs(t, err, auth.ErrInvalidToken)
			require.Equal(t, auth.Customer{}, c)
			var s auth.Scratch
			_, ok := v.FastCustomer(tok, &s, time.Now())
			require.False(t, ok)
		})
	}
	t.Run("HS256WithoutASecret", func(t *testing.T) {
		t.Parallel()
		// No JWT secret configured: no HS256 token at all, whatever it was
		// signed with (the empty key included), on either path.
		for _, key := range []string{"", secret, pemKey} {
			tok := signHS(t, key, good(nil))
			_, err := v.Customer(tok)
			require.ErrorIs(t, err, auth.ErrInvalidToken)
			var s auth.Scratch
			_, ok := v.FastCustomer(tok, &s, time.Now())
			require.False(t, ok)
		}
	})
}

func signAlg(t testing.TB, alg jose.SignatureAlgorithm, priv crypto.Signer, kid string, c map[string]any) string {
	t.Helper()
	return testidp.Sign(t, testidp.Key{Alg: alg, Priv: priv}, kid, c)
}

func mustEC(t testing.TB, curve elliptic.Curve) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	require.NoError(t, err)
	return k
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestProviderKeyRotation: the provider starts signing with a new key in
// the middle of a sale. The first token of the new kid makes the instance
// fetch the keys again, and it verifies; the key withdrawn with that fetch
// verifies no new token, while tokens already verified stay good until
// their exp. A flood of kids nobody publishes fetches at most once per
// RefetchEvery.
func TestProviderKeyRotation(t *testing.T) {
	t.Parallel()
	p := testidp.New(t)
	old := testidp.NewKey(t, jose.ES256)
	p.Add("2026-01", old)
	c := &clock{now: time.Now()}
	v := providerVerifier(t, auth.Options{Issuer: p.Issuer}, c, nil)
	before := testidp.Sign(t, old, "2026-01", p.Claims("early", nil))
	_, err := v.Customer(before)
	require.NoError(t, err)
	fetches := p.JWKSFetches()

	next := testidp.NewKey(t, jose.RS256)
	p.Add("2026-02", next)
	p.Withdraw("2026-01")
	cust, err := v.Customer(testidp.Sign(t, next, "2026-02", p.Claims("late", nil)))
	require.NoError(t, err, "the new kid is fetched")
	require.Equal(t, "late", cust.ID)
	require.Equal(t, fetches+1, p.JWKSFetches())

	_, err = v.Customer(testidp.Sign(t, old, "2026-01", p.Claims("stale", nil)))
	require.ErrorIs(t, err, auth.ErrInvalidToken, "the withdrawn key verifies no new token")
	_, err = v.Customer(before)
	require.NoError(t, err, "a token verified before stays good until its exp")

	// Kids nobody publishes, many of them, within RefetchEvery of the
	// last fetch (the clock does not move): no fetch at all. Then, the
	// clock past RefetchEvery, one fetch for all of them.
	for i := range 50 {
		_, err := v.Customer(testidp.Sign(t, next, "made-up-"+strconv.Itoa(i), p.Claims("x", nil)))
		require.ErrorIs(t, err, auth.ErrInvalidToken)
	}
	require.Equal(t, fetches+1, p.JWKSFetches(), "no refetch within RefetchEvery")
	c.Advance(auth.RefetchEvery)
	for i := range 50 {
		_, err := v.Customer(testidp.Sign(t, next, "made-up-again-"+strconv.Itoa(i), p.Claims("x", nil)))
		require.ErrorIs(t, err, auth.ErrInvalidToken)
	}
	require.Equal(t, fetches+2, p.JWKSFetches(), "one refetch per RefetchEvery")
}

// TestProviderDown: while the provider does not answer, the keys fetched
// before keep verifying; a token of any other key is refused (never an open
// door), and the outage is counted and logged. When it answers again, the
// next unknown kid (RefetchEvery later) fetches the keys again.
func TestProviderDown(t *testing.T) {
	t.Parallel()
	p := testidp.New(t)
	k := testidp.NewKey(t, jose.EdDSA)
	p.Add("k1", k)
	c, l := &clock{now: time.Now()}, &logs{}
	v := providerVerifier(t, auth.Options{Issuer: p.Issuer}, c, l)
	require.Zero(t, v.KeyFetchFailures())

	p.SetDown(true)
	cust, err := v.Customer(testidp.Sign(t, k, "k1", p.Claims("during-outage", nil)))
	require.NoError(t, err, "a cached key verifies a token never seen")
	require.Equal(t, "during-outage", cust.ID)

	k2 := testidp.NewKey(t, jose.EdDSA)
	p.Add("k2", k2)
	tok2 := testidp.Sign(t, k2, "k2", p.Claims("new-key", nil))
	_, err = v.Customer(tok2)
	require.ErrorIs(t, err, auth.ErrInvalidToken, "an unknown kid is refused while the provider is down")
	require.Equal(t, uint64(1), v.KeyFetchFailures())
	require.Contains(t, l.String(), "the identity provider's keys could not be fetched")
	require.Equal(t, 1, v.ProviderKeys(), "the keys fetched before are kept")

	p.SetDown(false)
	_, err = v.Customer(tok2)
	require.ErrorIs(t, err, auth.ErrInvalidToken, "within RefetchEvery of the failed fetch: not fetched again")
	c.Advance(auth.RefetchEvery)
	cust, err = v.Customer(tok2)
	require.NoError(t, err)
	require.Equal(t, "new-key", cust.ID)
	require.Equal(t, uint64(1), v.KeyFetchFailures())
}

// TestProviderDownAtStart: an instance started while the provider does not
// answer starts (New returns), refuses every provider token, and discovers
// the keys once the provider answers.
func TestProviderDownAtStart(t *testing.T) {
	t.Parallel()
	p := testidp.New(t)
	k := testidp.NewKey(t, jose.RS256)
	p.Add("k1", k)
	p.SetDown(true)
	c, l := &clock{now: time.Now()}, &logs{}
	v := providerVerifier(t, auth.Options{Issuer: p.Issuer}, c, l)
	require.Equal(t, uint64(1), v.KeyFetchFailures())
	require.Contains(t, l.String(), "discovery")
	tok := testidp.Sign(t, k, "k1", p.Claims("first", nil))
	_, err := v.Customer(tok)
	require.ErrorIs(t, err, auth.ErrInvalidToken)

	p.SetDown(false)
	c.Advance(auth.RefetchEvery)
	cust, err := v.Customer(tok)
	require.NoError(t, err)
	require.Equal(t, "first", cust.ID)
}

// TestProviderDiscoveryNamesAnotherIssuer: a discovery document must name
// the issuer it was asked for; one that names another is not used.
func TestProviderDiscoveryNamesAnotherIssuer(t *testing.T) {
	t.Parallel()
	p := testidp.New(t)
	k := testidp.NewKey(t, jose.ES256)
	p.Add("k1", k)
	real := p.Issuer
	p.NameIssuer("https://id.example.com")
	l := &logs{}
	v := providerVerifier(t, auth.Options{Issuer: real}, nil, l)
	require.Equal(t, uint64(1), v.KeyFetchFailures())
	require.Contains(t, l.String(), "names the issuer")
	// The first token tries the discovery again, and refuses with it.
	_, err := v.Customer(testidp.Sign(t, k, "k1", map[string]any{"iss": real, "sub": "a", "exp": time.Now().Add(time.Hour).Unix()}))
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	require.Equal(t, uint64(2), v.KeyFetchFailures())
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		admin string
		o     auth.Options
	}{
		"NoAdminToken":    {"", auth.Options{JWTSecret: secret}},
		"NoCustomers":     {adminToken, auth.Options{Audience: "x"}},
		"PlainHTTPIssuer": {adminToken, auth.Options{Issuer: "http://id.example.com"}},
		"PlainHTTPJWKS":   {adminToken, auth.Options{JWKSURL: "http://id.example.com/keys"}},
		"RelativeJWKS":    {adminToken, auth.Options{JWKSURL: "/keys"}},
		"NegativeAge":     {adminToken, auth.Options{JWTSecret: secret, MaxTokenAge: -time.Hour}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v, err := auth.New(t.Context(), tc.admin, tc.o)
			require.Error(t, err)
			require.Nil(t, v)
		})
	}
}

// TestHS256WithIssuerAudienceAge: a JWT secret with an issuer, an audience
// or a longest age checks them on HS256 tokens too, and the fast path then
// leaves such tokens to Customer (which checks them) until remembered.
func TestHS256WithIssuerAudienceAge(t *testing.T) {
	t.Parallel()
	v, err := auth.New(t.Context(), adminToken, auth.Options{JWTSecret: secret, Audience: "shop", MaxTokenAge: time.Hour})
	require.NoError(t, err)
	now := time.Now()
	ok := func(c jwt.MapClaims) { c["aud"] = "shop" }
	good := signHS(t, secret, claims(ok))
	var s auth.Scratch
	_, decided := v.FastCustomer(good, &s, now)
	require.False(t, decided, "not remembered yet, and the fast path checks no audience")
	c, err := v.Customer(good)
	require.NoError(t, err)
	require.Equal(t, "cust_1", c.ID)
	id, decided := v.FastCustomer(good, &s, now)
	require.True(t, decided)
	require.Equal(t, "cust_1", id)
	for name, tok := range map[string]string{
		"NoAudience":    signHS(t, secret, claims(nil)),
		"WrongAudience": signHS(t, secret, claims(func(c jwt.MapClaims) { c["aud"] = "other" })),
		"TooLong":       signHS(t, secret, claims(func(c jwt.MapClaims) { ok(c); c["exp"] = now.Add(2 * time.Hour).Unix() })),
		"Minted":        mustMint(t, secret, "cust_2", 2*time.Hour),
	} {
		_, err := v.Customer(tok)
		require.ErrorIs(t, err, auth.ErrInvalidToken, name)
	}
	// Without them, HS256 is as it was: Mint's day-long tokens and more.
	plain := newVerifier(t)
	_, err = plain.Customer(mustMint(t, secret, "cust_3", 30*24*time.Hour))
	require.NoError(t, err)
}

func mustMint(t testing.TB, key, sub string, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.Mint(key, sub, ttl, time.Time{})
	require.NoError(t, err)
	return tok
}

// TestProviderCacheHeaders: the keys are fetched again when the provider's
// Cache-Control max-age says, within a minute and an hour; without one,
// every DefaultRefreshInterval.
func TestProviderCacheHeaders(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]time.Duration{
		"":                           auth.DefaultRefreshInterval,
		"public, max-age=600":        10 * time.Minute,
		"max-age=5":                  time.Minute,
		"no-cache":                   time.Minute,
		"public, max-age=86400":      time.Hour,
		"max-age=oops":               auth.DefaultRefreshInterval,
		"private, must-revalidate":   auth.DefaultRefreshInterval,
		"max-age=120, s-maxage=9999": 2 * time.Minute,
	} {
		t.Run(header, func(t *testing.T) {
			t.Parallel()
			p := testidp.New(t)
			p.Add("k1", testidp.NewKey(t, jose.EdDSA))
			p.SetCacheControl(header)
			v := providerVerifier(t, auth.Options{JWKSURL: p.JWKSURL()}, nil, nil)
			require.Equal(t, 1, v.ProviderKeys())
			require.Equal(t, want, auth.NextRefresh(v))
		})
	}
	require.Equal(t, time.Duration(-1), auth.ParseMaxAge(nil))
	require.Equal(t, 30*time.Second, auth.ParseMaxAge([]string{"public", `max-age="30"`}))
}

// signEmbedded signs claims with a key of the attacker's, carrying its
// public key in the header ("jwk"), and the kid given if any: a header's
// key is never trusted.
func signEmbedded(t testing.TB, k testidp.Key, c map[string]any, kid ...string) string {
	t.Helper()
	opts := &jose.SignerOptions{EmbedJWK: true}
	if len(kid) > 0 {
		opts = opts.WithHeader("kid", kid[0])
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: k.Priv}, opts)
	require.NoError(t, err)
	tok, err := josejwt.Signed(signer).Claims(c).Serialize()
	require.NoError(t, err)
	return tok
}

// TestProviderNewKeyBurst: the first tokens of a key the provider has just
// started signing with arrive together; the one that finds the kid unknown
// fetches the keys, and those arriving while it does wait for that fetch
// instead of being refused: all are accepted, for one fetch.
func TestProviderNewKeyBurst(t *testing.T) {
	t.Parallel()
	p := testidp.New(t)
	p.Add("old", testidp.NewKey(t, jose.ES256))
	v := providerVerifier(t, auth.Options{JWKSURL: p.JWKSURL()}, nil, nil)
	fetches := p.JWKSFetches()
	k := testidp.NewKey(t, jose.EdDSA)
	p.Add("new", k)
	release := p.HoldJWKS()
	errs := make(chan error, 20)
	go func() {
		_, err := v.Customer(testidp.Sign(t, k, "new", p.Claims("first", nil)))
		errs <- err
	}()
	var then []string
	for i := range 19 {
		then = append(then, testidp.Sign(t, k, "new", p.Claims("then-"+strconv.Itoa(i), nil)))
	}
	require.Eventually(t, func() bool { return p.JWKSFetches() == fetches+1 }, 10*time.Second, time.Millisecond, "the refetch has started")
	for _, tok := range then {
		go func() {
			_, err := v.Customer(tok)
			errs <- err
		}()
	}
	release()
	for range 20 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, fetches+1, p.JWKSFetches())
}
