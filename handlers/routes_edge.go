package handlers

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/edge"
)

// The edge's routes, both sides: what edges call on an origin
// (originEdgeRoutes, part of Routes) and an edge's own surface (EdgeRoutes).
// Their handlers and the edge's proxy to origins are edge.go's.

// originEdgeRoutes lists an origin's endpoints for edges: the document they
// pull, their reports and their leases.
func originEdgeRoutes(r *gin.Engine, d Deps, pollSlot gin.HandlerFunc) {
	r.GET("/edge/watermarks", pollSlot, handleWatermarks(d.Room))
	r.POST("/edge/sync", handleEdgeSync(d.Room, d.Logger))
	r.POST("/edge/lease", handleEdgeLease(d.Room, d.Logger))
}

// EdgeDeps is what an edge's HTTP layer needs.
type EdgeDeps struct {
	Room     *waitroom.Room
	Edge     *edge.Client
	Verifier *auth.Verifier
	Limiter  *loadshed.Limiter
	Logger   *slog.Logger
	// Origins are the base URLs everything else is passed to.
	Origins          []string
	CustomerInFlight int
	// InFlightPerAddr and TrustedProxies are Deps': the requests in
	// flight of one client address behind a trusted proxy.
	InFlightPerAddr int
	TrustedProxies  []netip.Prefix
	// ProxyTimeout bounds an origin's answer to a request passed on.
	// Default 15s.
	ProxyTimeout time.Duration
	// MaxStreams and Draining are Deps', on the edge; Registry takes the
	// streams' gauge.
	MaxStreams int
	Draining   <-chan struct{}
	Registry   prometheus.Registerer
}

// EdgeRoutes returns an edge's HTTP handler: the waiting-room page and its
// assets, tickets and status polls of the waiting rooms the edge has heard
// of (answered from the pulled document, never by asking an origin), and
// everything else a browser or app calls passed on to an origin (a reverse
// proxy; no origin answering: 503 overloaded with Retry-After). The admin's
// routes are not served (404): an operator talks to an origin.
func EdgeRoutes(d EdgeDeps) http.Handler {
	r := newEngine(d.Logger)
	proxy := newOriginProxy(d.Origins, d.Edge, d.ProxyTimeout, d.Logger)
	r.NoRoute(func(c *gin.Context) {
		p := c.Request.URL.Path
		if p == "/admin" || strings.HasPrefix(p, "/admin/") || p == "/metrics" || strings.HasPrefix(p, "/edge/") {
			writeError(c, d.Logger, flashline.ErrNotFound)
			return
		}
		proxy.ServeHTTP(c.Writer, c.Request)
	})
	r.Use(checkIDs(d.Logger))

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	// Ready while the edge holds a current document from an origin.
	r.GET("/readyz", func(c *gin.Context) {
		if !d.Edge.Fresh() {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "reason": "no origin has answered lately"})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	})
	r.GET("/openapi.json", handleOpenAPI)
	r.GET("/docs", handleDocsPage)
	r.GET(DocsPrefix+":version/:file", handleDocsAsset)

	customer := authenticate(d.Verifier, false, true)
	customers := newCustomerCap(d.CustomerInFlight, d.Logger)
	oneCustomer := customers.each()
	onShed := func(c *gin.Context) { writeError(c, d.Logger, flashline.ErrOverloaded) }
	pollSlot := loadshed.Gin(d.Limiter, loadshed.PriorityPoll, onShed)
	// A sale the edge has not heard of as a waiting room (a direct sale, a
	// lottery, an id that names nothing) is the origin's to answer.
	ours := func(c *gin.Context) {
		if !d.Edge.Knows(c.Param("saleId")) {
			proxy.ServeHTTP(c.Writer, c.Request)
			c.Abort()
			return
		}
		c.Next()
	}
	// A stream passed on ends at shutdown as the edge's own do.
	oursStream := func(c *gin.Context) {
		if !d.Edge.Knows(c.Param("saleId")) {
			passOnStream(proxy, d.Draining, c.Writer, c.Request)
			c.Abort()
			return
		}
		c.Next()
	}
	// The page may be served by another host (flashline page export): the
	// edge's own routes answer any origin (CORS, cors.go), and an origin's
	// answers passed on carry its own headers.
	public := newCrossOrigin(r)
	public.handle(http.MethodGet, "/sales/:saleId/ticket", ours, customer, oneCustomer, pollSlot, handleTicket(d.Room, d.Logger))
	public.handle(http.MethodGet, "/sales/:saleId/status", ours, customer, oneCustomer, pollSlot, handleStatus(d.Room, d.Logger))
	public.handle(http.MethodGet, "/sales/:saleId/status/stream", oursStream, customer, customers.untilStreaming(), handleStatusStream(d.Room, newStreams(orDefault(d.MaxStreams), d.Registry, d.Draining), d.Logger))
	public.preflights()
	waitpageRoutes(r) // routes_shop.go
	// The crowd's tickets and polls that memory answers are answered
	// before the routes (edgedoor.go).
	return boundPerAddr(newEdgeDoor(r, d), newAddrBound(d.InFlightPerAddr, d.TrustedProxies))
}
