package handlers

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

type reserveRequest struct {
	Quantity *int `json:"quantity"`
	// Variant is the SKU of the variant to reserve, for a sale with
	// variants (the purchase path refuses it missing there, and present
	// for a sale without).
	Variant string `json:"variant"`
	// PaymentInstrument is what older clients send: checked as before (at
	// most 255 bytes of text) and ignored. The instrument that counts is
	// the token's (Actor.PaymentInstrument) and, at payment, the one the
	// payment provider reports.
	PaymentInstrument string `json:"paymentInstrument"`
}

// validIdempotencyKey: 1-255 printable ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > flashline.MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// fingerprint identifies what a reserve request asks for, so that the same
// Idempotency-Key with a different request can be told apart from a retry.
// A variant is appended only when named, so that a sale without variants
// keeps the fingerprints its keys were stored with.
func fingerprint(saleID string, quantity int, instrument, variant string) []byte {
	b := fmt.Appendf(nil, "reserve\x00%s\x00%d\x00%s", saleID, quantity, instrument)
	if variant != "" {
		b = fmt.Appendf(b, "\x00variant\x00%s", variant)
	}
	h := sha256.Sum256(b)
	return h[:]
}

// handleReserve is POST /sales/{saleId}/reservations. Everything a client
// controls is read and checked before the request takes a slot of the
// admission limiter (the body with a short deadline, the headers, the
// instrument); only then does it wait for the purchase path. keyring verifies
// admission tokens (signature, expiry, sale, customer) without a database
// round trip; single use is the database's part. reservedWith, when not
// nil, hears of each reservation made with an admission (the waiting room's
// analytics: waitroom.Room.Reserved).
func handleReserve(store flashline.Store, keyring *roomtoken.Keyring, limiter *loadshed.Limiter, now func() time.Time, reservedWith func(roomtoken.Admission), logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		actor := actorOf(c)
		key, present := c.Request.Header["Idempotency-Key"]
		if !present || len(key) == 0 || key[0] == "" {
			writeError(c, logger, flashline.ErrIdempotencyKeyMissing)
			return
		}
		if len(key) > 1 || !validIdempotencyKey(key[0]) {
			writeError(c, logger, flashline.ErrInvalidIdempotencyKey)
			return
		}
		var body reserveRequest
		if err := decodeJSON(c, &body); err != nil {
			writeError(c, logger, err)
			return
		}
		quantity := 1
		if body.Quantity != nil {
			quantity = *body.Quantity
		}
		if quantity < 1 {
			writeError(c, logger, flashline.Invalid("quantity must be at least 1"))
			return
		}
		if _, err := flashline.NormalizeInstrument(body.PaymentInstrument); err != nil {
			writeError(c, logger, err)
			return
		}
		if body.Variant != "" && !flashline.ValidVariantSKU(body.Variant) {
			writeError(c, logger, flashline.Invalid("variant must be a variant's SKU: 1-64 letters, digits, '.', '_' or '-'"))
			return
		}
		instrument := actor.PaymentInstrument // the token's, never the body's
		saleID := c.Param("saleId")
		token := c.GetHeader("X-Admission-Token")
		var admissionID string
		var admission roomtoken.Admission
		if token != "" && keyring != nil {
			a, err := keyring.ParseAdmission(token)
			if err == nil && a.Check(saleID, actor.CustomerID, now()) == nil {
				admissionID, admission = a.ID, a
			}
		}

		// A lottery winner's admission names the variant won (a signed
		// claim): another is refused here, from the token alone.
		if body.Variant != "" && admission.Variant != "" && body.Variant != admission.Variant {
			writeError(c, logger, flashline.ErrVariantNotWon)
			return
		}

		ctx := c.Request.Context()
		slot, err := limiter.Acquire(ctx, loadshed.PriorityReserve)
		if err != nil {
			// Shed, or the client left while it waited (client_closed).
			writeError(c, logger, errors.Join(flashline.ErrOverloaded, err))
			return
		}
		res, err := store.Reserve(ctx, flashline.ReserveRequest{
			SaleID:            saleID,
			CustomerID:        actor.CustomerID,
			IdempotencyKey:    key[0],
			Quantity:          quantity,
			Variant:           body.Variant,
			AdmissionToken:    token,
			AdmissionID:       admissionID,
			AdmissionVariant:  admission.Variant,
			PaymentInstrument: instrument,
			AccountCreated:    actor.AccountCreated,
			Fingerprint:       fingerprint(saleID, quantity, instrument, body.Variant),
		})
		// The limit follows what the purchase path reports of its own
		// queues (the store's OnConnWait), not the outcome of each request:
		// every answer is Success, but for a failure that says nothing about
		// the path's speed (unreachable database, internal error, a client
		// that went away).
		slot.Release(reserveOutcome(ctx, err))
		if errors.Is(err, flashline.ErrLimitReached) && ctx.Err() == nil {
			// The customer's own reservation holds the limit: say which, so
			// a client that lost it can pay it. Read after the refusal, and
			// only for it (one indexed row); a hold that ended meanwhile
			// leaves the plain refusal, and the next attempt reserves.
			if held, herr := store.CustomerReservation(ctx, saleID, actor); herr == nil {
				writeLimitReached(c, held)
				return
			}
		}
		if err != nil {
			writeError(c, logger, err)
			return
		}
		// Only answers that took stock are stored, so a replay is a 201 too.
		if res.Replayed {
			c.Header("Idempotent-Replayed", "true")
		} else if admissionID != "" && reservedWith != nil {
			reservedWith(admission)
		}
		writeRaw(c, http.StatusCreated, res.Receipt)
	}
}

// writeLimitReached is 409 limit_reached with the reservation that holds
// the limit, and a message that names what it is: a hold to pay, or an
// order.
func writeLimitReached(c *gin.Context, held flashline.Reservation) {
	msg := "you already hold a reservation in this sale: it is in this answer's reservation, to pay before it expires"
	if held.State == flashline.ReservationConfirmed {
		msg = "you already have an order in this sale: it is in this answer's reservation"
	}
	view := NewReservationView(held)
	c.Set(outcomeKey, "limit_reached")
	c.AbortWithStatusJSON(http.StatusConflict, api.LimitReached{
		Error:       api.ErrorDetail{Code: "limit_reached", Message: msg},
		Reservation: &view,
	})
}

func reserveOutcome(ctx context.Context, err error) loadshed.Outcome {
	if ctx.Err() != nil || (err != nil && lookupError(err).status >= 500) {
		return loadshed.Dropped
	}
	return loadshed.Success
}

// handleGetReservation is GET /reservations/{reservationId}.
func handleGetReservation(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		r, err := store.Reservation(c.Request.Context(), c.Param("reservationId"), actorOf(c))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, NewReservationView(r))
	}
}

// handleCustomerReservation is GET /sales/{saleId}/reservation: the
// caller's own active reservation in the sale (a hold or an order), 404
// when they have none.
func handleCustomerReservation(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		r, err := store.CustomerReservation(c.Request.Context(), c.Param("saleId"), actorOf(c))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, NewReservationView(r))
	}
}

// handleConfirm is POST /reservations/{reservationId}/confirm.
func handleConfirm(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		r, err := store.Confirm(c.Request.Context(), c.Param("reservationId"), actorOf(c))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, api.Order{OrderID: r.OrderID, ReservationID: r.ID, Variant: r.Variant})
	}
}

// handleCancel is POST /reservations/{reservationId}/cancel.
func handleCancel(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		r, err := store.Cancel(c.Request.Context(), c.Param("reservationId"), actorOf(c))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, NewReservationView(r))
	}
}
