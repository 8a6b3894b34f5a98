package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/memo"
)

// ErrInvalidToken is any token that does not prove who the caller is.
var ErrInvalidToken = errors.New("invalid token")

// MaxSubjectLen is the longest customer id a token may carry.
const MaxSubjectLen = 128

// DefaultMaxTokenAge is the longest lifetime (exp - iat) of a provider's
// token accepted unless Options say otherwise.
const DefaultMaxTokenAge = 24 * time.Hour

// Customer is a verified customer.
type Customer struct {
	ID string
	// AccountCreated is when the customer's account was made (zero if the
	// token did not say).
	AccountCreated time.Time
	// PaymentInstrument is the customer's payment instrument as the store's
	// backend or identity provider names it (its saved payment method's
	// fingerprint), normalised by flashline.NormalizeInstrument; "" if the
	// token did not say.
	PaymentInstrument string
}

// claims are what Flashline reads of a customer token: the registered
// claims, acct_created (seconds since 1970, when the account was made) and
// payment_instrument (the fingerprint of the customer's payment method, as
// the store's backend knows it); a provider adds them as custom claims.
type claims struct {
	AcctCreated       *int64  `json:"acct_created,omitempty"`
	PaymentInstrument *string `json:"payment_instrument,omitempty"`
	jwt.RegisteredClaims
}

// Options say which customer tokens a Verifier accepts: HS256 with
// JWTSecret, and RS256, ES256 or EdDSA with the keys of the provider at
// JWKSURL or found from Issuer by OpenID discovery. At least one of the
// three.
type Options struct {
	JWTSecret string
	// JWKSURL is the provider's JWKS; Issuer, when set, the "iss" every
	// token must carry, and where the JWKS is discovered when JWKSURL is
	// empty.
	JWKSURL, Issuer string
	// Audience, when set, must be among a token's "aud".
	Audience string
	// MaxTokenAge is the longest lifetime accepted: exp - iat, or exp -
	// now for a token without iat. 0: DefaultMaxTokenAge for a provider's
	// tokens, no bound for HS256 ones (as before it existed).
	MaxTokenAge time.Duration
	// Logger hears of the provider's outages; HTTPClient fetches its
	// documents (default: one with a 5 s timeout); RefreshInterval is how
	// often its keys are fetched again when its answer carries no
	// Cache-Control max-age (default DefaultRefreshInterval).
	Logger          *slog.Logger
	HTTPClient      *http.Client
	RefreshInterval time.Duration
	// clock is the refetch's clock (tests).
	clock func() time.Time
}

// Verifier checks customer tokens and the admin token.
type Verifier struct {
	jwtSecret []byte // nil: no HS256 token is accepted
	keys      *providerKeys
	adminHash [32]byte
	parser    *jwt.Parser
	// maxAge bounds a provider's tokens' lifetime, hsMaxAge HS256 ones' (0:
	// none).
	maxAge, hsMaxAge time.Duration
	// fastHS says FastCustomer may decide an HS256 token itself: there is
	// a secret, and nothing but what it checks (no iss, aud or age) to
	// check.
	fastHS bool
	// verified remembers the tokens that verified, until they expire: a
	// customer presents the same token on every request, and parsing it
	// (base64, JSON, HMAC, or a provider's RSA or ECDSA signature) was most
	// of what a sold-out "no" cost.
	verified *memo.Tokens[Customer]
	// macs are HMAC-SHA256s of the JWT secret, for FastCustomer.
	macs *sync.Pool
}

// leeway is how far a customer token's exp, nbf and iat may be off (clocks
// differ).
const leeway = 5 * time.Second

// NewVerifier returns a Verifier of HS256 tokens. Both secrets are required.
func NewVerifier(jwtSecret, adminToken string) (*Verifier, error) {
	if jwtSecret == "" || adminToken == "" {
		return nil, errors.New("auth: both the JWT secret and the admin token must be set")
	}
	return New(context.Background(), adminToken, Options{JWTSecret: jwtSecret})
}

// New returns a Verifier of the tokens o describes. With a provider, it
// fetches the provider's keys before it returns (a provider that does not
// answer is logged, and fetched again later), and keeps them fresh until
// ctx ends.
func New(ctx context.Context, adminToken string, o Options) (*Verifier, error) {
	if adminToken == "" {
		return nil, errors.New("auth: the admin token must be set")
	}
	provider := o.JWKSURL != "" || o.Issuer != ""
	if o.JWTSecret == "" && !provider {
		return nil, errors.New("auth: customer tokens need a JWT secret, a JWKS URL or an issuer")
	}
	if o.MaxTokenAge < 0 {
		return nil, errors.New("auth: the longest token age must be positive")
	}
	v := &Verifier{
		adminHash: sha256.Sum256([]byte(adminToken)),
		maxAge:    o.MaxTokenAge,
		hsMaxAge:  o.MaxTokenAge,
		verified:  memo.New[Customer](0),
	}
	if v.maxAge == 0 {
		v.maxAge = DefaultMaxTokenAge
	}
	// Only these algorithms: a token saying "none", another HMAC or an
	// algorithm without a source of keys here is refused before any
	// signature check. Which key each takes is key's.
	var methods []string
	if o.JWTSecret != "" {
		v.jwtSecret = []byte(o.JWTSecret)
		v.macs = macPool(v.jwtSecret)
		v.fastHS = o.Issuer == "" && o.Audience == "" && o.MaxTokenAge == 0
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if provider {
		var err error
		if v.keys, err = newProviderKeys(ctx, o); err != nil {
			return nil, err
		}
		methods = append(methods, jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg(), jwt.SigningMethodEdDSA.Alg())
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
	}
	if o.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		opts = append(opts, jwt.WithAudience(o.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// key is the key that verifies t: the JWT secret for HS256, the provider's
// key of the type its algorithm takes for the others. A public key never
// verifies an HMAC: that is the secret's alone.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if t.Method.Alg() == jwt.SigningMethodHS256.Alg() {
		if v.jwtSecret == nil {
			return nil, errors.New("no HS256 secret")
		}
		return v.jwtSecret, nil
	}
	if v.keys == nil {
		return nil, errors.New("no provider")
	}
	return v.keys.key(t)
}

// KeyFetchFailures is how many fetches of the provider's discovery
// document or keys have failed since start (0 without a provider).
func (v *Verifier) KeyFetchFailures() uint64 {
	if v.keys == nil {
		return 0
	}
	return v.keys.failures.Load()
}

// ProviderKeys is how many of the provider's keys this instance holds (0
// without a provider).
func (v *Verifier) ProviderKeys() int {
	if v.keys == nil {
		return 0
	}
	return v.keys.known()
}

// HasProvider says whether tokens of an identity provider are accepted.
func (v *Verifier) HasProvider() bool { return v.keys != nil }

// IsAdmin reports whether token is the admin token, in constant time (both
// sides are hashed first, so neither the content nor the length leaks).
func (v *Verifier) IsAdmin(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], v.adminHash[:]) == 1
}

// Customer verifies a customer JWT.
func (v *Verifier) Customer(token string) (Customer, error) {
	now := time.Now()
	if cust, ok := v.verified.Get(token, now); ok {
		return cust, nil
	}
	var c claims
	t, err := v.parser.ParseWithClaims(token, &c, v.key)
	if err != nil {
		return Customer{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if err := v.checkAge(t.Method, &c, now); err != nil {
		return Customer{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if n := utf8.RuneCountInString(c.Subject); n == 0 || n > MaxSubjectLen {
		return Customer{}, fmt.Errorf("%w: sub must be 1-%d characters", ErrInvalidToken, MaxSubjectLen)
	}
	if !flashline.ValidText(c.Subject) {
		// A customer id is stored and compared: NUL, control and format
		// characters would fail a statement or make one customer two.
		return Customer{}, fmt.Errorf("%w: sub must be text without control or format characters", ErrInvalidToken)
	}
	cust := Customer{ID: c.Subject}
	if c.AcctCreated != nil {
		cust.AccountCreated = time.Unix(*c.AcctCreated, 0).UTC()
	}
	if c.PaymentInstrument != nil {
		// Counted per sale (perInstrumentLimit, a lottery's one
		// registration per instrument): a value that cannot be counted is
		// a token that does not say what it means.
		instrument, err := flashline.NormalizeInstrument(*c.PaymentInstrument)
		if err != nil || instrument == "" {
			return Customer{}, fmt.Errorf("%w: payment_instrument must be 1-255 bytes of text", ErrInvalidToken)
		}
		cust.PaymentInstrument = instrument
	}
	// The parser checked exp (required) with the leeway by time.Now, and
	// nbf and iat if there were any (past by now, so for good): a token
	// stays good until exp + leeway, which is when the memo forgets it.
	v.verified.Put(token, cust, c.ExpiresAt.Add(leeway))
	return cust, nil
}

// checkAge bounds a token's lifetime: exp - iat, or exp - now without an
// iat, at most the longest age for its kind of token. A token that lives
// for years is a credential nobody can take back.
func (v *Verifier) checkAge(m jwt.SigningMethod, c *claims, now time.Time) error {
	limit := v.maxAge
	if m.Alg() == jwt.SigningMethodHS256.Alg() {
		limit = v.hsMaxAge
	}
	if limit == 0 {
		return nil
	}
	from := now
	if c.IssuedAt != nil {
		from = c.IssuedAt.Time
	}
	if c.ExpiresAt.Sub(from) > limit {
		return fmt.Errorf("token lives longer than %s", limit)
	}
	return nil
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// Mint signs a customer token: for the demo, the CLI and tests.
func Mint(jwtSecret, customerID string, ttl time.Duration, accountCreated time.Time) (string, error) {
	return MintInstrument(jwtSecret, customerID, ttl, accountCreated, "")
}

// MintInstrument is Mint with a payment_instrument claim (none when
// instrument is ""), as the store's backend would sign it.
func MintInstrument(jwtSecret, customerID string, ttl time.Duration, accountCreated time.Time, instrument string) (string, error) {
	c := claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   customerID,
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(ttl)),
		IssuedAt:  jwt.NewNumericDate(time.Now()),
	}}
	if !accountCreated.IsZero() {
		ts := accountCreated.Unix()
		c.AcctCreated = &ts
	}
	if instrument != "" {
		c.PaymentInstrument = &instrument
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(jwtSecret))
}
