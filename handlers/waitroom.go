package handlers

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline/waitroom"
)

// The waiting room's API: a ticket (a place in line, held by the client as a
// signed token), its status, and the sale's published fairness policy. The
// page that calls them is served by package waitpage.

// handleTicket is GET /sales/{saleId}/ticket[?token=<previous ticket>].
func handleTicket(room *waitroom.Room, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		actor := actorOf(c)
		res, err := room.Ticket(c.Request.Context(), waitroom.TicketRequest{
			SaleID:         c.Param("saleId"),
			CustomerID:     actor.CustomerID,
			AccountCreated: actor.AccountCreated,
			PreviousToken:  c.Query("token"),
		})
		if err != nil {
			writeError(c, logger, err)
			return
		}
		c.Header("Cache-Control", "no-store")
		writeJSON(c, http.StatusOK, NewTicketView(res))
	}
}

// handleStatus is GET /sales/{saleId}/status?token=...[&solution=...].
func handleStatus(room *waitroom.Room, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		res, err := room.Status(c.Request.Context(), c.Param("saleId"), actorOf(c).CustomerID,
			c.Query("token"), c.Query("solution"))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		c.Header("Cache-Control", "no-store")
		writeJSON(c, http.StatusOK, NewStatusView(res))
	}
}

// handlePolicy is GET /sales/{saleId}/policy (public).
func handlePolicy(room *waitroom.Room, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, err := room.Policy(c.Request.Context(), c.Param("saleId"))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, NewPolicyView(p))
	}
}
