package testidp

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
)

// Audience is the "aud" of the tokens Claims makes.
const Audience = "flashline-shop"

// Provider is an OpenID provider on 127.0.0.1.
type Provider struct {
	t testing.TB
	// Issuer is its issuer, the URL its discovery document is under.
	Issuer string

	mu   sync.Mutex
	keys map[string]Key // by kid, published
	down bool
	// named is the issuer the discovery document names ("": Issuer).
	named string
	// cacheControl is the JWKS answer's Cache-Control ("": none).
	cacheControl string
	// hold, when set, keeps JWKS answers waiting until it is closed.
	hold chan struct{}
	// jwksFetches counts requests for the JWKS, answered or not.
	jwksFetches atomic.Int64
}

// Key is a signing key of the provider's.
type Key struct {
	Alg  jose.SignatureAlgorithm
	Priv crypto.Signer
	// Use is its JWK "use" ("": none said).
	Use string
}

// New starts a provider, stopped when the test ends.
func New(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{t: t, keys: map[string]Key{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		named := p.named
		p.mu.Unlock()
		if named == "" {
			named = p.Issuer
		}
		p.serve(w, map[string]any{
			"issuer":                                named,
			"jwks_uri":                              p.Issuer + "/keys",
			"authorization_endpoint":                p.Issuer + "/authorize",
			"token_endpoint":                        p.Issuer + "/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		hold := p.hold
		p.mu.Unlock()
		p.jwksFetches.Add(1)
		if hold != nil {
			<-hold
		}
		p.mu.Lock()
		var set jose.JSONWebKeySet
		for kid, k := range p.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Priv.Public(), KeyID: kid, Algorithm: string(k.Alg), Use: k.Use})
		}
		if p.cacheControl != "" {
			w.Header().Set("Cache-Control", p.cacheControl)
		}
		p.mu.Unlock()
		p.serve(w, set)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.Issuer = srv.URL
	return p
}

// serve writes doc, or drops the connection while the provider is down.
func (p *Provider) serve(w http.ResponseWriter, doc any) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// SetDown takes the provider down (true) or up again.
func (p *Provider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// HoldJWKS keeps the answers to JWKS requests waiting until release is
// called (a slow provider).
func (p *Provider) HoldJWKS() (release func()) {
	hold := make(chan struct{})
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.hold = nil
		p.mu.Unlock()
		close(hold)
	}
}

// SetCacheControl sets the Cache-Control of its JWKS answers.
func (p *Provider) SetCacheControl(v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cacheControl = v
}

// NameIssuer makes the discovery document name issuer instead of its own.
func (p *Provider) NameIssuer(issuer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.named = issuer
}

// JWKSFetches is how many times its JWKS was asked for.
func (p *Provider) JWKSFetches() int64 { return p.jwksFetches.Load() }

// JWKSURL is where its JWKS is.
func (p *Provider) JWKSURL() string { return p.Issuer + "/keys" }

// NewKey makes a key for alg (RS256: 2048 bits; ES256: P-256; EdDSA:
// Ed25519). It is published once added.
func NewKey(t testing.TB, alg jose.SignatureAlgorithm) Key {
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
		t.Fatalf("testidp: no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return Key{Alg: alg, Priv: priv}
}

// Add publishes k under kid.
func (p *Provider) Add(kid string, k Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = k
}

// Withdraw stops publishing kid.
func (p *Provider) Withdraw(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, kid)
}

// Sign signs claims with k under kid (no kid header if kid is "").
func Sign(t testing.TB, k Key, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: k.Priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := josejwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Claims are the claims of a provider's token for sub, good for an hour,
// for Audience; edit changes them.
func (p *Provider) Claims(sub string, edit func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": p.Issuer, "aud": Audience, "sub": sub,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}
