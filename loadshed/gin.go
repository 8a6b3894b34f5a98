package loadshed

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Gin returns middleware that admits requests of priority p through l. A
// request that is not admitted (shed, or its context ended while it waited)
// is answered by onShed, which must write the response, and the chain is
// aborted. An admitted request runs the rest of the chain and then releases
// its slot with the outcome read from the response:
//
//   - Timeout if the request's context deadline passed, or the status is 503
//     or 504 (the service answered "busy");
//   - Success if the status is below 500 and the context is not done;
//   - Dropped otherwise (a 500, a panic, a client that went away).
func Gin(l *Limiter, p Priority, onShed func(*gin.Context)) gin.HandlerFunc {
	return func(c *gin.Context) {
		tok, err := l.Acquire(c.Request.Context(), p)
		if err != nil {
			onShed(c)
			c.Abort()
			return
		}
		// A panic further down the chain still frees the slot, as Dropped:
		// the status written so far says nothing.
		finished := false
		defer func() {
			if !finished {
				tok.Release(Dropped)
			}
		}()
		c.Next()
		finished = true
		tok.Release(outcome(c.Request.Context(), c.Writer.Status()))
	}
}

func outcome(ctx context.Context, status int) Outcome {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded),
		status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return Timeout
	case status < http.StatusInternalServerError && ctx.Err() == nil:
		return Success
	}
	return Dropped
}
