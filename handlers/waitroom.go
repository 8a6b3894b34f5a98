package handlers

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
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

// queueRequest is the body of the queue controls: who acts, and why (hold,
// release) or what everyone waiting is told (message; "" clears it).
type queueRequest struct {
	Operator string  `json:"operator"`
	Reason   string  `json:"reason"`
	Message  *string `json:"message"`
}

// handleQueueHold is POST /admin/sales/{saleId}/queue/hold and .../release
// (body optional: {operator, reason}).
func handleQueueHold(room *waitroom.Room, held bool, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req queueRequest
		operator, ok := readOperated(c, logger, &req, &req.Operator, true)
		if !ok {
			return
		}
		saleID := c.Param("saleId")
		if err := room.HoldQueue(c.Request.Context(), saleID, held, operator, req.Reason); err != nil {
			writeError(c, logger, err)
			return
		}
		logger.InfoContext(c.Request.Context(), "handlers: queue held", "sale_id", saleID, "held", held, "operator", operator, "reason", req.Reason)
		writeJSON(c, http.StatusOK, api.Queue{SaleID: saleID, Held: &held})
	}
}

// handleQueueMessage is POST /admin/sales/{saleId}/queue/message
// ({message, operator}; "" clears it).
func handleQueueMessage(room *waitroom.Room, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req queueRequest
		if err := decodeJSON(c, &req); err != nil {
			writeError(c, logger, err)
			return
		}
		if req.Message == nil {
			writeError(c, logger, flashline.Invalid("message is required (\"\" clears it)"))
			return
		}
		operator, err := operatorOf(req.Operator)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		saleID := c.Param("saleId")
		if err := room.Broadcast(c.Request.Context(), saleID, *req.Message, operator); err != nil {
			writeError(c, logger, err)
			return
		}
		logger.InfoContext(c.Request.Context(), "handlers: queue message", "sale_id", saleID, "operator", operator)
		writeJSON(c, http.StatusOK, api.Queue{SaleID: saleID, Message: req.Message})
	}
}
