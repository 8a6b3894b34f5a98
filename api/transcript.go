package api

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/flashline/flashline"
)

// DrawTranscript is GET /sales/{saleId}/draw: a lottery's draw, everything
// needed to check it without trusting the store (docs/lottery.md gives the
// formula; `flashline sale verify-draw` checks it). Hashes and keys are
// lowercase hex.
type DrawTranscript struct {
	SaleID string `json:"saleId"`
	// Formula names the draw's formula: "flashline/lottery/draw/v2", or
	// "flashline/lottery/draw/v3" for a lottery with variants (DrawFormulaV3).
	Formula string `json:"formula"`
	// Status: "registering" (nothing committed yet), "committed" (the
	// registrants' root fixed; waiting for the draw), "drawn".
	Status               string  `json:"status"`
	RegistrationClosesAt string  `json:"registrationClosesAt"`
	DrawAt               string  `json:"drawAt"`
	DrawnAt              *string `json:"drawnAt"`
	Units                int     `json:"units"`
	Waitlist             bool    `json:"waitlist"`
	// Commitment is SHA-256 of the store's seed, published at creation.
	Commitment string `json:"commitment"`
	// Seed is the store's seed, revealed by the draw.
	Seed                   *string `json:"seed"`
	RegistrantsRoot        *string `json:"registrantsRoot"`
	RegistrantCount        int     `json:"registrantCount"`
	RegistrantsCommittedAt *string `json:"registrantsCommittedAt"`
	// Beacon is null in a deployment without a beacon (Note says so).
	Beacon *TranscriptBeacon `json:"beacon"`
	// Registrants: every registrant's hashed id, in rank order once drawn
	// (sorted before).
	Registrants []TranscriptRegistrant `json:"registrants"`
	Winners     []string               `json:"winners"`
	Waitlisted  []string               `json:"waitlisted"`
	// Variants are, for a lottery with variants (Formula DrawFormulaV3),
	// each variant's SKU and units in the sale's order.
	Variants []TranscriptVariant `json:"variants,omitempty"`
	// PreopenCount is, for a waiting room's crowd (Formula CrowdFormula),
	// its N, the scale of the ranks: the holders committed at the open
	// (registrantCount; in a room frozen before that was so, the pre-open
	// tickets counted).
	PreopenCount *int64 `json:"preopenCount,omitempty"`
	// Note says, for people, what the transcript proves and what rests on
	// the store.
	Note string `json:"note"`
}

// TranscriptBeacon is the beacon round a lottery's draw (or a waiting
// room's crowd) uses.
type TranscriptBeacon struct {
	Scheme        string  `json:"scheme"`
	PublicKey     string  `json:"publicKey"`
	GenesisTime   int64   `json:"genesisTime"`
	PeriodSeconds int     `json:"periodSeconds"`
	Round         uint64  `json:"round"`
	RoundAt       string  `json:"roundAt"`
	Randomness    *string `json:"randomness"`
	Signature     *string `json:"signature"`
}

// TranscriptRegistrant is one registrant: its hashed id and rank (0 before
// the draw).
type TranscriptRegistrant struct {
	Registrant string `json:"registrant"`
	Rank       int    `json:"rank"`
	// Variant is, in a lottery with variants, the SKU the registrant named
	// or "any" (its leaf commits to it), and Award the variant it won once
	// drawn (absent: none).
	Variant string `json:"variant,omitempty"`
	Award   string `json:"award,omitempty"`
}

// TranscriptVariant is one variant of a lottery with variants.
type TranscriptVariant struct {
	SKU   string `json:"sku"`
	Units int    `json:"units"`
}

// DrawFormula names the lottery's draw formula.
const DrawFormula = "flashline/lottery/draw/v2"

// DrawFormulaV3 names the draw formula of a lottery with variants: v2's
// ranks, each registrant's choice committed in its leaf, and the award of
// the variants in rank order (lotteryvariants.go).
const DrawFormulaV3 = "flashline/lottery/draw/v3"

// CrowdFormula names the formula of a waiting room's committed pre-open
// crowd (crowddraw.go): the transcript is then the room's, its registrants
// the crowd's holders, registrationClosesAt the commitment at the open.
const CrowdFormula = "flashline/waitroom/crowd/v1"

// NewCrowdTranscript renders a waiting room's committed crowd c. Status
// "registering" before the open's commitment, "committed" while the crowd
// waits for its beacon round, "drawn" once it is ranked.
func NewCrowdTranscript(c flashline.Crowd, t flashline.DrawTranscript) DrawTranscript {
	n := c.PreopenCount
	v := DrawTranscript{
		SaleID: c.SaleID, Formula: CrowdFormula, Status: "registering",
		DrawAt: c.OpensAt.UTC().Format(time.RFC3339Nano), DrawnAt: timep(c.CommittedAt),
		Commitment: hex.EncodeToString(t.Commitment), Seed: hexp(t.Seed),
		RegistrantsRoot: hexp(t.Root), RegistrantCount: t.RegistrantCount,
		RegistrantsCommittedAt: timep(c.CommittedAt), PreopenCount: &n,
		Registrants: []TranscriptRegistrant{}, Winners: []string{}, Waitlisted: []string{},
		Beacon: transcriptBeacon(t.Beacon),
		Note: "NO BEACON: the crowd's ranks are drawn with the room's seed (committed to before the open, revealed at it) and the holders' root, fixed at the open. " +
			"Whoever knew the seed before the open, the store included, could compute a customer's rank in a crowd of a given size. ",
	}
	if b := t.Beacon; b != nil {
		v.Note = fmt.Sprintf("The crowd's ranks are drawn with the room's seed (committed to before the open, revealed at it), the holders' root, fixed at the open, "+
			"and the beacon's round %d, published after the holders were committed: nobody, the store included, could know a rank before that round. "+
			"The round is fixed when the sale is created, the first published %s after its opening time (at the freeze if the sale had none, opened early, or froze after it was out), and the policy names it. ", b.Round, flashline.CrowdBeaconDelay)
	}
	v.Note += "A holder's rank is DrawRank(first 8 bytes of SHA-256(finalSeed ‖ registrant), preopenCount); the transcript does not show that the root was published at the open: compare it with the one you saw then (verify-draw --root). "
	if t.Root != nil && c.PreopenCount != int64(t.RegistrantCount) {
		// A room frozen before N was the holders committed (issue 48).
		v.Note += "preopenCount counts the pre-open tickets, some of whose holders are not listed."
	} else {
		v.Note += "preopenCount is the holders committed (registrantCount): a pre-open ticket whose holder reached no origin before the open is not listed, and ranks among them by the same formula."
	}
	if t.Root != nil {
		v.Status = "committed"
	}
	v.RegistrationClosesAt = v.DrawAt
	if c.CommittedAt != nil {
		v.RegistrationClosesAt = c.CommittedAt.UTC().Format(time.RFC3339Nano)
	}
	if t.Seed != nil {
		v.Status = "drawn"
	}
	v.Registrants = make([]TranscriptRegistrant, len(t.Ranked))
	for i, r := range t.Ranked {
		v.Registrants[i] = TranscriptRegistrant{Registrant: r.String(), Rank: t.Ranks[i]}
	}
	return v
}

// transcriptBeacon renders a draw's beacon (nil: none).
func transcriptBeacon(b *flashline.BeaconRecord) *TranscriptBeacon {
	if b == nil {
		return nil
	}
	return &TranscriptBeacon{
		Scheme: flashline.BeaconScheme, PublicKey: hex.EncodeToString(b.Chain.PublicKey),
		GenesisTime: b.Chain.Genesis.Unix(), PeriodSeconds: int(b.Chain.Period / time.Second),
		Round: b.Round, RoundAt: b.Chain.RoundTime(b.Round).UTC().Format(time.RFC3339),
		Randomness: hexp(b.Randomness), Signature: hexp(b.Signature),
	}
}

func hexp(b []byte) *string {
	if b == nil {
		return nil
	}
	s := hex.EncodeToString(b)
	return &s
}

func timep(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// NewDrawTranscript renders lottery l's transcript.
func NewDrawTranscript(l flashline.Lottery, t flashline.DrawTranscript) DrawTranscript {
	v := DrawTranscript{
		SaleID: l.SaleID, Formula: DrawFormula, Status: "registering",
		RegistrationClosesAt: l.Rules.RegistrationClosesAt.UTC().Format(time.RFC3339Nano),
		DrawAt:               l.Rules.DrawAt.UTC().Format(time.RFC3339Nano),
		DrawnAt:              timep(l.DrawnAt),
		Units:                t.Units, Waitlist: t.Waitlist,
		Commitment: hex.EncodeToString(t.Commitment), Seed: hexp(t.Seed),
		RegistrantsRoot: hexp(t.Root), RegistrantCount: t.RegistrantCount,
		RegistrantsCommittedAt: timep(l.RegistrantsCommittedAt),
		Registrants:            []TranscriptRegistrant{}, Winners: []string{}, Waitlisted: []string{},
	}
	switch {
	case l.DrawnAt != nil:
		v.Status = "drawn"
	case t.Root != nil:
		v.Status = "committed"
	}
	if b := t.Beacon; b != nil {
		v.Beacon = transcriptBeacon(b)
		v.Note = fmt.Sprintf("The order is fixed by the store's seed (committed to at creation), the registrants' root (fixed when registration closed) and the beacon's round %d, published after the close: nobody, the store included, could know the order before that round.", b.Round)
	} else {
		v.Note = "NO BEACON: this deployment draws with the store's seed alone (committed to at creation, revealed at the draw). Whoever knew the seed before the close, the store included, could compute the order."
	}
	v.Note += " The transcript does not show that the registrants' root was published at the close: compare it with the root you saw then (verify-draw --root)."
	for i, r := range t.Ranked {
		v.Registrants = append(v.Registrants, TranscriptRegistrant{Registrant: r.String(), Rank: t.Ranks[i]})
	}
	if t.Version == flashline.DrawVersionVariants {
		v.Formula = DrawFormulaV3
		for _, x := range t.Variants {
			v.Variants = append(v.Variants, TranscriptVariant{SKU: x.SKU, Units: x.Units})
		}
		for i := range v.Registrants {
			v.Registrants[i].Variant = variantName(t.Choices[i])
			if i < len(t.Awards) {
				v.Registrants[i].Award = t.Awards[i]
			}
		}
	}
	for _, r := range t.Winners {
		v.Winners = append(v.Winners, r.String())
	}
	for _, r := range t.Waitlisted {
		v.Waitlisted = append(v.Waitlisted, r.String())
	}
	return v
}

// Domain reads the transcript back for flashline.VerifyDrawTranscript.
func (v DrawTranscript) Domain() (flashline.DrawTranscript, error) {
	var errs []error
	dec := func(name string, s *string) []byte {
		if s == nil {
			return nil
		}
		b, err := hex.DecodeString(*s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is not hex", name))
		}
		return b
	}
	reg := func(name, s string) flashline.Registrant {
		r, err := flashline.ParseRegistrant(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return r
	}
	closes, err := time.Parse(time.RFC3339Nano, v.RegistrationClosesAt)
	if err != nil {
		errs = append(errs, fmt.Errorf("registrationClosesAt: %w", err))
	}
	crowd := v.Formula == CrowdFormula
	v3 := v.Formula == DrawFormulaV3
	if !v3 && v.Variants != nil {
		errs = append(errs, fmt.Errorf("variants: listed under formula %s, which has none", v.Formula))
	}
	var preopen int64
	switch {
	case crowd && v.PreopenCount == nil:
		errs = append(errs, errors.New("preopenCount: missing from a waiting room's transcript"))
	case crowd:
		preopen = *v.PreopenCount
	}
	t := flashline.DrawTranscript{
		SaleID: v.SaleID, RegistrationClosesAt: closes, Units: v.Units, Waitlist: v.Waitlist,
		Commitment: dec("commitment", &v.Commitment), Seed: dec("seed", v.Seed),
		Root: dec("registrantsRoot", v.RegistrantsRoot), RegistrantCount: v.RegistrantCount,
		Crowd: crowd, PreopenCount: preopen,
	}
	if b := v.Beacon; b != nil {
		t.Beacon = &flashline.BeaconRecord{
			Chain: flashline.BeaconChain{PublicKey: dec("beacon.publicKey", &b.PublicKey),
				Genesis: time.Unix(b.GenesisTime, 0), Period: time.Duration(b.PeriodSeconds) * time.Second},
			BeaconRound: flashline.BeaconRound{Round: b.Round, Randomness: dec("beacon.randomness", b.Randomness),
				Signature: dec("beacon.signature", b.Signature)},
		}
	}
	for i, r := range v.Registrants {
		t.Ranked = append(t.Ranked, reg(fmt.Sprintf("registrants[%d]", i), r.Registrant))
		t.Ranks = append(t.Ranks, r.Rank)
		switch {
		case v3 && r.Variant == "":
			errs = append(errs, fmt.Errorf("registrants[%d].variant: missing under formula %s", i, v.Formula))
		case v3:
			choice := r.Variant
			if choice == flashline.AnyVariant {
				choice = ""
			}
			t.Choices = append(t.Choices, choice)
			t.Awards = append(t.Awards, r.Award)
		case r.Variant != "" || r.Award != "":
			errs = append(errs, fmt.Errorf("registrants[%d]: a variant under formula %s, which has none", i, v.Formula))
		}
	}
	if v3 {
		t.Version = flashline.DrawVersionVariants
		for _, x := range v.Variants {
			t.Variants = append(t.Variants, flashline.LotteryVariant{SKU: x.SKU, Units: x.Units})
		}
	}
	for i, r := range v.Winners {
		t.Winners = append(t.Winners, reg(fmt.Sprintf("winners[%d]", i), r))
	}
	for i, r := range v.Waitlisted {
		t.Waitlisted = append(t.Waitlisted, reg(fmt.Sprintf("waitlisted[%d]", i), r))
	}
	return t, errors.Join(errs...)
}

// variantName is a choice as the API names it: "any" for "".
func variantName(choice string) string {
	if choice == "" {
		return flashline.AnyVariant
	}
	return choice
}
