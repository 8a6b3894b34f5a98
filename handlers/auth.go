package handlers

import (
	"log/slog"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
)

const actorKey = "flashline.actor"

// authenticate resolves the caller from the Authorization header: the admin
// token, or a customer JWT. allowAdmin and allowCustomer say who may call the
// route; a valid caller of the other kind gets 403, anyone else 401.
func authenticate(v *auth.Verifier, allowAdmin, allowCustomer bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		token, ok := auth.BearerToken(c.GetHeader("Authorization"))
		if !ok {
			writeError(c, nil, flashline.ErrUnauthenticated)
			return
		}
		var actor flashline.Actor
		if v.IsAdmin(token) {
			actor.Admin = true
		} else if cust, err := v.Customer(token); err == nil {
			actor.CustomerID, actor.AccountCreated, actor.PaymentInstrument = cust.ID, cust.AccountCreated, cust.PaymentInstrument
		} else {
			writeError(c, nil, flashline.ErrUnauthenticated)
			return
		}
		if (actor.Admin && !allowAdmin) || (!actor.Admin && !allowCustomer) {
			writeError(c, nil, flashline.ErrForbidden)
			return
		}
		c.Set(actorKey, actor)
		c.Next()
	}
}

func actorOf(c *gin.Context) flashline.Actor {
	a, _ := c.Get(actorKey)
	actor, _ := a.(flashline.Actor)
	return actor
}

// capPerCustomer lets one customer have at most max requests in flight at
// once on the routes it guards; one more is answered 429 at once. The admin
// is not capped. The count is kept per customer only while they have a
// request in flight, so its memory is bounded by the requests being served.
// max <= 0: no cap.
func capPerCustomer(max int, logger *slog.Logger) gin.HandlerFunc {
	if max <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
	)
	return func(c *gin.Context) {
		actor := actorOf(c)
		if actor.Admin {
			c.Next()
			return
		}
		id := actor.CustomerID
		mu.Lock()
		n := inFlight[id]
		if n >= max {
			mu.Unlock()
			// Close the connection after the answer: the server would
			// otherwise wait for the body this handler never read (up to the
			// read timeout) before answering, and a client this far over its
			// allowance has connections to spare.
			c.Header("Connection", "close")
			writeError(c, logger, flashline.ErrTooManyInFlight)
			return
		}
		inFlight[id] = n + 1
		mu.Unlock()
		defer func() {
			mu.Lock()
			if inFlight[id] <= 1 {
				delete(inFlight, id)
			} else {
				inFlight[id]--
			}
			mu.Unlock()
		}()
		c.Next()
	}
}
