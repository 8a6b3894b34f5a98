package roomtoken

import (
	"errors"
	"fmt"
	"time"

	"github.com/flashline/flashline"
)

// Admission errors, from Admission.Check.
var (
	ErrAdmissionExpired       = errors.New("admission token expired")
	ErrAdmissionOtherSale     = errors.New("admission token is for another sale")
	ErrAdmissionOtherCustomer = errors.New("admission token is for another customer")
)

// Admission lets one customer make one reservation in one sale before it
// expires. It is held as a signed token; its single use is enforced by the
// database, where ID is stored with the reservation under a unique index.
type Admission struct {
	ID         string // the single-use id stored with the reservation: 1-128 characters of [A-Za-z0-9_-] (AdmissionID makes 22)
	SaleID     string
	CustomerID string
	ExpiresAt  time.Time // kept to the second
	// Variant is, for a lottery winner's admission in a lottery with
	// variants, the SKU of the variant the draw awarded (or a waitlist
	// promotion passed down): the only variant the admission may reserve.
	// "" for any other admission; its token has no "variant" claim.
	Variant string
}

// admissionClaims are an admission token's JWT claims, in the order they are
// written. Every claim is written: the parser requires them all.
type admissionClaims struct {
	Audience  string `json:"aud"`               // "flashline-admission"
	Subject   string `json:"sub"`               // the customer id
	ID        string `json:"jti"`               // the admission id
	ExpiresAt int64  `json:"exp"`               // unix seconds
	Sale      string `json:"sale"`              // the sale id
	Variant   string `json:"variant,omitempty"` // the won variant's SKU, written only when there is one
}

// SignAdmission returns a as an admission token. ExpiresAt is kept to the
// second. The caller passes an admission that ParseAdmission would accept;
// the token of any other is refused when parsed.
func (k *Keyring) SignAdmission(a Admission) string {
	return k.sign(admissionClaims{
		Audience:  admissionAudience,
		Subject:   a.CustomerID,
		ID:        a.ID,
		ExpiresAt: a.ExpiresAt.Unix(),
		Sale:      a.SaleID,
		Variant:   a.Variant,
	})
}

// ParseAdmission verifies an admission token's signature and format and
// returns the admission. It checks neither expiry nor binding (see Check) nor
// single use (the database does).
func (k *Keyring) ParseAdmission(token string) (Admission, error) {
	a, err := k.parseAdmission(token)
	if err != nil {
		return Admission{}, fmt.Errorf("parse admission: %w", err)
	}
	return a, nil
}

func (k *Keyring) parseAdmission(token string) (Admission, error) {
	c, err := k.open(admissionAudience, token)
	if err != nil {
		return Admission{}, err
	}
	names := []string{"aud", "sub", "jti", "exp", "sale"}
	if c.Variant != nil {
		names = append(names, "variant")
	}
	if err := c.exactly(names...); err != nil {
		return Admission{}, err
	}
	variant := ""
	if c.Variant != nil {
		// Never written empty: SignAdmission leaves the claim out instead.
		if !flashline.ValidVariantSKU(*c.Variant) {
			return Admission{}, fmt.Errorf("%w: variant must be a variant's SKU", ErrMalformed)
		}
		variant = *c.Variant
	}
	// The admission id is limited to the base64url alphabet, which JSON never
	// escapes: with two ids that may double in size when escaped, the longest
	// admission still fits in MaxTokenLen.
	if len(*c.ID) == 0 || len(*c.ID) > MaxIDLen || !validAlphabet(*c.ID) {
		return Admission{}, fmt.Errorf("%w: admission id must be 1-%d characters of [A-Za-z0-9_-]", ErrMalformed, MaxIDLen)
	}
	if err := checkID("sale id", *c.Sale); err != nil {
		return Admission{}, err
	}
	if err := checkID("customer id", *c.Subject); err != nil {
		return Admission{}, err
	}
	if err := checkTime("expiry", *c.ExpiresAt); err != nil {
		return Admission{}, err
	}
	return Admission{
		ID:         *c.ID,
		SaleID:     *c.Sale,
		CustomerID: *c.Subject,
		ExpiresAt:  time.Unix(*c.ExpiresAt, 0).UTC(),
		Variant:    variant,
	}, nil
}

// Check reports whether the admission lets customerID reserve in saleID at
// now: ErrAdmissionOtherSale, ErrAdmissionOtherCustomer or
// ErrAdmissionExpired, checked in that order, or nil. The token expires at
// ExpiresAt (its "exp"): at that instant it is no longer good, as RFC 7519
// has it.
func (a Admission) Check(saleID, customerID string, now time.Time) error {
	switch {
	case a.SaleID != saleID:
		return fmt.Errorf("check admission %s: %w: token is for sale %q", a.ID, ErrAdmissionOtherSale, a.SaleID)
	case a.CustomerID != customerID:
		// The customer ids are left out: errors reach logs.
		return fmt.Errorf("check admission %s: %w", a.ID, ErrAdmissionOtherCustomer)
	case !now.Before(a.ExpiresAt):
		return fmt.Errorf("check admission %s: %w at %s", a.ID, ErrAdmissionExpired, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}
