package flashline

import (
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SaleState is the state of a sale. StateSoldOut is never stored: it is an
// open sale with nothing available, derived when a sale is read
// (EffectiveState).
type SaleState string

// Sale states.
const (
	StateScheduled SaleState = "scheduled"
	StateOpen      SaleState = "open"
	StateSoldOut   SaleState = "sold_out"
	StatePaused    SaleState = "paused"
	StateClosed    SaleState = "closed"
)

// Admission is how buyers get to a sale's purchase path.
type Admission string

// Admission modes.
const (
	AdmissionDirect      Admission = "direct"
	AdmissionWaitingRoom Admission = "waiting_room"
)

// Fairness is a waiting room's policy: how waiters are ordered.
type Fairness string

// Fairness policies.
const (
	// FairnessRandomizedAtOpen places everyone who arrived before the sale
	// opened by a draw fixed per customer and sale, and later arrivals after
	// them in arrival order.
	FairnessRandomizedAtOpen Fairness = "randomized_at_open"
	// FairnessArrivalOrder places everyone in order of arrival.
	FairnessArrivalOrder Fairness = "arrival_order"
)

// Confirmation is who confirms a sale's holds, turning them into orders.
type Confirmation string

// Confirmation modes.
const (
	// ConfirmByPayment: a signed payment event from the payment side
	// confirms a hold (POST /payments/events); the customer cannot. The
	// default: a purchase reserves stock, payment confirms it.
	ConfirmByPayment Confirmation = "payment"
	// ConfirmByCustomer: the customer confirms their own hold (POST
	// /reservations/{id}/confirm), for stores without a payment
	// integration and for demos.
	ConfirmByCustomer Confirmation = "customer"
)

// Gate is what counts a sale's units in front of the database.
type Gate string

// Gates.
const (
	// GateNone: the stock rows alone (coalesced, see postgres).
	GateNone Gate = "none"
	// GateRedis: a counter in Redis decides who may try (package gate); the
	// stock rows still decide who gets a unit.
	GateRedis Gate = "redis"
)

// GateStatus is how a gated sale's counter stands against the database.
type GateStatus struct {
	Kind Gate
	// Counter is the units the gate may still hand out, as Redis holds it
	// (-1: unknown, Redis could not be read or the counter is missing).
	Counter int64
	// Drift is available in the database − the counter − the units in
	// flight (handed out, not yet held by a reservation or given back) −
	// the units owed back and not yet applied: 0 when they agree.
	Drift int64
	OK    bool
	// Variants are, in a sale with variants, each variant's own counter
	// and drift, in order (the gate keeps a counter per variant): Counter
	// is then their sum, and Drift the drift of the variant furthest off
	// (a counter above the database first).
	Variants []GateVariantStatus
}

// GateVariantStatus is how one variant's counter of a gated sale stands.
type GateVariantStatus struct {
	SKU     string
	Counter int64
	Drift   int64
}

// Limits on what a sale may be created with.
const (
	MaxBuckets   = 64
	MaxSKULength = 128
	// MaxTitleLength is the longest title a sale may have, in characters.
	MaxTitleLength = 120
	// MaxImageURLLength is the longest image URL a sale may have, in bytes.
	MaxImageURLLength = 2048
	// MaxChallengeBits is the hardest waiting-room challenge a sale may ask
	// (about 2^32 hashes: minutes in a browser).
	MaxChallengeBits = 32
	// MaxMinAccountAgeSeconds bounds the account-age rule (ten years).
	MaxMinAccountAgeSeconds = 10 * 365 * 24 * 3600
)

// NewSale is what an admin supplies to create a sale.
type NewSale struct {
	SKU string
	// Title is what the waiting-room page calls the product ("": the SKU).
	Title string
	// ImageURL is the product's picture on the page, an https URL the
	// shopper's browser loads ("": none).
	ImageURL              string
	InitialStock          int
	PerCustomerLimit      int
	ReservationTTLSeconds int
	OpensAt               *time.Time
	Admission             Admission
	Buckets               int
	// Fairness is the waiting room's ordering policy (default
	// FairnessRandomizedAtOpen).
	Fairness Fairness
	// ChallengeBits is the difficulty of the proof of work asked before
	// admission through the waiting room; 0 = none.
	ChallengeBits int
	// PerInstrumentLimit is the most units one payment instrument may hold
	// in the sale; 0 = no limit.
	PerInstrumentLimit int
	// MinAccountAgeSeconds refuses accounts younger than this (the
	// acct_created claim); 0 = no rule.
	MinAccountAgeSeconds int
	// Confirmation is who confirms the sale's holds (default
	// ConfirmByPayment).
	Confirmation Confirmation
	// Gate is GateNone (default) or GateRedis.
	Gate Gate
	// Lottery is the lottery's rules, for "admission": "lottery" only.
	Lottery *LotteryRules
	// Price is the unit's price, when the sale states one (nil: none; the
	// payments' amounts are then stored, not checked).
	Price *Price
	// Variants are the sale's variants (variant.go; nil: none, the sale
	// sells InitialStock units of SKU). With variants, InitialStock and
	// Buckets are left zero and filled in from them.
	Variants []NewVariant
}

// Price is a unit's price: Amount in the currency's minor units (cents),
// Currency three letters (ISO 4217), stored upper case.
type Price struct {
	Amount   int64
	Currency string
}

// Validate checks a price and puts its currency in upper case.
func (p *Price) Validate() error {
	switch {
	case p.Amount < 0 || p.Amount > MaxPaymentAmount:
		return Invalid("price.amount must be between 0 and " + strconv.Itoa(MaxPaymentAmount) + " (minor units)")
	case !isCurrency(p.Currency):
		return Invalid("price.currency must be three letters (ISO 4217)")
	}
	p.Currency = strings.ToUpper(p.Currency)
	return nil
}

// Pays reports whether a payment of amount in currency pays for quantity
// units at this price: both given, the same currency (in any case), and
// exactly quantity x Amount.
func (p Price) Pays(quantity int, amount *int64, currency string) bool {
	return amount != nil && strings.EqualFold(currency, p.Currency) && *amount == int64(quantity)*p.Amount
}

// Validate checks a NewSale and fills in defaults.
func (n *NewSale) Validate() error {
	if n.Variants != nil {
		if len(n.Variants) == 0 {
			return Invalid("variants must be 1-100")
		}
		if err := n.validateVariants(); err != nil {
			return err
		}
	}
	switch {
	case n.SKU == "" || len(n.SKU) > MaxSKULength:
		return Invalid("sku must be 1-128 characters")
	case !ValidText(n.SKU):
		return Invalid("sku must be text without control or format characters")
	case n.InitialStock < 1 || n.InitialStock > 100_000_000:
		return Invalid("initialStock must be between 1 and 100000000")
	}
	if err := validTitle(n.Title); err != nil {
		return err
	}
	if n.Price != nil {
		if err := n.Price.Validate(); err != nil {
			return err
		}
	}
	if err := ValidImageURL(n.ImageURL); err != nil {
		return err
	}
	if n.PerCustomerLimit == 0 {
		n.PerCustomerLimit = 1
	}
	if n.ReservationTTLSeconds == 0 {
		n.ReservationTTLSeconds = 600
	}
	if n.Admission == "" {
		n.Admission = AdmissionDirect
	}
	if n.Buckets == 0 {
		n.Buckets = 1
	}
	if n.Fairness == "" {
		n.Fairness = FairnessRandomizedAtOpen
	}
	if n.Confirmation == "" {
		n.Confirmation = ConfirmByPayment
	}
	if n.Gate == "" {
		n.Gate = GateNone
	}
	switch {
	case n.PerCustomerLimit < 1 || n.PerCustomerLimit > 1000:
		return Invalid("perCustomerLimit must be between 1 and 1000")
	case n.ReservationTTLSeconds < 1 || n.ReservationTTLSeconds > 7*24*3600:
		return Invalid("reservationTtlSeconds must be between 1 and 604800")
	case n.Admission != AdmissionDirect && n.Admission != AdmissionWaitingRoom && n.Admission != AdmissionLottery:
		return Invalid(`admission must be "direct", "waiting_room" or "lottery"`)
	case n.Buckets < 1 || n.Buckets > MaxBuckets:
		return Invalid("buckets must be between 1 and 64")
	case n.Buckets > n.InitialStock:
		return Invalid("buckets must not exceed initialStock")
	case n.Fairness != FairnessRandomizedAtOpen && n.Fairness != FairnessArrivalOrder:
		return Invalid(`fairness must be "randomized_at_open" or "arrival_order"`)
	case n.ChallengeBits < 0 || n.ChallengeBits > MaxChallengeBits:
		return Invalid("challengeBits must be between 0 (no challenge) and 32")
	case n.ChallengeBits > 0 && n.Admission != AdmissionWaitingRoom && n.Admission != AdmissionLottery:
		return Invalid(`challengeBits needs "admission": "waiting_room" or "lottery" (the challenge is asked in the waiting room, or to register)`)
	case n.PerInstrumentLimit < 0 || n.PerInstrumentLimit > 1000:
		return Invalid("perInstrumentLimit must be between 1 and 1000, or null for no limit")
	case n.MinAccountAgeSeconds < 0 || n.MinAccountAgeSeconds > MaxMinAccountAgeSeconds:
		return Invalid("minAccountAgeSeconds must be between 0 and 315360000 (ten years)")
	case n.Confirmation != ConfirmByPayment && n.Confirmation != ConfirmByCustomer:
		return Invalid(`confirmation must be "payment" or "customer"`)
	case n.Gate != GateNone && n.Gate != GateRedis:
		return Invalid(`gate must be "none" or "redis"`)
	case (n.Admission == AdmissionLottery) != (n.Lottery != nil):
		return Invalid(`registrationOpensAt, registrationClosesAt, drawAt, purchaseWindowSeconds and waitlist go with "admission": "lottery", and only with it`)
	case n.Lottery != nil:
		return n.Lottery.validate(n)
	}
	return nil
}

// InitialState is the state a new sale is stored in: open at once when it
// admits directly and its opening time is unset or past (as of now),
// scheduled otherwise (a waiting room opens by its time or an admin).
func (n NewSale) InitialState(now time.Time) SaleState {
	if n.Admission == AdmissionDirect && (n.OpensAt == nil || !n.OpensAt.After(now)) {
		return StateOpen
	}
	return StateScheduled
}

// Invariant is the last verdict of the invariant check on a sale.
type Invariant struct {
	OK        bool
	CheckedAt *time.Time
	Detail    string
}

// Sale is a sale with its live counts, in units.
type Sale struct {
	ID  string
	SKU string
	// Title is the product's name for shoppers (the SKU when none was
	// given); ImageURL its picture ("": none).
	Title        string
	ImageURL     string
	State        SaleState
	InitialStock int
	Available    int
	Pending      int
	Confirmed    int
	Expired      int
	Cancelled    int
	// Voided is units of orders voided after confirmation: back in stock,
	// neither pending nor confirmed.
	Voided                int
	LedgerTotal           int
	PerCustomerLimit      int
	ReservationTTLSeconds int
	Admission             Admission
	Buckets               int
	Fairness              Fairness
	ChallengeBits         int
	PerInstrumentLimit    int // 0: no limit
	MinAccountAgeSeconds  int
	Confirmation          Confirmation
	OpensAt               *time.Time
	PauseReason           string
	Invariant             Invariant
	CreatedAt             time.Time
	Gate                  Gate
	// GateStatus is set for a gated sale read through its gate.
	GateStatus *GateStatus
	// Lottery is set for a lottery sale: its rules and counts.
	Lottery *Lottery
	// Price is the unit's price, when the sale states one.
	Price *Price
	// Variants are the sale's variants in order (none: a sale without).
	Variants []Variant
}

// EffectiveState is the state a sale shows, from the state stored: a
// scheduled sale whose time has come is open, and an open sale with nothing
// available is sold out.
func EffectiveState(stored SaleState, opensAt *time.Time, now time.Time, available int) SaleState {
	state := stored
	if state == StateScheduled && opensAt != nil && !opensAt.After(now) {
		state = StateOpen
	}
	if state == StateOpen && available == 0 {
		state = StateSoldOut
	}
	return state
}

// MaxSalePage bounds a page of sales (SaleQuery.Limit).
const MaxSalePage = 100

// SaleQuery picks a page of sales, newest first.
type SaleQuery struct {
	// States are the states to list, as a reader sees them
	// (EffectiveState); none: every state.
	States []SaleState
	// After is the last sale of the previous page; "" starts at the newest.
	// A sale that does not exist is ErrInvalid: the page cannot be placed.
	After string
	// Limit is how many at most, 1 to MaxSalePage.
	Limit int
}

// SaleAction is an admin's action on a sale.
type SaleAction string

// Sale actions.
const (
	ActionOpen   SaleAction = "open"
	ActionPause  SaleAction = "pause"
	ActionResume SaleAction = "resume"
	ActionClose  SaleAction = "close"
)

// SaleActions are every action, in the order the API lists them.
var SaleActions = []SaleAction{ActionOpen, ActionPause, ActionResume, ActionClose}

// transitions is the sale state machine: for each admin action, the stored
// state it leads to and the stored states it may start from. The target is
// among its own sources, so repeating an action is harmless.
var transitions = map[SaleAction]struct {
	to   SaleState
	from []SaleState
}{
	ActionOpen:   {StateOpen, []SaleState{StateScheduled, StateOpen}},
	ActionPause:  {StatePaused, []SaleState{StateScheduled, StateOpen, StatePaused}},
	ActionResume: {StateOpen, []SaleState{StatePaused, StateOpen}},
	ActionClose:  {StateClosed, []SaleState{StateScheduled, StateOpen, StatePaused, StateClosed}},
}

// Transition is what action does to a sale: the stored state it leads to
// and the stored states it may start from (the store applies it atomically,
// only from one of those). An unknown action is an *InvalidError.
func (a SaleAction) Transition() (to SaleState, from []SaleState, err error) {
	t, ok := transitions[a]
	if !ok {
		return "", nil, Invalid("unknown action " + string(a))
	}
	return t.to, t.from, nil
}

// validTitle checks a sale's title: "" (none: the SKU is shown), or 1-120
// characters of text that is not blank.
func validTitle(t string) error {
	switch {
	case t == "":
		return nil
	case utf8.RuneCountInString(t) > MaxTitleLength || strings.TrimSpace(t) == "":
		return Invalid("title must be 1-120 characters, not only spaces")
	case !ValidText(t):
		return Invalid("title must be text without control or format characters")
	}
	return nil
}

// ValidImageURL checks a sale's image URL: "" (none), or an absolute https
// URL of at most 2048 bytes of printable ASCII (non-ASCII percent-encoded),
// no backslash, with a host and no user name or password. The page loads it in the
// shopper's browser (its Content-Security-Policy allows https: images); the
// service never fetches it.
func ValidImageURL(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxImageURLLength {
		return Invalid("imageUrl must be at most 2048 bytes")
	}
	for i := 0; i < len(s); i++ {
		// A backslash is a slash to browsers and not to url.Parse: the two
		// would read another host.
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '\\' {
			return Invalid("imageUrl must be printable ASCII without spaces or backslashes (percent-encode anything else)")
		}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return Invalid("imageUrl is not a URL")
	case u.Scheme != "https" || !strings.HasPrefix(s, "https://"):
		return Invalid("imageUrl must be an https URL")
	case u.Host == "" || u.Hostname() == "":
		return Invalid("imageUrl must name a host")
	case u.User != nil:
		return Invalid("imageUrl must not carry a user name or password")
	}
	return nil
}
