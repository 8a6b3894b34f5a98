package flashline

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"
)

// Draw is the customer's fixed place in a sale's pre-open shuffle: the first 8
// bytes of SHA-256(seed || saleID || 0x00 || customerID) as a big-endian
// uint64. seed is the sale's random secret, stored with the sale: without it
// nobody can compute a draw ahead of time, and asking again gives the same
// draw.
func Draw(seed []byte, saleID, customerID string) uint64 {
	// One buffer on the stack, hashed at once: a hash.Hash and the ids
	// copied into it were three allocations per new pre-open ticket.
	var buf [320]byte
	b := append(append(append(append(buf[:0], seed...), saleID...), 0), customerID...)
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

// DrawRank is the place a draw takes in a pre-open line of preopenCount
// (at least 1) under randomized_at_open: 1 + floor(draw / 2^64 ×
// preopenCount), in the units of the watermark.
func DrawRank(draw uint64, preopenCount int64) int64 {
	n := max(preopenCount, 1)
	hi, _ := bits.Mul64(draw, uint64(n)) // floor(draw × n / 2^64), exactly
	return 1 + int64(hi)
}

// The auditable draw. A sale's draw seed (sales.draw_seed) is secret until
// the sale opens: whoever knew it could compute every customer's draw ahead
// of time. Before the open the sale publishes only a commitment to it, the
// hex SHA-256 of the seed; from the open the seed itself. Anyone can then
// check that the seed revealed is the one committed to, recompute every
// customer's draw (Draw) from (seed, sale, customer), and check that nobody
// was admitted before the line reached their draw's place (AuditDraw).
// `flashline sale verify-draw` does it from the shell; a lottery built on the
// same seed publishes and verifies it the same way.

// ErrDrawMismatch is a revealed seed that is not the one committed to, or a
// commitment or seed that is not well formed.
var ErrDrawMismatch = errors.New("draw seed does not match its commitment")

// DrawCommitment is the published commitment to a draw seed: the lowercase
// hex SHA-256 of the seed's bytes.
func DrawCommitment(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

// DrawDisclosure is what a sale publishes of its draw: always the commitment,
// and the seed (nil before) once it is revealed.
type DrawDisclosure struct {
	Commitment string
	Seed       []byte
}

// DiscloseDraw is the disclosure of seed: the commitment, and the seed itself
// when revealed is set (the sale has opened: the pre-open draw is fixed).
func DiscloseDraw(seed []byte, revealed bool) DrawDisclosure {
	d := DrawDisclosure{Commitment: DrawCommitment(seed)}
	if revealed {
		d.Seed = append([]byte(nil), seed...)
	}
	return d
}

// VerifyDrawSeed checks a published commitment and revealed seed, both in
// hex as the policy publishes them, and returns the seed's bytes. Errors wrap
// ErrDrawMismatch.
func VerifyDrawSeed(commitment, seedHex string) ([]byte, error) {
	want, err := hex.DecodeString(commitment)
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("%w: the commitment must be %d hex digits", ErrDrawMismatch, 2*sha256.Size)
	}
	seed, err := hex.DecodeString(seedHex)
	if err != nil || len(seed) == 0 {
		return nil, fmt.Errorf("%w: the seed must be hex digits", ErrDrawMismatch)
	}
	got := sha256.Sum256(seed)
	if subtle.ConstantTimeCompare(got[:], want) != 1 {
		return nil, fmt.Errorf("%w: SHA-256(seed) is %x, the commitment %s", ErrDrawMismatch, got, commitment)
	}
	return seed, nil
}

// DrawRecord is what the database records of a sale's admissions, as an
// audit reads it: the room's counters and every reservation made with an
// admission token.
type DrawRecord struct {
	SaleID   string
	Fairness Fairness
	// PreopenCount is the number of places handed out before the open (-1:
	// not frozen yet, the room has not opened).
	PreopenCount int64
	// AdmittedThrough is the watermark: ranks up to it may be admitted.
	AdmittedThrough int64
	Admitted        []AdmittedCustomer // in the order they reserved
	// FinalSeed is the seed the committed crowd is ranked by (nil: not
	// committed, or frozen before commitments existed: ranked by Draw).
	FinalSeed []byte
}

// AdmittedCustomer is one reservation made with an admission token.
type AdmittedCustomer struct {
	CustomerID  string
	AdmissionID string
	ReservedAt  time.Time
}

// DrawCheck is one admitted customer as the audit sees them.
type DrawCheck struct {
	AdmittedCustomer
	Draw uint64
	// Rank is the customer's place in the pre-open line by their draw
	// (DrawRank); 0 when there is no pre-open line.
	Rank int64
	// Problem is empty when the admission is consistent with the draw.
	Problem string
}

// DrawAudit is the result of AuditDraw.
type DrawAudit struct {
	Checks []DrawCheck
	// Decisive says whether the record can show an admission out of the
	// draw's order: only while the watermark has not passed the pre-open
	// line (once it has, everyone in that line was eligible, and a later
	// arrival's place is in their ticket, which is not recorded).
	Decisive bool
	Note     string
}

// Problems counts the admissions found out of the draw's order.
func (a DrawAudit) Problems() int {
	n := 0
	for _, c := range a.Checks {
		if c.Problem != "" {
			n++
		}
	}
	return n
}

// AuditDraw recomputes every admitted customer's draw from seed and checks it
// against the record: under randomized_at_open the pre-open crowd is placed by
// the draw (ranks 1..PreopenCount) and everyone arriving later after them, and
// the watermark only grows, so while it has not passed the pre-open line
// (AdmittedThrough <= PreopenCount) an admitted customer must hold a draw
// ranked within it; anyone else was let in out of order.
func AuditDraw(seed []byte, rec DrawRecord) DrawAudit {
	a := DrawAudit{Checks: make([]DrawCheck, len(rec.Admitted))}
	switch {
	case rec.Fairness != FairnessRandomizedAtOpen:
		a.Note = fmt.Sprintf("the room orders by %s: the draw does not decide the order", rec.Fairness)
	case rec.PreopenCount < 0:
		a.Note = "the room has not opened: the pre-open line is not fixed yet"
	case rec.PreopenCount == 0:
		a.Note = "nobody joined before the open: there was no draw to follow"
	case rec.AdmittedThrough > rec.PreopenCount:
		a.Note = fmt.Sprintf("the line reached past the pre-open crowd (watermark %d, %d joined before the open): everyone drawn was eligible",
			rec.AdmittedThrough, rec.PreopenCount)
	default:
		a.Decisive = true
		a.Note = fmt.Sprintf("the line reached rank %d of the %d drawn before the open: every admission must hold a draw ranked within it",
			rec.AdmittedThrough, rec.PreopenCount)
	}
	for i, c := range rec.Admitted {
		d := Draw(seed, rec.SaleID, c.CustomerID)
		check := DrawCheck{AdmittedCustomer: c, Draw: d}
		switch {
		case rec.PreopenCount > 0 && rec.FinalSeed != nil:
			var f [32]byte
			copy(f[:], rec.FinalSeed)
			check.Rank = CrowdRank(f, RegistrantOf(rec.SaleID, c.CustomerID), rec.PreopenCount)
		case rec.PreopenCount > 0:
			check.Rank = DrawRank(d, rec.PreopenCount)
		}
		if a.Decisive && check.Rank > rec.AdmittedThrough {
			check.Problem = fmt.Sprintf("draw rank %d is beyond the watermark %d", check.Rank, rec.AdmittedThrough)
		}
		a.Checks[i] = check
	}
	return a
}

// The lottery's draw (admission "lottery"): the registrations of a sale are
// put in the order of each customer's keyed draw, Draw(seed, sale,
// customer), ascending (ties, which need a 64-bit collision, by customer
// id); the first initial-stock of them win. The seed is the sale's draw_seed,
// committed to before the draw (DrawCommitment, published on the policy) and
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

// LotteryEntry is one registration as the database records its outcome.
type LotteryEntry struct {
	CustomerID string
	State      RegistrationState
	Rank       int // 0: not drawn
	// Choice is the variant the registration named ("": any, or a lottery
	// without variants) and WonVariant the one it holds ("": none).
	Choice, WonVariant string
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
		won := e.State == RegistrationWon || e.State == RegistrationExpired
		switch {
		case e.State == RegistrationRegistered:
			check.Problem = "not drawn"
		case e.Rank != check.DrawnRank:
			check.Problem = fmt.Sprintf("recorded rank %d, the draw gives %d", e.Rank, check.DrawnRank)
		case check.DrawnRank <= units && !won:
			check.Problem = fmt.Sprintf("ranked within the %d units but %s", units, e.State)
		case check.DrawnRank > units && !waitlist && e.State != RegistrationLost:
			check.Problem = fmt.Sprintf("ranked past the %d units with no waitlist but %s", units, e.State)
		case check.DrawnRank > units && won && firstWaiting > 0:
			check.Problem = fmt.Sprintf("promoted while rank %d still waits", firstWaiting)
		}
		if e.State == RegistrationExpired {
			a.Expired++
		}
		if check.DrawnRank > units && won {
			a.Promoted++
		}
		if e.State == RegistrationWaitlisted && firstWaiting == 0 {
			firstWaiting = check.DrawnRank
		}
		a.Checks[i] = check
	}
	if a.Promoted > a.Expired && len(a.Checks) > 0 {
		a.Checks[len(a.Checks)-1].Problem += fmt.Sprintf(" (%d promoted for %d windows expired)", a.Promoted, a.Expired)
	}
	return a
}
