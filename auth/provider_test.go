package auth_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
)

// provider is an OpenID provider on 127.0.0.1: its discovery document and
// its JWKS, served and signed with go-jose (an implementation of its own,
// not the golang-jwt Flashline verifies with). Keys are added and
// withdrawn while it runs, and it can go down (every connection dropped).
type provider struct {
	t      testing.TB
	srv    *httptest.Server
	issuer string

	mu   sync.Mutex
	keys map[string]providerKey // by kid, published
	down bool
	// jwksFetches counts requests for the JWKS, answered or not.
	jwksFetches atomic.Int64
}

type providerKey struct {
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
	use  string
}

func newProvider(t testing.TB) *provider {
	t.Helper()
	p := &provider{t: t, keys: map[string]providerKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		p.serve(w, map[string]any{
			"issuer":                                p.issuer,
			"jwks_uri":                              p.issuer + "/keys",
			"authorization_endpoint":                p.issuer + "/authorize",
			"token_endpoint":                        p.issuer + "/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		p.jwksFetches.Add(1)
		p.mu.Lock()
		var set jose.JSONWebKeySet
		for kid, k := range p.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: kid, Algorithm: string(k.alg), Use: k.use})
		}
		p.mu.Unlock()
		p.serve(w, set)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.issuer = p.srv.URL
	return p
}

// serve writes doc, or drops the connection while the provider is down.
func (p *provider) serve(w http.ResponseWriter, doc any) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	require.NoError(p.t, json.NewEncoder(w).Encode(doc))
}

func (p *provider) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// newKey makes a key for alg; it is published once added.
func newKey(t testing.TB, alg jose.SignatureAlgorithm) providerKey {
	t.Helper()
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("no key for %s", alg)
	}
	require.NoError(t, err)
	return providerKey{alg: alg, priv: priv}
}

func (p *provider) add(kid string, k providerKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = k
}

func (p *provider) withdraw(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, kid)
}

// signJose signs claims with k under kid (no kid header if kid is "").
func signJose(t testing.TB, k providerKey, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.priv}, opts)
	require.NoError(t, err)
	tok, err := josejwt.Signed(signer).Claims(claims).Serialize()
	require.NoError(t, err)
	return tok
}

// idClaims are the claims of a provider's token for sub, good for an hour.
func (p *provider) idClaims(sub string, edit func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": p.issuer, "aud": "flashline-shop", "sub": sub,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}

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
	p := newProvider(t)
	keys := map[string]providerKey{}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		keys[string(alg)] = newKey(t, alg)
		p.add("k-"+string(alg), keys[string(alg)])
	}
	for name, o := range map[string]auth.Options{
		"Discovery":        {Issuer: p.issuer, Audience: "flashline-shop"},
		"JWKSURL":          {JWKSURL: p.issuer + "/keys"},
		"JWKSURLAndSecret": {JWKSURL: p.issuer + "/keys", JWTSecret: secret},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := providerVerifier(t, o, nil, nil)
			require.True(t, v.HasProvider())
			require.Equal(t, 3, v.ProviderKeys())
			for alg, k := range keys {
				created := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
				tok := signJose(t, k, "k-"+alg, p.idClaims("cust|"+alg, func(c map[string]any) { c["acct_created"] = created.Unix() }))
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
				c, err = v.Customer(signJose(t, k, "", p.idClaims("nokid|"+alg, nil)))
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
	p := newProvider(t)
	rs, es, ed := newKey(t, jose.RS256), newKey(t, jose.ES256), newKey(t, jose.EdDSA)
	p.add("rs", rs)
	p.add("es", es)
	p.add("ed", ed)
	enc := newKey(t, jose.RS256)
	enc.use = "enc"
	p.add("enc", enc)
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	p.add("weak", providerKey{alg: jose.RS256, priv: weak})
	v := providerVerifier(t, auth.Options{Issuer: p.issuer, Audience: "flashline-shop"}, nil, nil)

	// The public key as an HMAC secret, in the forms an attacker would try
	// (the alg confusion attack): PEM, DER, and the JWK's own modulus.
	pub := rs.priv.Public()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	jwkJSON, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: "rs"})
	require.NoError(t, err)
	hsWithKid := func(key string) string {
		return signHSHeader(t, key, `{"alg":"HS256","typ":"JWT","kid":"rs"}`, p.idClaims("mallory", nil))
	}
	good := func(edit func(map[string]any)) map[string]any { return p.idClaims("cust_1", edit) }
	now := time.Now()
	otherIssuer := newProvider(t)

	for name, tok := range map[string]string{
		"WrongIssuer":            signJose(t, rs, "rs", good(func(c map[string]any) { c["iss"] = otherIssuer.issuer })),
		"NoIssuer":               signJose(t, rs, "rs", good(func(c map[string]any) { delete(c, "iss") })),
		"IssuerWithSlash":        signJose(t, rs, "rs", good(func(c map[string]any) { c["iss"] = p.issuer + "/" })),
		"WrongAudience":          signJose(t, rs, "rs", good(func(c map[string]any) { c["aud"] = "another-app" })),
		"NoAudience":             signJose(t, rs, "rs", good(func(c map[string]any) { delete(c, "aud") })),
		"Expired":                signJose(t, es, "es", good(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })),
		"NoExp":                  signJose(t, es, "es", good(func(c map[string]any) { delete(c, "exp") })),
		"NotYetValid":            signJose(t, es, "es", good(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })),
		"IssuedInTheFuture":      signJose(t, ed, "ed", good(func(c map[string]any) { c["iat"] = now.Add(time.Minute).Unix() })),
		"LivesTooLong":           signJose(t, ed, "ed", good(func(c map[string]any) { c["exp"] = now.Add(25 * time.Hour).Unix() })),
		"LivesTooLongWithoutIat": signJose(t, ed, "ed", good(func(c map[string]any) { delete(c, "iat"); c["exp"] = now.Add(25 * time.Hour).Unix() })),
		"IssuedLongAgo":          signJose(t, ed, "ed", good(func(c map[string]any) { c["iat"] = now.Add(-48 * time.Hour).Unix() })),
		"NoSub":                  signJose(t, rs, "rs", good(func(c map[string]any) { delete(c, "sub") })),
		"HS256WithThePEM":        hsWithKid(pemKey),
		"HS256WithTheDER":        hsWithKid(string(der)),
		"HS256WithTheJWK":        hsWithKid(string(jwkJSON)),
		"HS256WithAnEmptySecret": hsWithKid(""),
		"ForgedUnderKnownKid":    signJose(t, newKey(t, jose.RS256), "rs", good(nil)),
		"ES256UnderAnRSAKid":     signJose(t, es, "rs", good(nil)),
		"EdDSAUnderAnECKid":      signJose(t, ed, "es", good(nil)),
		"RS256UnderAnEdKid":      signJose(t, rs, "ed", good(nil)),
		"KeyForEncryption":       signJose(t, enc, "enc", good(nil)),
		"RSAKeyOf1024Bits":       signJose(t, providerKey{alg: jose.RS256, priv: weak}, "weak", good(nil)),
		"UnknownKid":             signJose(t, newKey(t, jose.ES256), "nobody", good(nil)),
		"UnknownKeyWithoutKid":   signJose(t, newKey(t, jose.ES256), "", good(nil)),
		"RS384":                  signAlg(t, jose.RS384, rs.priv, "rs", good(nil)),
		"PS256":                  signAlg(t, jose.PS256, rs.priv, "rs", good(nil)),
		"ES384":                  signAlg(t, jose.ES384, mustEC(t, elliptic.P384()), "es", good(nil)),
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
	return signJose(t, providerKey{alg: alg, priv: priv}, kid, c)
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
	p := newProvider(t)
	old := newKey(t, jose.ES256)
	p.add("2026-01", old)
	c := &clock{now: time.Now()}
	v := providerVerifier(t, auth.Options{Issuer: p.issuer}, c, nil)
	before := signJose(t, old, "2026-01", p.idClaims("early", nil))
	_, err := v.Customer(before)
	require.NoError(t, err)
	fetches := p.jwksFetches.Load()

	next := newKey(t, jose.RS256)
	p.add("2026-02", next)
	p.withdraw("2026-01")
	cust, err := v.Customer(signJose(t, next, "2026-02", p.idClaims("late", nil)))
	require.NoError(t, err, "the new kid is fetched")
	require.Equal(t, "late", cust.ID)
	require.Equal(t, fetches+1, p.jwksFetches.Load())

	_, err = v.Customer(signJose(t, old, "2026-01", p.idClaims("stale", nil)))
	require.ErrorIs(t, err, auth.ErrInvalidToken, "the withdrawn key verifies no new token")
	_, err = v.Customer(before)
	require.NoError(t, err, "a token verified before stays good until its exp")

	// Kids nobody publishes, many of them, within RefetchEvery of the
	// last fetch (the clock does not move): no fetch at all. Then, the
	// clock past RefetchEvery, one fetch for all of them.
	for i := range 50 {
		_, err := v.Customer(signJose(t, next, "made-up-"+strconv.Itoa(i), p.idClaims("x", nil)))
		require.ErrorIs(t, err, auth.ErrInvalidToken)
	}
	require.Equal(t, fetches+1, p.jwksFetches.Load(), "no refetch within RefetchEvery")
	c.Advance(auth.RefetchEvery)
	for i := range 50 {
		_, err := v.Customer(signJose(t, next, "made-up-again-"+strconv.Itoa(i), p.idClaims("x", nil)))
		require.ErrorIs(t, err, auth.ErrInvalidToken)
	}
	require.Equal(t, fetches+2, p.jwksFetches.Load(), "one refetch per RefetchEvery")
}

// TestProviderDown: while the provider does not answer, the keys fetched
// before keep verifying; a token of any other key is refused (never an open
// door), and the outage is counted and logged. When it answers again, the
// next unknown kid (RefetchEvery later) fetches the keys again.
func TestProviderDown(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	k := newKey(t, jose.EdDSA)
	p.add("k1", k)
	c, l := &clock{now: time.Now()}, &logs{}
	v := providerVerifier(t, auth.Options{Issuer: p.issuer}, c, l)
	require.Zero(t, v.KeyFetchFailures())

	p.setDown(true)
	cust, err := v.Customer(signJose(t, k, "k1", p.idClaims("during-outage", nil)))
	require.NoError(t, err, "a cached key verifies a token never seen")
	require.Equal(t, "during-outage", cust.ID)

	k2 := newKey(t, jose.EdDSA)
	p.add("k2", k2)
	tok2 := signJose(t, k2, "k2", p.idClaims("new-key", nil))
	_, err = v.Customer(tok2)
	require.ErrorIs(t, err, auth.ErrInvalidToken, "an unknown kid is refused while the provider is down")
	require.Equal(t, uint64(1), v.KeyFetchFailures())
	require.Contains(t, l.String(), "the identity provider's keys could not be fetched")
	require.Equal(t, 1, v.ProviderKeys(), "the keys fetched before are kept")

	p.setDown(false)
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
	p := newProvider(t)
	k := newKey(t, jose.RS256)
	p.add("k1", k)
	p.setDown(true)
	c, l := &clock{now: time.Now()}, &logs{}
	v := providerVerifier(t, auth.Options{Issuer: p.issuer}, c, l)
	require.Equal(t, uint64(1), v.KeyFetchFailures())
	require.Contains(t, l.String(), "discovery")
	tok := signJose(t, k, "k1", p.idClaims("first", nil))
	_, err := v.Customer(tok)
	require.ErrorIs(t, err, auth.ErrInvalidToken)

	p.setDown(false)
	c.Advance(auth.RefetchEvery)
	cust, err := v.Customer(tok)
	require.NoError(t, err)
	require.Equal(t, "first", cust.ID)
}

// TestProviderDiscoveryNamesAnotherIssuer: a discovery document must name
// the issuer it was asked for; one that names another is not used.
func TestProviderDiscoveryNamesAnotherIssuer(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	k := newKey(t, jose.ES256)
	p.add("k1", k)
	real := p.issuer
	p.issuer = "https://id.example.com" // what the document says now
	l := &logs{}
	v := providerVerifier(t, auth.Options{Issuer: real}, nil, l)
	require.Equal(t, uint64(1), v.KeyFetchFailures())
	require.Contains(t, l.String(), "names the issuer")
	// The first token tries the discovery again, and refuses with it.
	_, err := v.Customer(signJose(t, k, "k1", map[string]any{"iss": real, "sub": "a", "exp": time.Now().Add(time.Hour).Unix()}))
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
