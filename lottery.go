package flashline

import (
	"context"
	"errors"
	"time"
)

// AdmissionLottery: customers register in advance, a draw at DrawAt picks
// the winners, and each winner buys with an admission token within a
// purchase window (LotteryRules).
const AdmissionLottery Admission = "lottery"

// NeedsAdmission reports whether the purchase path asks for an admission
// token (X-Admission-Token): from the waiting room or the lottery's draw.
func (a Admission) NeedsAdmission() bool {
	return a == AdmissionWaitingRoom || a == AdmissionLottery
}

// MaxPurchaseWindowSeconds bounds a lottery winner's window to buy (a week).
const MaxPurchaseWindowSeconds = 7 * 24 * 3600

// LotteryRules are a lottery sale's times and rules.
type LotteryRules struct {
	RegistrationOpensAt   time.Time
	RegistrationClosesAt  time.Time
	DrawAt                time.Time
	PurchaseWindowSeconds int
	// Waitlist: a winner who does not buy within the window passes the unit
	// to the next in draw order.
	Waitlist bool
}

// validate checks the rules of a lottery sale n.
func (r *LotteryRules) validate(n *NewSale) error {
	switch {
	case r.RegistrationOpensAt.IsZero() || r.RegistrationClosesAt.IsZero() || r.DrawAt.IsZero():
		return Invalid(`"admission": "lottery" needs registrationOpensAt, registrationClosesAt and drawAt`)
	case !r.RegistrationOpensAt.Before(r.RegistrationClosesAt):
		return Invalid("registrationOpensAt must be before registrationClosesAt")
	case r.DrawAt.Before(r.RegistrationClosesAt):
		return Invalid("drawAt must not be before registrationClosesAt")
	case r.PurchaseWindowSeconds < 1 || r.PurchaseWindowSeconds > MaxPurchaseWindowSeconds:
		return Invalid("purchaseWindowSeconds must be between 1 and 604800")
	case n.OpensAt != nil && !n.OpensAt.Equal(r.DrawAt):
		return Invalid(`a lottery sale opens at its drawAt: opensAt must not be set`)
	case n.PerCustomerLimit != 1:
		return Invalid("a lottery sale gives each winner one unit: perCustomerLimit must be 1")
	case n.Gate != GateNone:
		return Invalid(`a lottery sale takes no gate: its winners are known before it opens`)
	}
	// The sale opens when the winners are drawn; nobody can buy before,
	// having no admission token.
	drawAt := r.DrawAt
	n.OpensAt = &drawAt
	return nil
}

// RegistrationState is where a lottery registration stands.
type RegistrationState string

// Registration states.
const (
	// RegistrationNone is not stored: the customer has not registered.
	RegistrationNone       RegistrationState = "unregistered"
	RegistrationRegistered RegistrationState = "registered"
	RegistrationWon        RegistrationState = "won"
	RegistrationLost       RegistrationState = "lost"
	RegistrationWaitlisted RegistrationState = "waitlisted"
	// RegistrationExpired: a winner whose purchase window ended without a
	// purchase.
	RegistrationExpired RegistrationState = "expired"
)

// Lottery errors.
var (
	// ErrRegistrationClosed: registering outside the registration window.
	ErrRegistrationClosed = errors.New("lottery registration is closed")
	// ErrInstrumentRegistered: another account registered with this payment
	// instrument in this lottery already.
	ErrInstrumentRegistered = errors.New("payment instrument already registered in this lottery")
	// ErrNoLottery: the sale is not a lottery.
	ErrNoLottery = errors.New("sale is not a lottery")
	// ErrChallengeFailed: the proof of work asked to register is missing or
	// wrong.
	ErrChallengeFailed = errors.New("proof of work missing or wrong")
)

// Lottery is a lottery sale's rules, what the sale asks of registrants, and
// its counts.
type Lottery struct {
	SaleID               string
	Rules                LotteryRules
	InitialStock         int
	ChallengeBits        int
	MinAccountAgeSeconds int
	// DrawSeed is the secret seed of the draw (sales.draw_seed): published
	// (Policy) only once the draw is due.
	DrawSeed []byte
	DrawnAt  *time.Time
	Now      time.Time // the database's clock when read
	// Title and ImageURL ("": none) are what the page shows of the sale.
	Title, ImageURL string
	// Counts are set on a sale read (Store.Sale), not by LotteryStore.Lottery.
	Counts LotteryCounts
	// DrawVersion: 1, drawn with the seed alone before the draw's
	// transcript existed; 2, the formula of lotterydraw.go; 3, a lottery
	// with variants (lotteryvariants.go).
	DrawVersion int
	// RegistrantsRoot is the registrants' Merkle root, committed when
	// registration closed (nil before), of RegistrantsCount registrants.
	RegistrantsRoot        []byte
	RegistrantsCount       int
	RegistrantsCommittedAt *time.Time
	// Variants are a lottery with variants' (DrawVersion 3), in the
	// sale's order; nil without.
	Variants []LotteryVariant
	// Beacon is the beacon and round the draw waits for (nil: the
	// deployment had no beacon when the sale was created); its value is set
	// once drawn.
	Beacon *BeaconRecord
}

// RegistrationOpen reports whether registration is open at l.Now.
func (l Lottery) RegistrationOpen() bool {
	return l.DrawnAt == nil && l.RegistrantsRoot == nil && !l.Now.Before(l.Rules.RegistrationOpensAt) && l.Now.Before(l.Rules.RegistrationClosesAt)
}

// LotteryCounts counts a lottery's registrations by state.
type LotteryCounts struct {
	Registered, Won, Lost, Waitlisted, Expired int
}

// Total is every registration.
func (c LotteryCounts) Total() int {
	return c.Registered + c.Won + c.Lost + c.Waitlisted + c.Expired
}

// Registration is one customer's registration in a lottery.
type Registration struct {
	ID                   string
	SaleID               string
	CustomerID           string
	State                RegistrationState
	DrawRank             int // 0 before the draw
	PurchaseWindowEndsAt *time.Time
	CreatedAt            time.Time
	// Variant is the variant the registration named, in a lottery with
	// variants ("": any, or no variants); WonVariant the one it won and may
	// buy ("": none).
	Variant, WonVariant string
	// HasVariants: the lottery has variants.
	HasVariants bool
}

// NewRegistration is a customer's request to register.
type NewRegistration struct {
	SaleID     string
	CustomerID string
	// PaymentInstrument is the instrument the customer token names (its
	// payment_instrument claim, normalised by NormalizeInstrument); ""
	// when it names none. Never the shopper's say.
	PaymentInstrument string
	// Variant is the variant's SKU the customer names, in a lottery with
	// variants ("": any; VariantChoice reads it).
	Variant string
}

// DrawResult is what one draw did.
type DrawResult struct {
	SaleID     string
	Drew       bool // false: drawn already (by another instance), or not due
	Registered int
	Won        int
	// WonVariants counts the units won of each variant, in a lottery with
	// variants (nil without).
	WonVariants map[string]int
}

// LotteryStore is what the lottery needs of the database.
type LotteryStore interface {
	// Lottery reads a lottery sale (ErrNotFound, ErrNoLottery).
	Lottery(ctx context.Context, saleID string) (Lottery, error)
	// Register registers a customer, once: a repeat returns the first
	// registration, whatever the window.
	Register(ctx context.Context, r NewRegistration) (Registration, error)
	// Registration is a customer's registration (ErrNotFound: none).
	Registration(ctx context.Context, saleID, customerID string) (Registration, error)
	// LotteryEntries is every registration of a lottery with its state
	// and draw rank (0: not drawn), in draw order.
	LotteryEntries(ctx context.Context, saleID string) ([]LotteryEntry, error)
	// Crowd is a waiting room's pre-open crowd as committed at the open,
	// its holders with it (crowddraw.go; ErrNotFound, ErrNoWaitingRoom).
	Crowd(ctx context.Context, saleID string) (Crowd, error)
}

// RegistrationIDPrefix is the prefix of registration ids ("reg_" + a ULID).
// A registration id is also its winner's admission id: stored with the
// reservation the winner makes, under reservations_admission_token_unique,
// it makes the admission single use.
const RegistrationIDPrefix = "reg"
