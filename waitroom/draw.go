package waitroom

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/flashline/flashline"
)

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
	Fairness flashline.Fairness
	// PreopenCount is the number of places handed out before the open (-1:
	// not frozen yet, the room has not opened).
	PreopenCount int64
	// AdmittedThrough is the watermark: ranks up to it may be admitted.
	AdmittedThrough int64
	Admitted        []AdmittedCustomer // in the order they reserved
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
	// (Rank of a pre-open ticket); 0 when there is no pre-open line.
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
	case rec.Fairness != flashline.FairnessRandomizedAtOpen:
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
		if rec.PreopenCount > 0 {
			check.Rank = Rank(Ticket{PreOpen: true, Draw: d, Position: 1}, flashline.FairnessRandomizedAtOpen, rec.PreopenCount)
		}
		if a.Decisive && check.Rank > rec.AdmittedThrough {
			check.Problem = fmt.Sprintf("draw rank %d is beyond the watermark %d", check.Rank, rec.AdmittedThrough)
		}
		a.Checks[i] = check
	}
	return a
}
