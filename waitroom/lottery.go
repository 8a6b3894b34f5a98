package waitroom

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/flashline/flashline"
)

// The lottery's draw (admission "lottery"): the registrations of a sale are
// put in the order of each customer's keyed draw, Draw(seed, sale,
// customer), ascending (ties, which need a 64-bit collision, by customer
// id); the first initial-stock of them win. The seed is the sale's draw_seed,
// committed to before the draw (DrawCommitment, draw.go, published on the policy) and
// revealed once it is due, so anyone can recompute the order.

// LotteryOrder returns customerIDs in draw order: by Draw(seed, saleID,
// customer), then by customer id. It does not modify customerIDs.
func LotteryOrder(seed []byte, saleID string, customerIDs []string) []string {
	type drawn struct {
		customer string
		draw     uint64
	}
	d := make([]drawn, len(customerIDs))
	for i, c := range customerIDs {
		d[i] = drawn{c, Draw(seed, saleID, c)}
	}
	slices.SortFunc(d, func(a, b drawn) int {
		return cmp.Or(cmp.Compare(a.draw, b.draw), cmp.Compare(a.customer, b.customer))
	})
	out := make([]string, len(d))
	for i := range d {
		out[i] = d[i].customer
	}
	return out
}

// RegistrationNonce is the nonce of the proof of work asked to register in
// a lottery: derived, like a ticket's (ChallengeNonce), from the signing key,
// here with the sale and the customer, so nothing is stored and every
// instance derives the same one.
func (k *Keyring) RegistrationNonce(saleID, customerID string) string {
	return k.keys[0].nonce(registrationChallengeID(saleID, customerID))
}

// VerifyRegistrationChallenge reports whether solution solves the
// registration challenge of (saleID, customerID) at the given difficulty, as
// VerifyChallenge does for a ticket (any key of the ring; bits <= 0: no
// challenge).
func (k *Keyring) VerifyRegistrationChallenge(saleID, customerID, solution string, bits int) bool {
	if bits <= 0 {
		return true
	}
	if bits > 8*sha256.Size || !validSolution(solution) {
		return false
	}
	id := registrationChallengeID(saleID, customerID)
	for _, key := range k.keys {
		if solves(key.nonce(id), solution, bits) {
			return true
		}
	}
	return false
}

// registrationChallengeID is what a registration's nonce is derived from;
// the "lottery" prefix and the NUL separator keep it apart from any ticket's
// admission id (22 base64url characters).
func registrationChallengeID(saleID, customerID string) string {
	return "lottery\x00" + saleID + "\x00" + customerID
}

// HumanDuration says secs in words ("10 minutes", "1 day"), as the policies
// do.
func HumanDuration(secs int) string { return humanDuration(secs) }

// LotteryEntry is one registration as the database records its outcome.
type LotteryEntry struct {
	CustomerID string
	State      flashline.RegistrationState
	Rank       int // 0: not drawn
}

// LotteryCheck is one registration as the lottery's audit sees it.
type LotteryCheck struct {
	LotteryEntry
	Draw uint64
	// DrawnRank is the registration's place recomputed from the seed.
	DrawnRank int
	// Problem is empty when the record agrees with the draw.
	Problem string
}

// LotteryAudit is the result of AuditLottery.
type LotteryAudit struct {
	Checks   []LotteryCheck // in recomputed draw order
	Promoted int            // waitlisted registrations that won a unit passed down
	Expired  int            // winners whose window ended without a purchase
}

// Problems counts the registrations whose outcome disagrees with the draw.
func (a LotteryAudit) Problems() int {
	n := 0
	for _, c := range a.Checks {
		if c.Problem != "" {
			n++
		}
	}
	return n
}

// AuditLottery recomputes a lottery's draw from its revealed seed and checks
// every registration's recorded rank and outcome: the first units ranks won
// (and may since have expired); the rest lost, or, with a waitlist, wait in
// draw order, the units passed down going to the next in that order (nobody
// waitlisted ranks before someone promoted) and never more of them than
// windows expired.
func AuditLottery(seed []byte, saleID string, units int, waitlist bool, entries []LotteryEntry) LotteryAudit {
	byCustomer := make(map[string]LotteryEntry, len(entries))
	customers := make([]string, len(entries))
	for i, e := range entries {
		byCustomer[e.CustomerID] = e
		customers[i] = e.CustomerID
	}
	order := LotteryOrder(seed, saleID, customers)
	a := LotteryAudit{Checks: make([]LotteryCheck, len(order))}
	firstWaiting := 0 // the best rank still waitlisted
	for i, c := range order {
		e := byCustomer[c]
		check := LotteryCheck{LotteryEntry: e, Draw: Draw(seed, saleID, c), DrawnRank: i + 1}
		won := e.State == flashline.RegistrationWon || e.State == flashline.RegistrationExpired
		switch {
		case e.State == flashline.RegistrationRegistered:
			check.Problem = "not drawn"
		case e.Rank != check.DrawnRank:
			check.Problem = fmt.Sprintf("recorded rank %d, the draw gives %d", e.Rank, check.DrawnRank)
		case check.DrawnRank <= units && !won:
			check.Problem = fmt.Sprintf("ranked within the %d units but %s", units, e.State)
		case check.DrawnRank > units && !waitlist && e.State != flashline.RegistrationLost:
			check.Problem = fmt.Sprintf("ranked past the %d units with no waitlist but %s", units, e.State)
		case check.DrawnRank > units && won && firstWaiting > 0:
			check.Problem = fmt.Sprintf("promoted while rank %d still waits", firstWaiting)
		}
		if e.State == flashline.RegistrationExpired {
			a.Expired++
		}
		if check.DrawnRank > units && won {
			a.Promoted++
		}
		if e.State == flashline.RegistrationWaitlisted && firstWaiting == 0 {
			firstWaiting = check.DrawnRank
		}
		a.Checks[i] = check
	}
	if a.Promoted > a.Expired && len(a.Checks) > 0 {
		a.Checks[len(a.Checks)-1].Problem += fmt.Sprintf(" (%d promoted for %d windows expired)", a.Promoted, a.Expired)
	}
	return a
}
