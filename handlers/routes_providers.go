package handlers

import "github.com/gin-gonic/gin"

// providerRoutes lists the payment side's routes: events signed with the
// payment webhook secret (webhook/), Stripe's and Adyen's webhooks
// (providers.go), not a bearer token. Like confirm, never shed: they finish
// sales and return stock.
func providerRoutes(r *gin.Engine, d Deps) {
	payments := newPaymentMetrics(d.Registry)
	r.POST("/payments/events", handlePaymentEvent(d.Store, d.Payments, payments, d.Logger))
	r.POST("/payments/stripe", handleStripe(d.Store, d.Stripe, payments, d.Logger))
	r.POST("/payments/adyen", handleAdyen(d.Store, d.Adyen, payments, d.Logger))
}
