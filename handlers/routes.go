// Package handlers is Flashline's HTTP layer (Gin): the whole API surface is
// listed in Routes below; the JSON shapes are in views.go, decoding in json.go
// and the one error table in errors.go.
package handlers

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitpage"
	"github.com/flashline/flashline/waitroom"
)

// Deps is what the HTTP layer needs.
type Deps struct {
	Store    flashline.Store
	Verifier *auth.Verifier
	Limiter  *loadshed.Limiter
	Logger   *slog.Logger
	// Ready reports whether the service can serve (database reachable,
	// migrations current).
	Ready func(context.Context) error
	// Registry holds the metrics served on /metrics.
	Registry *prometheus.Registry
	// RiverUI, when set, is served under /admin/riverui/ to the admin.
	RiverUI http.Handler
	// Room serves the waiting room's ticket, status and policy; without it
	// those routes are not there.
	Room *waitroom.Room
	// Keyring signs and verifies waiting-room tickets and admission tokens
	// (the reserve path checks X-Admission-Token with it).
	Keyring *waitroom.Keyring
}

// Routes returns the HTTP handler for the whole API.
func Routes(d Deps) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		d.Logger.ErrorContext(c.Request.Context(), "handlers: panic", "err", err, "path", c.Request.URL.Path)
		c.AbortWithStatusJSON(http.StatusInternalServerError, errorBody{Error: errorDetail{Code: "internal", Message: "internal error"}})
	}))
	r.HandleMethodNotAllowed = true
	// A path with a trailing slash is not found (JSON), not redirected (HTML).
	r.RedirectTrailingSlash = false
	r.NoRoute(func(c *gin.Context) { writeError(c, d.Logger, flashline.ErrNotFound) })
	r.NoMethod(func(c *gin.Context) {
		c.AbortWithStatusJSON(http.StatusMethodNotAllowed, errorBody{Error: errorDetail{Code: "method_not_allowed", Message: "method not allowed"}})
	})
	metrics := NewMetrics(d.Registry, d.Limiter)
	r.Use(metrics.middleware())

	// Operations.
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", handleReady(d.Ready))
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{})))

	admin := authenticate(d.Verifier, true, false)
	customer := authenticate(d.Verifier, false, true)
	ownerOrAdmin := authenticate(d.Verifier, true, true)
	// The admission limiter, by priority: confirm and cancel (they finish
	// sales and return stock) before new reservations.
	onShed := func(c *gin.Context) { writeError(c, d.Logger, flashline.ErrOverloaded) }
	reserveSlot := loadshed.Gin(d.Limiter, loadshed.PriorityReserve, onShed)
	criticalSlot := loadshed.Gin(d.Limiter, loadshed.PriorityCritical, onShed)
	// Waiting-room polls may use only part of the limit, so a crowd polling
	// its place never crowds out the buyers it was let in for.
	pollSlot := loadshed.Gin(d.Limiter, loadshed.PriorityPoll, onShed)

	// Admin.
	r.POST("/admin/sales", admin, handleCreateSale(d.Store, d.Logger))
	r.GET("/admin/sales/:saleId", admin, handleGetSale(d.Store, d.Logger))
	for _, action := range []string{flashline.ActionOpen, flashline.ActionPause, flashline.ActionResume, flashline.ActionClose} {
		r.POST("/admin/sales/:saleId/"+action, admin, handleSaleAction(d.Store, d.Logger, action))
	}
	if d.RiverUI != nil {
		r.Any("/admin/riverui/*path", admin, gin.WrapH(d.RiverUI))
	}

	// Customers. The limiter sheds before authentication: a refused request
	// costs no signature check either.
	r.POST("/sales/:saleId/reservations", reserveSlot, customer, handleReserve(d.Store, d.Keyring, d.Logger))
	r.GET("/reservations/:reservationId", ownerOrAdmin, handleGetReservation(d.Store, d.Logger))
	r.POST("/reservations/:reservationId/confirm", criticalSlot, ownerOrAdmin, handleConfirm(d.Store, d.Logger))
	r.POST("/reservations/:reservationId/cancel", criticalSlot, ownerOrAdmin, handleCancel(d.Store, d.Logger))
	// The waiting room (waitroom/): a place in line, where it stands, and
	// the sale's published fairness policy (public, but behind the limiter
	// too: a sale it has not seen costs a database read).
	if d.Room != nil {
		r.GET("/sales/:saleId/ticket", pollSlot, customer, handleTicket(d.Room, d.Logger))
		r.GET("/sales/:saleId/status", pollSlot, customer, handleStatus(d.Room, d.Logger))
		r.GET("/sales/:saleId/policy", pollSlot, handlePolicy(d.Room, d.Logger))
	}
	// The waiting-room page and its assets (no auth: the page calls the API
	// with the customer's token).
	waitpage.Register(r)
	return r
}

func handleReady(ready func(context.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := ready(c.Request.Context()); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "reason": err.Error()})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	}
}
