package handlers

import (
	"errors"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
)

// What a reservation is refused without the database is flashline.Refusals'
// to decide (the sale's queue full, memory's sold out or not open); the
// front door (frontdoor.go) and the reservation route below both ask it,
// and both write its answer as prepared here, with refuse: the same status,
// body and headers whichever answers.

// refusalAnswers are the answers of the refusals, prepared.
type refusalAnswers struct {
	overloaded, soldOut, notOpen prepared
}

// prepareRefusals prepares each refusal's answer with prepare.
func prepareRefusals(prepare func(error) prepared) refusalAnswers {
	return refusalAnswers{
		overloaded: prepare(flashline.ErrOverloaded),
		soldOut:    prepare(flashline.ErrSoldOut),
		notOpen:    prepare(flashline.ErrSaleNotOpen),
	}
}

// of is the answer of what Refusals.FromMemory said (nil: no refusal).
func (a *refusalAnswers) of(err error) *prepared {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flashline.ErrSoldOut):
		return &a.soldOut
	case errors.Is(err, flashline.ErrSaleNotOpen):
		return &a.notOpen
	}
	return nil
}

// routeRefusals are the route's answers: not counted here, the metrics'
// middleware counts every route's answer (by the outcome writeRefusal
// leaves).
var routeRefusals = prepareRefusals(func(err error) prepared { return prepareError(lookupError(err), nil, nil) })

// writeRefusal writes p as the route's answer and ends the handler chain.
func writeRefusal(c *gin.Context, p *prepared) {
	c.Set(outcomeKey, p.code)
	refuse(c.Writer, p, time.Time{})
	c.Abort()
}

// shedBusySale refuses a reservation with 503 overloaded, before its token is
// verified or its body read, when refusals says its sale's purchase queue is
// full: the cheapest "no", for the crowd that exceeds what the sale's
// batches take.
func shedBusySale(refusals *flashline.Refusals) gin.HandlerFunc {
	return func(c *gin.Context) {
		if refusals.Overloaded(c.Param("saleId")) {
			writeRefusal(c, &routeRefusals.overloaded)
			return
		}
		c.Next()
	}
}

// refuseFromMemory answers a reservation refusals refuses from memory (sold
// out, not open) before its body is decoded, its Idempotency-Key checked or
// a slot of the limiter taken: the "no" most buyers of a flash sale hear,
// at the cost of a map lookup. The caller is authenticated first
// (customer): which customers still reach the database (those who ever
// held a reservation in the sale, whose retries must replay) is theirs to
// know only of themselves, so an answer that depends on the customer is
// given only to that customer. The answer is one every request in the sale
// would get now, whatever its body: "sold out" holds for any quantity, "not
// open" for any request. The body is read and dropped within the bounds a
// decoded one has (MaxBodyBytes, bodyReadTimeout), so the connection
// carries the client's next request; a body that breaks them closes the
// connection instead. A client gone meanwhile hears what writeError says of
// it.
func refuseFromMemory(refusals *flashline.Refusals, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		err := refusals.FromMemory(c.Request.Context(), c.Param("saleId"), actorOf(c).CustomerID)
		p := routeRefusals.of(err)
		if p == nil {
			c.Next()
			return
		}
		if !drainBody(c) {
			c.Header("Connection", "close")
		}
		if flashline.ClientGone(c.Request.Context(), err) {
			writeError(c, logger, err)
			return
		}
		writeRefusal(c, p)
	}
}
