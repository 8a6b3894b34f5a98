package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
	"github.com/flashline/flashline/webhook"
)

// Deps is what the HTTP layer needs.
type Deps struct {
	// Store is the one store every route goes through (stack.New puts it
	// together: the sale cache in front of the gate in front of the
	// database), the lottery's routes included.
	Store flashline.Store
	// Refusals decides what a reservation is refused without the database
	// (stack.New makes it: the sale's queue full, memory's sold out or not
	// open); the front door and the reservation route ask it first. Nil:
	// nothing is refused that way.
	Refusals *flashline.Refusals
	Verifier *auth.Verifier
	Limiter  *loadshed.Limiter
	Logger   *slog.Logger
	// Ready reports whether the service can serve (database reachable,
	// migrations current).
	Ready func(context.Context) error
	// Registry holds the metrics served on /metrics (to the admin; serve
	// can also serve them on a listener of their own, see MetricsHandler).
	Registry *prometheus.Registry
	// RiverUI, when set, is served under /admin/riverui/ to the admin.
	RiverUI http.Handler
	// Room serves the waiting room's ticket, status and policy; without it
	// those routes are not there.
	Room *waitroom.Room
	// Keyring signs and verifies waiting-room tickets and admission tokens
	// (the reserve path checks X-Admission-Token with it).
	Keyring *roomtoken.Keyring
	// CustomerInFlight is how many requests one customer may have in flight
	// at once on the customer routes; more are answered 429 at once. 0: no
	// cap.
	CustomerInFlight int
	// InFlightPerAddr is how many requests one client address may have in
	// flight at once when they come through TrustedProxies, the address
	// read from X-Forwarded-For (peraddr.go); one more is answered 429
	// rate_limited by the front door. 0, or no proxy trusted: no bound.
	// serve gives them --max-conns-per-addr and --trusted-proxies, whose
	// bound the listener applies to every other address's connections.
	InFlightPerAddr int
	TrustedProxies  []netip.Prefix
	// MaxStreams bounds the waiting clients' status streams open at once
	// (stream.go); past it a stream is refused 503 overloaded and the
	// client polls. 0: DefaultMaxStreams.
	MaxStreams int
	// Draining, when closed, ends every open status stream: the server is
	// shutting down, and a stream never finishes by itself, so without it
	// one waiting client would hold the drain to its deadline. Its client
	// asks again (a poll, a new stream) and hears what that instance or
	// another answers. serve closes it when the HTTP server's Shutdown
	// begins (http.Server.RegisterOnShutdown).
	Draining <-chan struct{}
	// Payments checks the signatures of payment events (POST
	// /payments/events). Nil: the instance takes no payment events, and
	// refuses to create sales confirmed by payment.
	Payments *webhook.Verifier
	// Stripe checks Stripe-Signature on POST /payments/stripe (the
	// endpoint's signing secrets); Adyen the HMAC of the items on POST
	// /payments/adyen. Nil: that route answers payments_not_configured.
	Stripe *webhook.Verifier
	Adyen  *webhook.AdyenVerifier
	// Gate, when set, serves POST /admin/sales/{id}/gate/rebuild (and, if
	// it is a GateStatuser, the console's gate figures).
	Gate GateRebuilder
	// Sessions records the admin's browser sessions signed out, refused
	// from then on (session.go); nil: signing out only clears the browser's
	// cookie (tests only: serve always sets it).
	Sessions AdminSessions
	// Console, when set, serves the console's pages and the sale's live
	// snapshot and report (console.go, live.go).
	Console ConsoleStore
	// Instance is this instance's name in the fleet's reports of reservation
	// answers (RunPublisher writes them; the live page reads the others'):
	// "" when it writes none.
	Instance string
	// Now is the clock admission tokens' expiry is judged by; nil:
	// time.Now. Only serve's test hook (FLASHLINE_TEST_CLOCK_SKEW) sets it.
	Now func() time.Time
}

func (d Deps) now() func() time.Time {
	if d.Now == nil {
		return time.Now
	}
	return d.Now
}

// reservedWith is the waiting room's ear for reservations made with an
// admission (its analytics), nil without a room.
func (d Deps) reservedWith() func(roomtoken.Admission) {
	if d.Room == nil {
		return nil
	}
	return d.Room.Reserved
}

// newEngine is a gin engine as both an instance and an edge serve it: a
// panic is logged and answered 500 in the API's error shape, and a path with
// a trailing slash is not found (JSON), not redirected (HTML).
func newEngine(logger *slog.Logger) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		logger.ErrorContext(c.Request.Context(), "handlers: panic", "err", err, "path", c.Request.URL.Path)
		c.AbortWithStatusJSON(http.StatusInternalServerError, api.ErrorBody{Error: api.ErrorDetail{Code: "internal", Message: "internal error"}})
	}))
	r.RedirectTrailingSlash = false
	return r
}

// Routes returns the HTTP handler for the whole API.
func Routes(d Deps) http.Handler {
	r := newEngine(d.Logger)
	r.HandleMethodNotAllowed = true
	r.NoRoute(func(c *gin.Context) { writeError(c, d.Logger, flashline.ErrNotFound) })
	r.NoMethod(func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, api.ErrorBody{Error: api.ErrorDetail{Code: "method_not_allowed", Message: "method not allowed"}})
	})
	metrics := NewMetrics(d.Registry, d.Limiter)
	r.Use(metrics.middleware())
	// An id the service cannot have made names nothing: 404 before any
	// lookup, cache or log line keyed by it.
	r.Use(checkIDs(d.Logger))
	// No admin page in a frame; HSTS over HTTPS (session.go).
	r.Use(adminHeaders)

	bearerAdmin := authenticate(d.Verifier, true, false)
	// Every admin route but /metrics takes the bearer token or a browser
	// signed in at /admin/login (session.go).
	admin := adminOrSession(d.Verifier, d.Sessions, d.now(), bearerAdmin, true, d.Logger)
	customer := authenticate(d.Verifier, false, true)
	ownerOrAdmin := authenticate(d.Verifier, true, true)
	// One customer holds at most CustomerInFlight requests at once, so that
	// one token cannot fill a shared resource (the limiter's slots, a pool,
	// goroutines reading bodies) that other buyers need.
	customers := newCustomerCap(d.CustomerInFlight, d.Logger)

	// Operations: the probes, the contract itself (openapi.go) and the API
	// reference page that renders it (docs.go), anyone's.
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", handleReady(d.Ready, d.Logger))
	r.GET("/openapi.json", handleOpenAPI)
	r.GET("/docs", handleDocsPage)
	r.GET(DocsPrefix+":version/:file", handleDocsAsset)

	// Polls of the waiting room (and what edges pull) may use only part of
	// the limit, so a crowd polling its place never crowds out the buyers it
	// was let in for.
	onShed := func(c *gin.Context) { writeError(c, d.Logger, flashline.ErrOverloaded) }
	pollSlot := loadshed.Gin(d.Limiter, loadshed.PriorityPoll, onShed)

	// Each audience's routes, listed in a file of its own.
	adminRoutes(r, d, bearerAdmin, admin)                         // routes_admin.go
	providerRoutes(r, d)                                          // routes_providers.go
	shopRoutes(r, d, customer, ownerOrAdmin, customers, pollSlot) // routes_shop.go
	if d.Room != nil {
		originEdgeRoutes(r, d, pollSlot) // routes_edge.go
	}

	// What the service refuses without the database is answered before the
	// routes (frontdoor.go).
	if d.Store == nil || d.Verifier == nil {
		return r
	}
	return newFrontDoor(r, d, metrics)
}

// handleReady is GET /readyz. The reason it gives is generic: the detail
// (a connect error names the user, database, host and port) is for the log.
func handleReady(ready func(context.Context) error, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := ready(c.Request.Context()); err != nil {
			logger.WarnContext(c.Request.Context(), "handlers: not ready", "err", err)
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "reason": "the database is unreachable or its schema is not current"})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	}
}

// MetricsHandler serves the registry in Prometheus's format.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// checkIDs answers 404 for a sale or reservation id of a shape the service
// never makes, before any handler sees it.
func checkIDs(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		for _, p := range c.Params {
			var prefix string
			switch p.Key {
			case "saleId":
				prefix = flashline.SaleIDPrefix
			case "reservationId":
				prefix = flashline.ReservationIDPrefix
			default:
				continue
			}
			if !flashline.ValidID(prefix, p.Value) {
				writeError(c, logger, flashline.ErrNotFound)
				return
			}
		}
		c.Next()
	}
}
