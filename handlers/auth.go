package handlers

import (
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
			actor.CustomerID, actor.AccountCreated = cust.ID, cust.AccountCreated
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
