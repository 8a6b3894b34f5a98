package api

// The lottery's JSON shapes: a lottery sale's rules and counts, a
// registration, the published policy (docs/lottery.md).

// Lottery is a lottery sale's rules and counts, on the admin's sale view.
type Lottery struct {
	RegistrationOpensAt   string        `json:"registrationOpensAt"`
	RegistrationClosesAt  string        `json:"registrationClosesAt"`
	DrawAt                string        `json:"drawAt"`
	PurchaseWindowSeconds int           `json:"purchaseWindowSeconds"`
	Waitlist              bool          `json:"waitlist"`
	DrawnAt               *string       `json:"drawnAt"`
	Registrations         LotteryCounts `json:"registrations"`
}

// LotteryCounts counts a lottery's registrations by state.
type LotteryCounts struct {
	Total      int `json:"total"`
	Registered int `json:"registered"`
	Won        int `json:"won"`
	Lost       int `json:"lost"`
	Waitlisted int `json:"waitlisted"`
	Expired    int `json:"expired"`
}

// Registration is a customer's registration.
type Registration struct {
	RegistrationID string `json:"registrationId,omitempty"`
	State          string `json:"state"`
	DrawRank       int    `json:"drawRank,omitempty"`
	// AdmissionToken: a winner's, to send as X-Admission-Token with the
	// reservation, until PurchaseWindowEndsAt.
	AdmissionToken       string  `json:"admissionToken,omitempty"`
	PurchaseWindowEndsAt *string `json:"purchaseWindowEndsAt,omitempty"`
	// For a customer not registered: whether registration is open, and the
	// proof of work to solve to register.
	RegistrationOpen *bool      `json:"registrationOpen,omitempty"`
	Challenge        *Challenge `json:"challenge,omitempty"`
	// Registrant is the registrant's hashed id in the lottery, and
	// RegistrantLeaf its leaf in the registrants' Merkle tree committed at
	// the close (GET /sales/{saleId}/draw lists every registrant: the
	// inclusion proof).
	Registrant     string `json:"registrant,omitempty"`
	RegistrantLeaf string `json:"registrantLeaf,omitempty"`
	// Variant is, in a lottery with variants, the variant's SKU the
	// registration names, or "any"; WonVariant the variant won, the one
	// the admission token reserves (absent: none, or no variants).
	Variant    string `json:"variant,omitempty"`
	WonVariant string `json:"wonVariant,omitempty"`
}

// LotteryPolicy is a lottery sale's published rules and its draw: the
// commitment (hex SHA-256 of the seed) from the start, the seed (hex) once
// the draw is due, so that anyone can recompute the order
// (`flashline sale verify-draw`).
type LotteryPolicy struct {
	Policy                string  `json:"policy"` // "lottery"
	Description           string  `json:"description"`
	RegistrationOpensAt   string  `json:"registrationOpensAt"`
	RegistrationClosesAt  string  `json:"registrationClosesAt"`
	DrawAt                string  `json:"drawAt"`
	PurchaseWindowSeconds int     `json:"purchaseWindowSeconds"`
	Waitlist              bool    `json:"waitlist"`
	Units                 int     `json:"units"`
	DrawAlgorithm         string  `json:"drawAlgorithm"`
	DrawCommitment        string  `json:"drawCommitment"`
	DrawSeed              *string `json:"drawSeed"`
	DrawnAt               *string `json:"drawnAt"`
	Title                 string  `json:"title"`
	ImageURL              *string `json:"imageUrl"`
	// RegistrantsRoot is the registrants' Merkle root, fixed when
	// registration closes (null before).
	RegistrantsRoot *string `json:"registrantsRoot"`
	// Beacon is the public randomness beacon's round the draw waits for
	// (null: this deployment has none, and Description says so).
	Beacon *TranscriptBeacon `json:"beacon"`
	// Transcript is where the draw's transcript is (GET, no authentication).
	Transcript string `json:"transcript"`
	// Variants are a lottery with variants' (absent without), in the
	// sale's order: what a registration may name, besides "any".
	Variants []LotteryPolicyVariant `json:"variants,omitempty"`
}

// LotteryPolicyVariant is one variant of a lottery: its SKU, its title
// and its units in the draw.
type LotteryPolicyVariant struct {
	SKU   string `json:"sku"`
	Title string `json:"title"`
	Units int    `json:"units"`
}
