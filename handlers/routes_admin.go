package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
)

// adminRoutes lists the store's routes: the admin API, the browser's
// sign-in, the console and River's job UI. bearerAdmin takes the admin's
// bearer token only; admin also a browser signed in at /admin/login
// (session.go).
func adminRoutes(r *gin.Engine, d Deps, bearerAdmin, admin gin.HandlerFunc) {
	// The metrics name sales and show the limiter's state: the admin's.
	r.GET("/metrics", bearerAdmin, gin.WrapH(MetricsHandler(d.Registry)))

	// Sales.
	r.GET("/admin/sales", admin, handleListSales(d.Store, d.Logger))
	r.POST("/admin/sales", admin, handleCreateSale(d.Store, d.Payments != nil || d.Stripe != nil || d.Adyen != nil, d.Logger))
	r.GET("/admin/sales/:saleId", admin, handleGetSale(d.Store, d.Gate != nil, d.Logger))
	for _, action := range flashline.SaleActions {
		r.POST("/admin/sales/:saleId/"+string(action), admin, handleSaleAction(d.Store, d.Logger, action))
	}
	// After the click: extend holds when payment is slow, void orders
	// (one, or a list), the payments that came too late and are owed back.
	r.POST("/admin/sales/:saleId/extend", admin, handleExtendSale(d.Store, d.Logger))
	r.POST("/admin/reservations/:reservationId/extend", admin, handleExtendReservation(d.Store, d.Logger))
	r.POST("/admin/reservations/:reservationId/void", admin, handleVoid(d.Store, d.Logger))
	r.POST("/admin/reservations/void", admin, handleBulkVoid(d.Store, d.Logger))
	r.GET("/admin/payments/late", admin, handleLatePayments(d.Store, d.Logger))
	if d.Gate != nil {
		r.POST("/admin/sales/:saleId/gate/rebuild", admin, handleGateRebuild(d.Gate, d.Logger))
	}
	// The operator's controls of a waiting room's queue (audited).
	if d.Room != nil {
		r.POST("/admin/sales/:saleId/queue/hold", admin, handleQueueHold(d.Room, true, d.Logger))
		r.POST("/admin/sales/:saleId/queue/release", admin, handleQueueHold(d.Room, false, d.Logger))
		r.POST("/admin/sales/:saleId/queue/message", admin, handleQueueMessage(d.Room, d.Logger))
	}

	// The browser's sign-in (session.go), the console's pages (console.go)
	// and River's job UI.
	r.GET("/admin/login", handleLoginPage)
	r.POST("/admin/login", handleLogin(d.Verifier, d.now()))
	r.POST("/admin/logout", handleLogout(d.Verifier, d.Sessions, d.now(), d.Logger))
	if d.Console != nil {
		gateStatus, _ := d.Gate.(GateStatuser)
		watch := newWatcher(d.Console, gateStatus, d.Registry, time.Now, d.Instance, d.Logger)
		// /admin, as typed: the console (a path with a trailing slash is
		// not redirected by the router, and this one without is nothing else).
		r.GET("/admin", func(c *gin.Context) { c.Redirect(http.StatusSeeOther, "/admin/") })
		r.GET("/admin/", admin, handleConsoleHome(d.Store, d.Payments != nil || d.Stripe != nil || d.Adyen != nil, d.Logger))
		r.GET("/admin/sales/:saleId/live", admin, handleLive(watch, d.Logger))
		r.GET("/admin/sales/:saleId/report", admin, handleReport(d.Console, d.Logger))
		r.POST("/admin/sales/:saleId/repair", admin, handleRepair(d.Console, d.Logger))
		r.GET(ConsolePrefix+":file", handleConsoleAsset)
	}
	if d.RiverUI != nil {
		r.Any("/admin/riverui/*path", adminOrSession(d.Verifier, d.Sessions, d.now(), bearerAdmin, false, d.Logger), gin.WrapH(d.RiverUI))
	}
}
