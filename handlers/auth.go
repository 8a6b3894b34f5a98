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

// customerCap lets one customer have at most max requests in flight at once
// on the routes it guards; one more is answered 429 at once. The admin is
// not capped. The count is kept per customer only while they have a request
// in flight, so its memory is bounded by the requests being served. max <=
// 0: no cap.
type customerCap struct {
	max    int
	logger *slog.Logger

	mu       sync.Mutex
	inFlight map[string]int
}

func newCustomerCap(max int, logger *slog.Logger) *customerCap {
	return &customerCap{max: max, logger: logger, inFlight: map[string]int{}}
}

// each is the middleware that holds one of the customer's requests for the
// whole request.
func (p *customerCap) each() gin.HandlerFunc {
	return func(c *gin.Context) {
		id, counted, ok := p.enter(c)
		if !ok {
			return
		}
		if counted {
			defer p.leave(id)
		}
		c.Next()
	}
}

// untilStreaming is each for the status stream: the customer's request is
// given back once the stream's first answer is made (streaming), so a
// long wait holds none of the four a customer has for everything else. What
// bounds an open stream's customer instead is streams' own count per
// customer (stream.go): a newer stream ends the oldest.
func (p *customerCap) untilStreaming() gin.HandlerFunc {
	return func(c *gin.Context) {
		id, counted, ok := p.enter(c)
		if !ok {
			return
		}
		if counted {
			release := func() {
				if counted {
					counted = false
					p.leave(id)
				}
			}
			c.Set(streamingKey, release)
			defer release()
		}
		c.Next()
	}
}

const streamingKey = "flashline.streaming"

// streaming gives back the customer's request a stream holds
// (untilStreaming); it is for the handler's own goroutine only.
func streaming(c *gin.Context) {
	if f, ok := c.Get(streamingKey); ok {
		f.(func())()
	}
}

// enter counts a request of the customer's, or answers 429 (ok false);
// counted says whether leave must give it back.
func (p *customerCap) enter(c *gin.Context) (id string, counted, ok bool) {
	actor := actorOf(c)
	if p.max <= 0 || actor.Admin {
		return "", false, true
	}
	id = actor.CustomerID
	p.mu.Lock()
	n := p.inFlight[id]
	if n >= p.max {
		p.mu.Unlock()
		// Close the connection after the answer: the server would otherwise
		// wait for the body this handler never read (up to the read
		// timeout) before answering, and a client this far over its
		// allowance has connections to spare.
		c.Header("Connection", "close")
		writeError(c, p.logger, flashline.ErrTooManyInFlight)
		return "", false, false
	}
	p.inFlight[id] = n + 1
	p.mu.Unlock()
	return id, true, true
}

func (p *customerCap) leave(id string) {
	p.mu.Lock()
	if p.inFlight[id] <= 1 {
		delete(p.inFlight, id)
	} else {
		p.inFlight[id]--
	}
	p.mu.Unlock()
}
