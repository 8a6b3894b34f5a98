// Package auth verifies the two kinds of caller the HTTP contract knows:
// customers, with an HS256 JWT, and the admin, with a shared token. It wraps
// github.com/golang-jwt/jwt/v5.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
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

// Customer is a verified customer.
type Customer struct {
	ID string
	// AccountCreated is when the customer's account was made (zero if the
	// token did not say).
	AccountCreated time.Time
}

type claims struct {
	AcctCreated *int64 `json:"acct_created,omitempty"`
	jwt.RegisteredClaims
}

// Verifier checks customer tokens and the admin token.
type Verifier struct {
	jwtSecret []byte
	adminHash [32]byte
	parser    *jwt.Parser
	// verified remembers the tokens that verified, until they expire: a
	// customer presents the same token on every request, and parsing it
	// (base64, JSON, HMAC) was most of what a sold-out "no" cost.
	verified *memo.Tokens[Customer]
	// macs are HMAC-SHA256s of the JWT secret, for FastCustomer.
	macs *sync.Pool
}

// leeway is how long after its "exp" a customer token is still accepted
// (clocks differ).
const leeway = 5 * time.Second

// NewVerifier returns a Verifier. Both secrets are required.
func NewVerifier(jwtSecret, adminToken string) (*Verifier, error) {
	if jwtSecret == "" || adminToken == "" {
		return nil, errors.New("auth: both the JWT secret and the admin token must be set")
	}
	return &Verifier{
		jwtSecret: []byte(jwtSecret),
		adminHash: sha256.Sum256([]byte(adminToken)),
		// Only HS256: a token saying "none" or an asymmetric algorithm is
		// refused before any signature check.
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(leeway),
		),
		verified: memo.New[Customer](0),
		macs:     macPool([]byte(jwtSecret)),
	}, nil
}

// IsAdmin reports whether token is the admin token, in constant time (both
// sides are hashed first, so neither the content nor the length leaks).
func (v *Verifier) IsAdmin(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], v.adminHash[:]) == 1
}

// Customer verifies a customer JWT.
func (v *Verifier) Customer(token string) (Customer, error) {
	if cust, ok := v.verified.Get(token, time.Now()); ok {
		return cust, nil
	}
	var c claims
	if _, err := v.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) {
		return v.jwtSecret, nil
	}); err != nil {
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
	// The parser checked exp (required) with the leeway by time.Now, and
	// nbf if there was one (past by now, so for good): a token stays good
	// until exp + leeway, which is when the memo forgets it.
	v.verified.Put(token, cust, c.ExpiresAt.Add(leeway))
	return cust, nil
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
	c := claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   customerID,
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(ttl)),
		IssuedAt:  jwt.NewNumericDate(time.Now()),
	}}
	if !accountCreated.IsZero() {
		ts := accountCreated.Unix()
		c.AcctCreated = &ts
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(jwtSecret))
}
