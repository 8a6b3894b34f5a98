package postgres

import (
	"context"
	"time"

	"github.com/flashline/flashline"
)

// Reserve runs one reservation attempt, coalesced with concurrent attempts
// for the same sale (coalescer.go queues them, batch.go runs a batch as one
// transaction; sql/queries/reserve.sql has the statements and why they are
// safe under concurrency).
func (s *Store) Reserve(ctx context.Context, req flashline.ReserveRequest) (flashline.ReserveResult, error) {
	deadline := time.Now().Add(s.opts.ReserveTimeout)
	if req.AdmissionID != "" {
		// Within the attempt's deadline too: the request's context has
		// none, and a new connection's attempt may run for
		// DefaultConnectTimeout.
		lctx, cancel := context.WithDeadline(ctx, deadline)
		err := s.limitAdmitted(lctx, req)
		cancel()
		if err != nil {
			return flashline.ReserveResult{}, err
		}
	}
	// The attempt is detached from the client: a mobile client that gives up
	// after a few milliseconds must not abort the transaction half way, or
	// its retry would do the work again instead of replaying the answer. An
	// attempt whose client has left before its batch begins is dropped
	// instead (coalescer.take): it has done nothing, and run later it could
	// take a unit after the client's retry was told "no" elsewhere.
	c := &call{req: req, client: ctx, deadline: deadline, done: make(chan struct{})}
	return s.batches.submit(c)
}

// QueueFull reports whether a reservation of saleID would be refused at once
// (ErrOverloaded) because the sale's purchase queue on this instance is
// full (Options.QueueRounds): a peek, without queueing (flashline.Queues: the refusals ask it
// before the HTTP layer has paid for the body and the token).
func (s *Store) QueueFull(saleID string) bool { return s.batches.full(saleID) }

// Reserve attempts with a valid admission token (waiting-room sales) are
// rate limited per account and per payment instrument, across instances, on
// the purchase path's pool. The check sits here, behind the sale cache
// (package salecache, in front of this Store), so that a sold-out or closed
// sale refuses from memory without this write.
const (
	reserveWindow         = 10 * time.Second
	reservesPerAccount    = 10
	reservesPerInstrument = 20
)

func (s *Store) limitAdmitted(ctx context.Context, req flashline.ReserveRequest) error {
	if err := rateLimit(ctx, s.sale, "reserve", req.SaleID+"\n"+req.CustomerID, reserveWindow, reservesPerAccount); err != nil {
		return err
	}
	if req.PaymentInstrument == "" {
		return nil
	}
	return rateLimit(ctx, s.sale, "reserve-instrument", req.SaleID+"\n"+req.PaymentInstrument, reserveWindow, reservesPerInstrument)
}

// storedReceipt is the answer a stored key replays: its body, for a key
// stored before migration 000015, or else its receipt made again from its
// reservation's id, sale and quantity, the variant the request names (the
// key's fingerprint holds it: a replay names the same one) and the expiry
// the key kept (an extension moves the reservation's own), the same bytes
// as the first answer's: flashline.NewReceipt of the same values.
func storedReceipt(body []byte, reservationID, saleID string, quantity int32, variant string, expiresAt *time.Time) []byte {
	if body != nil || expiresAt == nil { // the keys' CHECKs: one or the other
		return body
	}
	return flashline.NewReceipt(flashline.Reservation{ID: reservationID, SaleID: saleID, Quantity: int(quantity),
		Variant: variant, State: flashline.ReservationPending, ExpiresAt: *expiresAt}).Bytes()
}
