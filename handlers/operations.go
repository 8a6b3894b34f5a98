package handlers

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
)

// What operators do after the click, through the admin API: extend holds
// when payment is slow, void orders. The admin token is shared and names
// nobody, so each body may name the operator ("operator"; default "admin"),
// who is recorded with the change (operator_actions, the ledger).

// MaxBulkVoidBytes bounds a bulk void's body: MaxBulkVoid ids fit.
const MaxBulkVoidBytes = 64 << 10

type extendRequest struct {
	Seconds  *int   `json:"seconds"`
	Operator string `json:"operator"`
}

func (r extendRequest) check() (seconds int, operator string, err error) {
	if r.Seconds == nil {
		return 0, "", flashline.Invalid("seconds is required")
	}
	if err := flashline.CheckExtendSeconds(*r.Seconds); err != nil {
		return 0, "", err
	}
	operator, err = operatorOf(r.Operator)
	return *r.Seconds, operator, err
}

// readExtend reads and checks an extend request's body, answering the
// client when it is not right (false).
func readExtend(c *gin.Context, logger *slog.Logger) (seconds int, operator string, ok bool) {
	var req extendRequest
	err := decodeJSON(c, &req)
	if err == nil {
		seconds, operator, err = req.check()
	}
	if err != nil {
		writeError(c, logger, err)
		return 0, "", false
	}
	return seconds, operator, true
}

// readOperated reads an admin request's JSON body into req (no body at
// all reads as {} when optional) and who acts, name (its "operator" field,
// read once the body is; default "admin"), answering the client when either
// is not right (false).
func readOperated(c *gin.Context, logger *slog.Logger, req any, name *string, optional bool) (operator string, ok bool) {
	if !optional || c.Request.ContentLength != 0 {
		if err := decodeJSON(c, req); err != nil {
			writeError(c, logger, err)
			return "", false
		}
	}
	operator, err := operatorOf(*name)
	if err != nil {
		writeError(c, logger, err)
		return "", false
	}
	return operator, true
}

func operatorOf(name string) (string, error) {
	if name == "" {
		return flashline.DefaultOperator, nil
	}
	return name, flashline.CheckOperator(name)
}

type voidRequest struct {
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
}

type bulkVoidRequest struct {
	ReservationIDs []string `json:"reservationIds"`
	Reason         string   `json:"reason"`
	Operator       string   `json:"operator"`
}

// handleExtendSale is POST /admin/sales/{saleId}/extend.
func handleExtendSale(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return handleExtend("saleId", logger, func(ctx context.Context, saleID string, seconds int, operator string) (any, error) {
		res, err := store.ExtendSale(ctx, saleID, seconds, operator)
		if err != nil {
			return nil, err
		}
		logger.InfoContext(ctx, "handlers: holds extended", "sale_id", res.SaleID,
			"seconds", seconds, "extended", res.Extended, "at_cap", res.AtCap, "operator", operator)
		return api.Extended{SaleID: res.SaleID, Seconds: res.Seconds, Extended: res.Extended, AtCap: res.AtCap}, nil
	})
}

// handleExtendReservation is POST /admin/reservations/{reservationId}/extend.
func handleExtendReservation(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return handleExtend("reservationId", logger, func(ctx context.Context, reservationID string, seconds int, operator string) (any, error) {
		r, err := store.ExtendReservation(ctx, reservationID, seconds, operator)
		if err != nil {
			return nil, err
		}
		return NewReservationView(r), nil
	})
}

// handleExtend is an extend of what the path's param names: its body read
// and checked (readExtend), then extend, whose answer is 200's body.
func handleExtend(param string, logger *slog.Logger, extend func(ctx context.Context, id string, seconds int, operator string) (any, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		seconds, operator, ok := readExtend(c, logger)
		if !ok {
			return
		}
		v, err := extend(c.Request.Context(), c.Param(param), seconds, operator)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, v)
	}
}

// handleVoid is POST /admin/reservations/{reservationId}/void.
func handleVoid(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req voidRequest
		operator, ok := readOperated(c, logger, &req, &req.Operator, false)
		if !ok {
			return
		}
		if err := flashline.CheckVoidReason(req.Reason); err != nil {
			writeError(c, logger, err)
			return
		}
		r, err := store.Void(c.Request.Context(), c.Param("reservationId"), req.Reason, operator)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, NewReservationView(r))
	}
}

// handleBulkVoid is POST /admin/reservations/void: up to MaxBulkVoid
// reservations, each voided on its own (one statement each, so the hot
// stock rows are never held for the whole list); the answer says what
// became of each, in the order given. Repeating it is harmless: a voided
// order stays voided and its units came back once.
func handleBulkVoid(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req bulkVoidRequest
		if err := decodeJSONLimit(c, &req, MaxBulkVoidBytes); err != nil {
			writeError(c, logger, err)
			return
		}
		operator, err := operatorOf(req.Operator)
		if err == nil {
			err = flashline.CheckVoidReason(req.Reason)
		}
		if err == nil && (len(req.ReservationIDs) == 0 || len(req.ReservationIDs) > flashline.MaxBulkVoid) {
			err = flashline.Invalid("reservationIds must list 1-1000 reservations")
		}
		if err != nil {
			writeError(c, logger, err)
			return
		}
		ctx := c.Request.Context()
		v := api.BulkVoided{Results: make([]api.VoidResult, len(req.ReservationIDs))}
		for i, id := range req.ReservationIDs {
			res := api.VoidResult{ReservationID: id}
			var r flashline.Reservation
			err := flashline.ErrNotFound // an id of a shape the service never makes names nothing
			if flashline.ValidID(flashline.ReservationIDPrefix, id) {
				r, err = store.Void(ctx, id, req.Reason, operator)
			}
			if r.State != "" {
				res.State, res.OrderID = string(r.State), r.OrderID
			}
			if err != nil {
				e := lookupError(err)
				if e.status >= 500 {
					writeError(c, logger, err) // the database, not this id: stop here
					return
				}
				res.Error = &api.ErrorDetail{Code: e.code, Message: e.message}
			} else {
				v.Voided++
			}
			v.Results[i] = res
		}
		logger.InfoContext(ctx, "handlers: bulk void", "asked", len(req.ReservationIDs), "voided", v.Voided, "operator", operator)
		writeJSON(c, http.StatusOK, v)
	}
}
