package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// The identity provider's keys: its JWKS, found at a URL given or by
// OpenID discovery from its issuer, fetched and parsed by
// github.com/MicahParks/jwkset and looked up by github.com/MicahParks/keyfunc.
// What is added here is the policy: an algorithm only with a key of its own
// type, a refresh on the provider's Cache-Control max-age (within a minute
// and an hour), a refetch for an unknown kid at most once per RefetchEvery
// (the lookups that arrive while it runs wait for it; any other is
// refused at once), and an outage that keeps the keys already fetched
// and is counted and logged.

const (
	// DefaultRefreshInterval is how often the keys are fetched again when
	// the provider's answer carries no Cache-Control max-age, so that a key
	// it withdrew stops verifying within it.
	DefaultRefreshInterval = 5 * time.Minute
	// RefetchEvery bounds the fetches a token with an unknown kid causes:
	// a flood of made-up kids costs the provider one request per this.
	RefetchEvery = 10 * time.Second
	// fetchTimeout bounds one fetch of the discovery document or the keys.
	fetchTimeout = 5 * time.Second
	// maxDocument is the largest discovery document or JWKS read.
	maxDocument = 1 << 20
)

// ErrNoProviderKey is a token whose key the provider does not publish (as
// far as this instance knows), or of a type its algorithm does not take.
var ErrNoProviderKey = errors.New("no key of the provider verifies this token")

// providerKeys are the identity provider's public keys.
type providerKeys struct {
	ctx             context.Context
	issuer, jwksURL string
	client          *http.Client
	logger          *slog.Logger
	refreshInterval time.Duration
	// refetch lets one lookup of an unknown kid per RefetchEvery fetch the
	// keys again (or run the discovery again, while it has not succeeded);
	// any other is refused at once.
	refetch *rate.Limiter
	now     func() time.Time // the refetch's clock

	mu  sync.Mutex // held while a set is made
	set atomic.Pointer[keySet]

	failures atomic.Uint64
}

// keySet is the keys of one JWKS URL.
type keySet struct {
	url string
	// keys are the keys last fetched, swapped whole by each fetch that
	// succeeds; a failed one leaves them.
	keys   atomic.Pointer[fetched]
	lookup keyfunc.Keyfunc
	// refetching is closed when the refetch for an unknown kid under way
	// ends (nil: none is).
	mu         sync.Mutex
	refetching chan struct{}
}

// fetched is one fetch of the JWKS: its keys, and how long the provider
// said they may be kept (Cache-Control max-age; -1: it did not say).
type fetched struct {
	keys   jwkset.Storage
	maxAge time.Duration
}

func newProviderKeys(ctx context.Context, o Options) (*providerKeys, error) {
	p := &providerKeys{ctx: ctx, issuer: o.Issuer, jwksURL: o.JWKSURL, client: o.HTTPClient, logger: o.Logger,
		refreshInterval: o.RefreshInterval, refetch: rate.NewLimiter(rate.Every(RefetchEvery), 1), now: o.clock}
	if p.now == nil {
		p.now = time.Now
	}
	if p.client == nil {
		// A redirect must lead where a first request may go: https (or
		// this machine), never down to plain http.
		p.client = &http.Client{Timeout: fetchTimeout, CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return checkURL(r.URL.String())
		}}
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if p.refreshInterval <= 0 {
		p.refreshInterval = DefaultRefreshInterval
	}
	for _, u := range []string{p.issuer, p.jwksURL} {
		if u != "" {
			if err := checkURL(u); err != nil {
				return nil, err
			}
		}
	}
	// A first fetch now, so that an instance starts with the keys; one that
	// fails is an outage like any other: the next unknown kid tries again.
	if _, err := p.load(); err != nil {
		p.failed(p.issuer+p.jwksURL, err)
	}
	return p, nil
}

// checkURL refuses a URL the keys could be forged on the way from: only
// https, or http to this machine (a test's provider, a sidecar).
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("auth: %q is not an absolute URL", raw)
	}
	if u.Scheme == "https" {
		return nil
	}
	if u.Scheme == "http" {
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("auth: %q: the provider's keys are fetched over https only (http only from this machine)", raw)
}

// load returns the key set, making it first if it is not made yet: the
// discovery (with an issuer alone) and the first fetch of the keys.
func (p *providerKeys) load() (*keySet, error) {
	if s := p.set.Load(); s != nil {
		return s, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.set.Load(); s != nil {
		return s, nil
	}
	jwksURL := p.jwksURL
	if jwksURL == "" {
		var err error
		if jwksURL, err = p.discover(); err != nil {
			return nil, err
		}
	}
	s, err := p.newKeySet(jwksURL)
	if err != nil {
		return nil, err
	}
	p.set.Store(s)
	return s, nil
}

// discover reads the issuer's OpenID configuration for its jwks_uri. The
// document must name the issuer exactly (OpenID Connect Discovery 1.0,
// 4.3): a document served for another issuer is not this one's.
func (p *providerKeys) discover() (string, error) {
	where := strings.TrimSuffix(p.issuer, "/") + "/.well-known/openid-configuration"
	ctx, cancel := context.WithTimeout(p.ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	res, err := p.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("discovery: %s answered %s", where, res.Status)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxDocument)).Decode(&doc); err != nil {
		return "", fmt.Errorf("discovery: %s: %w", where, err)
	}
	if doc.Issuer != p.issuer {
		return "", fmt.Errorf("discovery: %s names the issuer %q, not %q", where, doc.Issuer, p.issuer)
	}
	if doc.JWKSURI == "" {
		return "", fmt.Errorf("discovery: %s has no jwks_uri", where)
	}
	if err := checkURL(doc.JWKSURI); err != nil {
		return "", fmt.Errorf("discovery: jwks_uri: %w", err)
	}
	return doc.JWKSURI, nil
}

// newKeySet fetches the keys at u, and keeps them fresh until the
// context ends: again when the provider's Cache-Control max-age says
// (within minRefresh and maxRefresh; refreshInterval when it says nothing),
// and for an unknown kid (gated). A first fetch that fails leaves the set
// empty, not missing: it is fetched again like any other.
func (p *providerKeys) newKeySet(u string) (*keySet, error) {
	s := &keySet{url: u}
	s.keys.Store(&fetched{keys: jwkset.NewMemoryStorage(), maxAge: -1})
	ok := p.refresh(s)
	// Keys marked for encryption never verify; unmarked ones do (most
	// providers mark none).
	var err error
	s.lookup, err = keyfunc.New(keyfunc.Options{Ctx: p.ctx, Storage: gated{s: s, p: p},
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return nil, err
	}
	go p.keepFresh(s, ok)
	return s, nil
}

// fetch reads the JWKS at u with jwkset, which parses and validates each
// key (one of a type it does not know is skipped), and the max-age its
// answer carried.
func (p *providerKeys) fetch(u string) (*fetched, error) {
	age := &maxAgeOf{base: p.client.Transport, age: -1}
	client := *p.client
	client.Transport = age
	keys, err := jwkset.NewStorageFromHTTP(u, jwkset.HTTPClientStorageOptions{
		Client: &client, Ctx: p.ctx, HTTPTimeout: fetchTimeout,
	})
	if err != nil {
		return nil, err
	}
	return &fetched{keys: keys, maxAge: age.age}, nil
}

// refresh fetches s's keys again; a failure keeps the keys it had.
func (p *providerKeys) refresh(s *keySet) bool {
	f, err := p.fetch(s.url)
	if err != nil {
		p.failed(s.url, err)
		return false
	}
	s.keys.Store(f)
	return true
}

// The bounds of the refresh: a provider's max-age is followed within
// them, so that a key withdrawn stops verifying within maxRefresh whatever
// the provider says, and a max-age of 0 (or a failed fetch) does not make
// every instance ask more than once a minute.
const (
	minRefresh = time.Minute
	maxRefresh = time.Hour
)

// refreshAfter is how long after a fetch (f, ok: whether it succeeded) the
// keys are fetched again.
func (p *providerKeys) refreshAfter(f *fetched, ok bool) time.Duration {
	switch {
	case !ok:
		return minRefresh
	case f.maxAge < 0:
		return p.refreshInterval
	}
	return min(max(f.maxAge, minRefresh), maxRefresh)
}

// keepFresh fetches s's keys again when refreshAfter says, until the
// context ends; ok is whether the fetch before succeeded.
func (p *providerKeys) keepFresh(s *keySet, ok bool) {
	for {
		t := time.NewTimer(p.refreshAfter(s.keys.Load(), ok))
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		ok = p.refresh(s)
	}
}

// maxAgeOf is a transport that notes the Cache-Control max-age of the
// answer it carries.
type maxAgeOf struct {
	base http.RoundTripper
	age  time.Duration
}

func (m *maxAgeOf) RoundTrip(r *http.Request) (*http.Response, error) {
	base := m.base
	if base == nil {
		base = http.DefaultTransport
	}
	res, err := base.RoundTrip(r)
	if err == nil && res.StatusCode == http.StatusOK {
		m.age = parseMaxAge(res.Header.Values("Cache-Control"))
	}
	return res, err
}

// parseMaxAge is the max-age of Cache-Control headers: 0 for no-cache or
// no-store, -1 when they say nothing of it.
func parseMaxAge(headers []string) time.Duration {
	age := time.Duration(-1)
	for _, h := range headers {
		for d := range strings.SplitSeq(h, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			switch {
			case d == "no-cache" || d == "no-store":
				return 0
			case strings.HasPrefix(d, "max-age="):
				if n, err := strconv.ParseInt(strings.Trim(d[len("max-age="):], `"`), 10, 64); err == nil && n >= 0 {
					age = time.Duration(min(n, int64(maxRefresh/time.Second))) * time.Second
				}
			}
		}
	}
	return age
}

// gated is the storage keyfunc reads: the keys last fetched, and for an
// unknown kid one refetch per RefetchEvery (for all kids: a flood of
// made-up ones fetches no more often).
type gated struct {
	s *keySet
	p *providerKeys
}

func (g gated) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	jwk, err := g.s.keys.Load().keys.KeyRead(ctx, kid)
	if !errors.Is(err, jwkset.ErrKeyNotFound) {
		return jwk, err
	}
	// Fetch, wait for the fetch under way, or neither (its turn taken):
	// then read the keys as they are now either way, since a refetch may
	// have landed between the first read and this one (and closed, so
	// there was none to wait for: TestProviderNewKeyBurst saw that).
	g.s.refetched(g.p)
	return g.s.keys.Load().keys.KeyRead(ctx, kid)
}

// refetched fetches s's keys again for an unknown kid, or waits for the
// refetch under way, and says whether it did: no when RefetchEvery has not
// passed since the last one. The first tokens of a key the provider has
// just started signing with arrive together: they all wait for the one
// fetch (bounded by fetchTimeout) rather than be refused while it runs.
func (s *keySet) refetched(p *providerKeys) bool {
	s.mu.Lock()
	if done := s.refetching; done != nil {
		s.mu.Unlock()
		<-done
		return true
	}
	if !p.mayRefetch() {
		s.mu.Unlock()
		return false
	}
	done := make(chan struct{})
	s.refetching = done
	s.mu.Unlock()
	p.refresh(s)
	s.mu.Lock()
	s.refetching = nil
	s.mu.Unlock()
	close(done)
	return true
}

func (g gated) KeyReadAll(ctx context.Context) ([]jwkset.JWK, error) {
	return g.s.keys.Load().keys.KeyReadAll(ctx)
}

// The rest of jwkset.Storage: the keys are the provider's, never written
// here.
var errReadOnly = errors.New("auth: the provider's keys are read-only")

func (g gated) KeyDelete(context.Context, string) (bool, error) { return false, errReadOnly }
func (g gated) KeyReplaceAll(context.Context, []jwkset.JWK) error {
	return errReadOnly
}
func (g gated) KeyWrite(context.Context, jwkset.JWK) error { return errReadOnly }
func (g gated) JSON(ctx context.Context) (json.RawMessage, error) {
	return g.s.keys.Load().keys.JSONPublic(ctx)
}
func (g gated) JSONPublic(ctx context.Context) (json.RawMessage, error) {
	return g.s.keys.Load().keys.JSONPublic(ctx)
}
func (g gated) JSONPrivate(context.Context) (json.RawMessage, error) { return nil, errReadOnly }
func (g gated) JSONWithOptions(context.Context, jwkset.JWKMarshalOptions, jwkset.JWKValidateOptions) (json.RawMessage, error) {
	return nil, errReadOnly
}
func (g gated) Marshal(ctx context.Context) (jwkset.JWKSMarshal, error) {
	return g.s.keys.Load().keys.Marshal(ctx)
}
func (g gated) MarshalWithOptions(context.Context, jwkset.JWKMarshalOptions, jwkset.JWKValidateOptions) (jwkset.JWKSMarshal, error) {
	return jwkset.JWKSMarshal{}, errReadOnly
}

// mayRefetch takes the refetch's one turn per RefetchEvery, if it is free.
func (p *providerKeys) mayRefetch() bool { return p.refetch.AllowN(p.now(), 1) }

// failed counts and logs a fetch that failed: the keys fetched before keep
// verifying, and a token whose key is not among them is refused.
func (p *providerKeys) failed(u string, err error) {
	p.failures.Add(1)
	p.logger.Warn("flashline: the identity provider's keys could not be fetched; the keys fetched before keep verifying, tokens of any other key are refused",
		"url", u, "err", err)
}

// key is the provider's key for t, of the type t's algorithm takes. A
// token without a kid is tried against every key of that type.
func (p *providerKeys) key(t *jwt.Token) (any, error) {
	s := p.set.Load()
	if s == nil {
		// The discovery or the first fetch has not succeeded yet: retried
		// at the refetch's pace.
		if !p.mayRefetch() {
			return nil, ErrNoProviderKey
		}
		var err error
		if s, err = p.load(); err != nil {
			p.failed(p.issuer+p.jwksURL, err)
			return nil, ErrNoProviderKey
		}
	}
	alg := t.Method.Alg()
	k, err := s.lookup.KeyfuncCtx(p.ctx)(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoProviderKey, err)
	}
	if set, ok := k.(jwt.VerificationKeySet); ok {
		var fit jwt.VerificationKeySet
		for _, k := range set.Keys {
			if keyFits(alg, k) {
				fit.Keys = append(fit.Keys, k)
			}
		}
		if len(fit.Keys) == 0 {
			return nil, ErrNoProviderKey
		}
		return fit, nil
	}
	if !keyFits(alg, k) {
		return nil, fmt.Errorf("%w: the key named is not one %s takes", ErrNoProviderKey, alg)
	}
	return k, nil
}

// keyFits says whether alg verifies with key: RS256 an RSA key of 2048 bits
// or more, ES256 a P-256 key, EdDSA an Ed25519 key. Nothing else: a key
// the provider publishes is never an HMAC secret.
func keyFits(alg string, key any) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return alg == jwt.SigningMethodRS256.Alg() && k.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return alg == jwt.SigningMethodES256.Alg() && k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == jwt.SigningMethodEdDSA.Alg() && len(k) == ed25519.PublicKeySize
	}
	return false
}

// known is how many keys this instance holds now.
func (p *providerKeys) known() int {
	s := p.set.Load()
	if s == nil {
		return 0
	}
	all, err := s.keys.Load().keys.KeyReadAll(p.ctx)
	if err != nil {
		return 0
	}
	return len(all)
}
