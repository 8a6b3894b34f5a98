package loadshed

import "github.com/gin-gonic/gin"

// Gin returns middleware that admits requests through l and calls onShed (which
// must write the answer) for the ones it refuses.
func Gin(l *Limiter, onShed func(*gin.Context)) gin.HandlerFunc {
	return func(c *gin.Context) {
		release, ok := l.TryAcquire()
		if !ok {
			onShed(c)
			c.Abort()
			return
		}
		defer release()
		c.Next()
	}
}
