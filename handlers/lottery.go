package handlers

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// The lottery with advance registration ("admission": "lottery"): customers
// register in a window, a draw at drawAt picks the winners (jobs/lottery.go),
// and a winner buys with the admission token GET /sales/{id}/registration
// gives them, within their purchase window.

// LotteryRequest is the lottery's part of POST /admin/sales.
type LotteryRequest struct {
	RegistrationOpensAt   *time.Time `json:"registrationOpensAt"`
	RegistrationClosesAt  *time.Time `json:"registrationClosesAt"`
	DrawAt                *time.Time `json:"drawAt"`
	PurchaseWindowSeconds *int       `json:"purchaseWindowSeconds"`
	Waitlist              *bool      `json:"waitlist"`
}

// rules is nil when no lottery field is given; a missing one is left zero,
// for NewSale.Validate to name.
func (r LotteryRequest) rules() *flashline.LotteryRules {
	if r.RegistrationOpensAt == nil && r.RegistrationClosesAt == nil && r.DrawAt == nil &&
		r.PurchaseWindowSeconds == nil && r.Waitlist == nil {
		return nil
	}
	var l flashline.LotteryRules
	if r.RegistrationOpensAt != nil {
		l.RegistrationOpensAt = *r.RegistrationOpensAt
	}
	if r.RegistrationClosesAt != nil {
		l.RegistrationClosesAt = *r.RegistrationClosesAt
	}
	if r.DrawAt != nil {
		l.DrawAt = *r.DrawAt
	}
	if r.PurchaseWindowSeconds != nil {
		l.PurchaseWindowSeconds = *r.PurchaseWindowSeconds
	}
	if r.Waitlist != nil {
		l.Waitlist = *r.Waitlist
	}
	return &l
}

// NewLotteryView renders a lottery (nil: not a lottery sale).
func NewLotteryView(l *flashline.Lottery) *api.Lottery {
	if l == nil {
		return nil
	}
	c := l.Counts
	return &api.Lottery{
		RegistrationOpensAt:   rfc3339(l.Rules.RegistrationOpensAt),
		RegistrationClosesAt:  rfc3339(l.Rules.RegistrationClosesAt),
		DrawAt:                rfc3339(l.Rules.DrawAt),
		PurchaseWindowSeconds: l.Rules.PurchaseWindowSeconds,
		Waitlist:              l.Rules.Waitlist,
		DrawnAt:               timeString(l.DrawnAt),
		Registrations: api.LotteryCounts{Total: c.Total(), Registered: c.Registered, Won: c.Won,
			Lost: c.Lost, Waitlisted: c.Waitlisted, Expired: c.Expired},
	}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

type registerRequest struct {
	// PaymentInstrument is what older pages send: checked as before (at
	// most 255 bytes of text) and ignored. The instrument that counts is
	// the token's (Actor.PaymentInstrument).
	PaymentInstrument string `json:"paymentInstrument"`
	// Solution solves the registration's proof of work, when the sale asks
	// one (challengeBits).
	Solution string `json:"solution"`
	// Variant is, in a lottery with variants, the variant's SKU the
	// customer wants, or "any" (also when left out).
	Variant string `json:"variant"`
}

// handleRegister is POST /sales/{saleId}/registrations. The sale's rules
// for who may take part (account age, proof of work, one registration per
// payment instrument when the customer token names one) are checked here, before the draw, not at the
// purchase. Idempotent per customer and sale: a repeat answers the same
// registration.
func handleRegister(lottery flashline.LotteryStore, keyring *roomtoken.Keyring, now func() time.Time, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		actor := actorOf(c)
		var body registerRequest
		if err := decodeJSON(c, &body); err != nil {
			writeError(c, logger, err)
			return
		}
		if _, err := flashline.NormalizeInstrument(body.PaymentInstrument); err != nil {
			writeError(c, logger, err)
			return
		}
		if len(body.Solution) > 64 {
			writeError(c, logger, flashline.Invalid("solution must be at most 64 characters"))
			return
		}
		ctx := c.Request.Context()
		saleID := c.Param("saleId")
		l, err := lottery.Lottery(ctx, saleID)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		choice, err := flashline.VariantChoice(body.Variant, l.Variants)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		switch {
		case !flashline.AccountOldEnough(actor.AccountCreated, l.MinAccountAgeSeconds, l.Now):
			writeError(c, logger, flashline.ErrAccountTooNew)
			return
		case l.ChallengeBits > 0 && (keyring == nil ||
			!keyring.VerifyRegistrationChallenge(saleID, actor.CustomerID, body.Solution, l.ChallengeBits)):
			writeError(c, logger, flashline.ErrChallengeFailed)
			return
		}
		reg, err := lottery.Register(ctx, flashline.NewRegistration{
			SaleID: saleID, CustomerID: actor.CustomerID, PaymentInstrument: actor.PaymentInstrument,
			Variant: choice,
		})
		if err != nil {
			writeError(c, logger, err)
			return
		}
		c.Header("Cache-Control", "no-store")
		writeJSON(c, http.StatusCreated, newRegistrationView(reg, keyring, now()))
	}
}

// newRegistrationView renders a registration; a winner whose window is
// still open gets the admission token, bound to customer and sale, good
// until the window ends and for one reservation (its id is the
// registration's, stored with the reservation under a unique index), and,
// in a lottery with variants, for the variant won only.
func newRegistrationView(r flashline.Registration, keyring *roomtoken.Keyring, now time.Time) api.Registration {
	reg := flashline.RegistrantOf(r.SaleID, r.CustomerID)
	leaf := flashline.RegistrantLeaf(reg)
	if r.HasVariants {
		leaf = flashline.RegistrantChoiceLeaf(reg, r.Variant)
	}
	v := api.Registration{RegistrationID: r.ID, State: string(r.State), DrawRank: r.DrawRank,
		PurchaseWindowEndsAt: timeString(r.PurchaseWindowEndsAt),
		Registrant:           reg.String(), RegistrantLeaf: hex.EncodeToString(leaf[:])}
	if r.HasVariants {
		v.Variant, v.WonVariant = r.Variant, r.WonVariant
		if v.Variant == "" {
			v.Variant = flashline.AnyVariant
		}
	}
	if r.State == flashline.RegistrationWon && r.PurchaseWindowEndsAt != nil &&
		now.Before(*r.PurchaseWindowEndsAt) && keyring != nil {
		// The won variant (the draw's award, or the one a waitlist promotion
		// passed down) is a signed claim: the reservation route holds the
		// winner to it from the token alone.
		v.AdmissionToken = keyring.SignAdmission(roomtoken.Admission{
			ID: r.ID, SaleID: r.SaleID, CustomerID: r.CustomerID, ExpiresAt: *r.PurchaseWindowEndsAt,
			Variant: r.WonVariant,
		})
	}
	return v
}

// handleRegistration is GET /sales/{saleId}/registration: the customer's
// registration and, once won, the admission token. A customer not
// registered is told whether registration is open and the proof of work to
// solve.
func handleRegistration(lottery flashline.LotteryStore, keyring *roomtoken.Keyring, now func() time.Time, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		saleID, customerID := c.Param("saleId"), actorOf(c).CustomerID
		c.Header("Cache-Control", "no-store")
		reg, err := lottery.Registration(ctx, saleID, customerID)
		if err == nil {
			writeJSON(c, http.StatusOK, newRegistrationView(reg, keyring, now()))
			return
		}
		if !errors.Is(err, flashline.ErrNotFound) {
			writeError(c, logger, err)
			return
		}
		l, err := lottery.Lottery(ctx, saleID)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		open := l.RegistrationOpen()
		v := api.Registration{State: string(flashline.RegistrationNone), RegistrationOpen: &open}
		if l.ChallengeBits > 0 && keyring != nil {
			v.Challenge = &api.Challenge{Nonce: keyring.RegistrationNonce(saleID, customerID), Bits: l.ChallengeBits}
		}
		writeJSON(c, http.StatusOK, v)
	}
}

// DrawAlgorithm says, for the policy, how the order is computed from the
// revealed seed.
const DrawAlgorithm = "H = SHA-256, || concatenation. Each registrant r = H(\"flashline/lottery/registrant/v1\" || 0x00 || saleId || 0x00 || customerId); " +
	"the registrants' root: leaves H(0x00 || r) in ascending order of r, nodes H(0x01 || left || right), level by level, an odd last node carried up (no registrant: H(\"\")), fixed when registration closes; " +
	"F = H(\"flashline/lottery/draw/v2\" || 0x00 || saleId || 0x00 || root || beacon || seed), beacon the beacon round's 32-byte randomness (32 zero bytes without a beacon); " +
	"registrants are ordered by H(F || r), then r; the first `units` win. drawCommitment is hex H(seed); the seed is published at the draw. " +
	"GET /sales/{saleId}/draw is the whole transcript."

// DrawAlgorithmVariants is DrawAlgorithm for a lottery with variants
// (formula v3).
const DrawAlgorithmVariants = "H = SHA-256, || concatenation. Each registrant r = H(\"flashline/lottery/registrant/v1\" || 0x00 || saleId || 0x00 || customerId), with its choice c, the SKU of the variant it named (nothing for any); " +
	"the registrants' root: leaves H(0x00 || r || c) in ascending order of r, nodes H(0x01 || left || right), level by level, an odd last node carried up (no registrant: H(\"\")), fixed when registration closes; " +
	"F = H(\"flashline/lottery/draw/v3\" || 0x00 || saleId || 0x00 || root || beacon || seed), beacon the beacon round's 32-byte randomness (32 zero bytes without a beacon); " +
	"registrants are ordered by H(F || r), then r; in that order each wins a unit of the variant it named while one is left, and one that named any a unit of the first variant, in the sale's order, with one left. " +
	"drawCommitment is hex H(seed); the seed is published at the draw. GET /sales/{saleId}/draw is the whole transcript."

// handleSalePolicy is GET /sales/{saleId}/policy: a waiting room's policy
// (answered from memory by the room), else a lottery's (read from the
// database), else 409 no_waiting_room. room and lottery may be nil. Asking
// the room first keeps a waiting room's policy off the database.
func handleSalePolicy(room *waitroom.Room, lottery flashline.LotteryStore, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, saleID := c.Request.Context(), c.Param("saleId")
		if room != nil {
			p, err := room.Policy(ctx, saleID)
			switch {
			case err == nil:
				writeJSON(c, http.StatusOK, NewPolicyView(p))
				return
			case !errors.Is(err, flashline.ErrNoWaitingRoom) || lottery == nil:
				writeError(c, logger, err)
				return
			}
		}
		if lottery == nil {
			writeError(c, logger, flashline.ErrNoWaitingRoom)
			return
		}
		l, err := lottery.Lottery(ctx, saleID)
		if errors.Is(err, flashline.ErrNoLottery) {
			err = flashline.ErrNoWaitingRoom
		}
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, NewLotteryPolicyView(l))
	}
}

// NewLotteryPolicyView renders a lottery's policy; the seed is revealed once
// the draw is due by the database's clock (registration is closed by then).
func NewLotteryPolicyView(l flashline.Lottery) api.LotteryPolicy {
	r := l.Rules
	v := api.LotteryPolicy{
		Policy:                string(flashline.AdmissionLottery),
		RegistrationOpensAt:   rfc3339(r.RegistrationOpensAt),
		RegistrationClosesAt:  rfc3339(r.RegistrationClosesAt),
		DrawAt:                rfc3339(r.DrawAt),
		PurchaseWindowSeconds: r.PurchaseWindowSeconds,
		Waitlist:              r.Waitlist,
		Units:                 l.InitialStock,
		DrawAlgorithm:         DrawAlgorithm,
		DrawCommitment:        flashline.DrawCommitment(l.DrawSeed),
		DrawnAt:               timeString(l.DrawnAt),
		Title:                 l.Title,
		ImageURL:              optionalString(l.ImageURL),
	}
	if l.DrawnAt != nil || (!l.Now.Before(r.DrawAt) && l.Beacon == nil) {
		// With a beacon, the seed is revealed by the draw (with the round).
		seed := hex.EncodeToString(l.DrawSeed)
		v.DrawSeed = &seed
	}
	for _, x := range l.Variants {
		v.Variants = append(v.Variants, api.LotteryPolicyVariant{SKU: x.SKU, Title: x.Title, Units: x.Units})
	}
	if l.Variants != nil {
		v.DrawAlgorithm = DrawAlgorithmVariants
	}
	tr := api.NewDrawTranscript(l, flashline.NewDrawTranscript(l, nil))
	v.RegistrantsRoot, v.Beacon, v.Transcript = tr.RegistrantsRoot, tr.Beacon, "/sales/"+l.SaleID+"/draw"
	v.Description = fmt.Sprintf("Register between %s and %s; one registration per account, and per payment instrument when the store names it (never typed here). "+
		"At %s a draw picks %d winners among everyone registered: registering early does not help. "+
		"Each winner has %s to buy one unit.",
		v.RegistrationOpensAt, v.RegistrationClosesAt, v.DrawAt, l.InitialStock, waitroom.HumanDuration(r.PurchaseWindowSeconds))
	if l.Variants != nil {
		v.Description += " Register for the variant you want, or for any: in draw order, each winner gets a unit of the variant they named while one is left, and a winner who named any gets the first variant with a unit left; a winner buys only the variant won."
	}
	if r.Waitlist {
		if l.Variants != nil {
			v.Description += " Everyone else is on a waitlist in draw order: when a winner's window ends without a purchase, the unit goes to the next on the list who named its variant, or any."
		} else {
			v.Description += " Everyone else is on a waitlist in draw order: when a winner's window ends without a purchase, the unit goes to the next on the list."
		}
	}
	if l.ChallengeBits > 0 {
		v.Description += " To register, your browser solves a small puzzle; this slows down automated registrations."
	}
	if l.MinAccountAgeSeconds > 0 {
		v.Description += fmt.Sprintf(" Accounts created less than %s before registering cannot take part.", waitroom.HumanDuration(l.MinAccountAgeSeconds))
	}
	v.Description += " The draw's seed is committed to here before the draw (drawCommitment) and published after it (drawSeed); the registrants are fixed when registration closes (registrantsRoot)."
	if l.Beacon != nil {
		v.Description += fmt.Sprintf(" The draw also uses round %d of a public randomness beacon, published after registration closes, so nobody, the store included, can know the order before then.", l.Beacon.Round)
	} else {
		v.Description += " This deployment has no public randomness beacon: the draw rests on the store's seed alone, which the store knows before registration closes."
	}
	v.Description += " The whole draw is published at " + v.Transcript + " for anyone to check."
	return v
}

// handleDrawTranscript is GET /sales/{saleId}/draw: the lottery's draw
// transcript (api.DrawTranscript), no authentication. Once drawn it does
// not change, and may be cached.
func handleDrawTranscript(lottery flashline.LotteryStore, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, saleID := c.Request.Context(), c.Param("saleId")
		l, err := lottery.Lottery(ctx, saleID)
		if errors.Is(err, flashline.ErrNoLottery) {
			writeCrowdTranscript(c, lottery, saleID, logger)
			return
		}
		if err != nil {
			writeError(c, logger, err)
			return
		}
		if l.DrawVersion < 2 {
			writeError(c, logger, flashline.Invalid("this lottery was drawn before draw transcripts existed: its policy's seed and commitment are what it published"))
			return
		}
		var entries []flashline.LotteryEntry
		if l.RegistrantsRoot != nil {
			if entries, err = lottery.LotteryEntries(ctx, saleID); err != nil {
				writeError(c, logger, err)
				return
			}
		}
		if l.DrawnAt != nil {
			c.Header("Cache-Control", "public, max-age=3600")
		} else {
			c.Header("Cache-Control", "no-store")
		}
		writeJSON(c, http.StatusOK, api.NewDrawTranscript(l, flashline.NewDrawTranscript(l, entries)))
	}
}

// writeCrowdTranscript answers GET /sales/{saleId}/draw for a
// randomized_at_open waiting room: its pre-open crowd as committed at the
// open, in the lottery's transcript's shape (api.NewCrowdTranscript). Any
// other sale: no_lottery, as before.
func writeCrowdTranscript(c *gin.Context, lottery flashline.LotteryStore, saleID string, logger *slog.Logger) {
	crowd, err := lottery.Crowd(c.Request.Context(), saleID)
	switch {
	case errors.Is(err, flashline.ErrNoWaitingRoom):
		writeError(c, logger, flashline.ErrNoLottery)
		return
	case err != nil:
		writeError(c, logger, err)
		return
	case crowd.Fairness != flashline.FairnessRandomizedAtOpen:
		writeError(c, logger, flashline.ErrNoLottery)
		return
	}
	if crowd.FinalSeed != nil {
		c.Header("Cache-Control", "public, max-age=3600")
	} else {
		c.Header("Cache-Control", "no-store")
	}
	writeJSON(c, http.StatusOK, api.NewCrowdTranscript(crowd, flashline.NewCrowdTranscript(crowd)))
}
