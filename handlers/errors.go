package handlers

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
)

// apiError is one row of the contract's error table.
type apiError struct {
	status  int
	code    string
	message string
	// retryAfter, when set, is sent as Retry-After (seconds).
	retryAfter int
}

// errorTable maps each domain error to its HTTP status and code. It is the only
// place that does.
var errorTable = []struct {
	err error
	api apiError
}{
	{flashline.ErrNotFound, apiError{status: 404, code: "not_found", message: "not found"}},
	{flashline.ErrVariantSoldOut, apiError{status: 409, code: "variant_sold_out", message: "this variant is sold out; others of the sale may not be (GET /sales/{saleId}/status lists them)"}},
	{flashline.ErrSoldOut, apiError{status: 409, code: "sold_out", message: "the sale is sold out"}},
	{flashline.ErrLimitReached, apiError{status: 409, code: "limit_reached", message: "you already hold a reservation or have an order in this sale (GET /sales/{saleId}/reservation gives it)"}},
	{flashline.ErrSaleNotOpen, apiError{status: 409, code: "sale_not_open", message: "the sale is not open"}},
	{flashline.ErrRequestInProgress, apiError{status: 409, code: "request_in_progress", message: "a request with this Idempotency-Key is still being processed; retry shortly", retryAfter: 1}},
	{flashline.ErrIdempotencyKeyReused, apiError{status: 422, code: "idempotency_key_reused", message: "this Idempotency-Key was used with a different request"}},
	{flashline.ErrIdempotencyKeyMissing, apiError{status: 400, code: "idempotency_key_missing", message: "the Idempotency-Key header is required"}},
	{flashline.ErrInvalidIdempotencyKey, apiError{status: 400, code: "invalid_request", message: flashline.ErrInvalidIdempotencyKey.Error()}},
	{flashline.ErrQuantityAboveLimit, apiError{status: 400, code: "invalid_request", message: "quantity is above the sale's per-customer limit"}},
	{flashline.ErrReservationExpired, apiError{status: 409, code: "reservation_expired", message: "the reservation has expired"}},
	{flashline.ErrReservationCancelled, apiError{status: 409, code: "reservation_cancelled", message: "the reservation was cancelled"}},
	{flashline.ErrReservationConfirmed, apiError{status: 409, code: "reservation_confirmed", message: "the reservation is already confirmed"}},
	{flashline.ErrInvalidTransition, apiError{status: 409, code: "invalid_transition", message: "the sale cannot make that change from its current state"}},
	{flashline.ErrInvariantBroken, apiError{status: 409, code: "invariant_broken", message: "the sale's stock does not add up; it stays paused"}},
	{flashline.ErrAdmissionRequired, apiError{status: 403, code: "admission_required", message: "this sale admits through its waiting room; an X-Admission-Token is required"}},
	{flashline.ErrVariantNotWon, apiError{status: 403, code: "variant_not_won", message: "your lottery win is for another variant: reserve the variant you won (wonVariant of GET /sales/{saleId}/registration)"}},
	{flashline.ErrAdmissionInvalid, apiError{status: 403, code: "admission_invalid", message: "the admission token is not valid for this request"}},
	{flashline.ErrInstrumentLimitReached, apiError{status: 409, code: "limit_reached", message: "this payment instrument holds the most units the sale allows one instrument"}},
	{flashline.ErrAccountTooNew, apiError{status: 403, code: "account_too_new", message: "your account is too new to take part in this sale"}},
	{flashline.ErrNoWaitingRoom, apiError{status: 409, code: "no_waiting_room", message: "this sale has no waiting room; reserve directly"}},
	{flashline.ErrPaymentRequired, apiError{status: 409, code: "payment_required", message: "this sale's reservations are confirmed by the payment: the order exists once the payment succeeds"}},
	{flashline.ErrReservationVoided, apiError{status: 409, code: "reservation_voided", message: "the order was voided"}},
	{flashline.ErrReservationNotConfirmed, apiError{status: 409, code: "reservation_not_confirmed", message: "only a confirmed order can be voided; cancel a pending reservation instead"}},
	{flashline.ErrExtensionLimit, apiError{status: 409, code: "extension_limit_reached", message: "the reservation has been extended by a day already"}},
	{flashline.ErrRebuildRunning, apiError{status: 409, code: "rebuild_in_progress", message: "another rebuild of this sale's gate is running: wait for its answer, then see the gate (GET /admin/sales/{saleId})"}},
	{flashline.ErrSaleNotPaused, apiError{status: 409, code: "sale_not_paused", message: "the sale must be paused first"}},
	{flashline.ErrPaymentsNotConfigured, apiError{status: 409, code: "payments_not_configured", message: "this service has no payment webhook secret (FLASHLINE_PAYMENT_WEBHOOK_SECRET): it takes no payment events, and sales need \"confirmation\": \"customer\""}},
	{flashline.ErrProviderNotConfigured, apiError{status: 409, code: "payments_not_configured", message: "this service has no secret for this payment provider's webhook (FLASHLINE_STRIPE_WEBHOOK_SECRET, FLASHLINE_ADYEN_HMAC_KEY)"}},
	{flashline.ErrPaymentReferenceUsed, apiError{status: 409, code: "payment_reference_used", message: "this payment reference confirmed another order already"}},
	{flashline.ErrUnknownReservation, apiError{status: 422, code: "unknown_reservation", message: "the event's data.reservationId names no reservation"}},
	{flashline.ErrEventIDReused, apiError{status: 422, code: "event_id_reused", message: "this event id was delivered before with a different body"}},
	{flashline.ErrSignatureInvalid, apiError{status: 400, code: "signature_invalid", message: "the signature (Flashline-Signature, Stripe-Signature, or an Adyen item's hmacSignature) is missing, malformed, or does not sign this body"}},
	{flashline.ErrSignatureExpired, apiError{status: 400, code: "signature_expired", message: "the signature's timestamp is further from now than the tolerance (5 minutes unless configured)"}},
	{flashline.ErrRateLimited, apiError{status: 429, code: "rate_limited", message: "too many requests from this account; retry later", retryAfter: 5}},
	{flashline.ErrTooManyInFlight, apiError{status: 429, code: "rate_limited", message: "this account has too many requests in flight; wait for their answers", retryAfter: 1}},
	{flashline.ErrAddressInFlight, apiError{status: 429, code: "rate_limited", message: "this address has too many requests in flight; wait for their answers", retryAfter: 1}},
	{flashline.ErrUnauthenticated, apiError{status: 401, code: "unauthenticated", message: "missing or invalid credentials"}},
	{flashline.ErrForbidden, apiError{status: 403, code: "forbidden", message: "not allowed for this caller"}},
	{flashline.ErrOverloaded, apiError{status: 503, code: "overloaded", message: "too busy right now; retry shortly", retryAfter: 1}},
	{flashline.ErrUnavailable, apiError{status: 503, code: "sale_paused_fail_closed", message: "stock cannot be counted right now; the sale is paused for this request", retryAfter: 2}},
	{flashline.ErrRegistrationClosed, apiError{status: 409, code: "registration_closed", message: "registration for this lottery is not open"}},
	{flashline.ErrInstrumentRegistered, apiError{status: 409, code: "instrument_already_registered", message: "this payment instrument is registered in this lottery by another account"}},
	{flashline.ErrNoLottery, apiError{status: 409, code: "no_lottery", message: "this sale is not a lottery"}},
	{flashline.ErrChallengeFailed, apiError{status: 403, code: "challenge_failed", message: "solve the registration's proof of work (GET /sales/{id}/registration gives it) and send it as solution"}},
}

var errInternal = apiError{status: 500, code: "internal", message: "internal error"}

// lookupError finds the contract's answer for err.
func lookupError(err error) apiError {
	var invalid *flashline.InvalidError
	if errors.As(err, &invalid) {
		return apiError{status: 400, code: "invalid_request", message: invalid.Reason}
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row.api
		}
	}
	return errInternal
}

// writeError answers with the contract's error for err. A 500 tells the client
// "internal error" and logs the cause; nothing else logs at error level.
func writeError(c *gin.Context, logger *slog.Logger, err error) {
	e := lookupError(err)
	if logger == nil {
		logger = slog.Default()
	}
	if flashline.ClientGone(c.Request.Context(), err) {
		// The client went away (an edge's proxy that gave up, a mobile
		// client's timeout, a retry storm's abandoned attempt) and took the
		// request's context with it: nobody reads this answer, and nothing
		// is wrong here, whatever else err says. Counted as client_closed,
		// never as failing closed (the critical alert) nor an internal
		// error; nginx's 499, written only if nothing was.
		c.Set(outcomeKey, outcomeClientClosed)
		logger.DebugContext(c.Request.Context(), "handlers: the client went away",
			"method", c.Request.Method, "path", c.FullPath(), "err", err)
		if !c.Writer.Written() {
			c.AbortWithStatusJSON(statusClientClosed, api.ErrorBody{Error: api.ErrorDetail{Code: outcomeClientClosed, Message: "the client closed the request"}})
		}
		c.Abort()
		return
	}
	outcome := e.code
	switch {
	case e.status == http.StatusInternalServerError:
		logger.ErrorContext(c.Request.Context(), "handlers: internal error",
			"method", c.Request.Method, "path", c.FullPath(), "err", err)
	case errors.Is(err, flashline.ErrUnavailable):
		logger.WarnContext(c.Request.Context(), "handlers: failing closed",
			"method", c.Request.Method, "path", c.FullPath(), "err", err)
	}
	if e.retryAfter > 0 {
		// Jittered, so refused clients do not come back in step.
		c.Header("Retry-After", strconv.Itoa(e.retryAfter+rand.IntN(e.retryAfter+1)))
	}
	c.Set(outcomeKey, outcome)
	c.AbortWithStatusJSON(e.status, api.ErrorBody{Error: api.ErrorDetail{Code: e.code, Message: e.message}})
}

// outcomeKey is where handlers leave the outcome a request's metrics record.
const outcomeKey = "flashline.outcome"

// outcomeClientClosed is the outcome of a request whose client went away
// (flashline.ClientGone), with nginx's status for it: no client reads it.
const (
	outcomeClientClosed = "client_closed"
	statusClientClosed  = 499
)
