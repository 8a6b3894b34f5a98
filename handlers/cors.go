package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// Cross-origin requests from the waiting-room page when it is served from
// another host than the API (flashline page export: a CDN, any web server).
// Any origin may call the customer-facing routes: customers authenticate
// with a bearer header the page adds itself, never with a cookie, so a page
// on another origin can do nothing with them that it could not do with the
// token it already holds. The admin's routes, which its browser sign-in
// cookie reaches (session.go), never answer cross-origin requests.

// CORSAllowHeaders are the request headers the page sends.
const CORSAllowHeaders = "Authorization, Content-Type, Idempotency-Key, X-Admission-Token"

// CORSExposeHeaders are the answer headers the page reads.
const CORSExposeHeaders = "Retry-After, Idempotent-Replayed"

// CORSMaxAge is how long a browser may keep a preflight's answer (seconds;
// browsers cap it at 2 h at most).
const CORSMaxAge = "600"

// CORS marks every answer of a customer-facing route as readable by any
// origin (Access-Control-Allow-Origin: *) and lets the page read the headers
// it needs. Put it first on the route, so that refusals (401, 429, 503)
// carry it too: a page that cannot read an answer sees only a network error.
func CORS() gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", CORSExposeHeaders)
		c.Next()
	}
}

// handlePreflight answers a preflight (OPTIONS) for a route served with
// methods: 204 with what the page may send, and nothing read or kept. A
// preflight for a method the route does not serve is answered the same (the
// browser compares the lists and refuses the request itself).
func handlePreflight(methods ...string) gin.HandlerFunc {
	allow := strings.Join(append(methods, http.MethodOptions), ", ")
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", allow)
		h.Set("Access-Control-Allow-Headers", CORSAllowHeaders)
		h.Set("Access-Control-Max-Age", CORSMaxAge)
		h.Set("Allow", allow)
		// Vary is not needed: the answer is the same for every origin.
		c.Status(http.StatusNoContent)
	}
}

// crossOrigin registers customer-facing routes with CORS in front of their
// handlers, and one preflight route per path.
type crossOrigin struct {
	r       gin.IRoutes
	methods map[string][]string // path → methods served
	order   []string
}

func newCrossOrigin(r gin.IRoutes) *crossOrigin {
	return &crossOrigin{r: r, methods: map[string][]string{}}
}

// handle registers method path with CORS before handlers.
func (x *crossOrigin) handle(method, path string, handlers ...gin.HandlerFunc) {
	x.r.Handle(method, path, append([]gin.HandlerFunc{CORS()}, handlers...)...)
	if _, ok := x.methods[path]; !ok {
		x.order = append(x.order, path)
	}
	x.methods[path] = append(x.methods[path], method)
}

// preflights registers the OPTIONS route of every path handled.
func (x *crossOrigin) preflights() {
	for _, path := range x.order {
		x.r.OPTIONS(path, handlePreflight(x.methods[path]...))
	}
}
