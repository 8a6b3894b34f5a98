package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
)

// CreateSaleRequest is the body of POST /admin/sales.
type CreateSaleRequest struct {
	SKU                   string        `json:"sku"`
	Title                 *string       `json:"title"`    // null or absent: the SKU
	ImageURL              *string       `json:"imageUrl"` // null, absent or "": none
	InitialStock          *int          `json:"initialStock"`
	PerCustomerLimit      int           `json:"perCustomerLimit"`
	ReservationTTLSeconds int           `json:"reservationTtlSeconds"`
	OpensAt               *time.Time    `json:"opensAt"`
	Admission             string        `json:"admission"`
	Buckets               int           `json:"buckets"`
	Fairness              string        `json:"fairness"`
	ChallengeBits         int           `json:"challengeBits"`
	PerInstrumentLimit    *int          `json:"perInstrumentLimit"` // null or absent: no limit
	MinAccountAgeSeconds  int           `json:"minAccountAgeSeconds"`
	Confirmation          string        `json:"confirmation"` // "payment" (default) or "customer"
	Gate                  string        `json:"gate"`         // none (default) or redis
	Price                 *PriceRequest `json:"price"`        // null or absent: none
	// Variants: 1-100, each with its own stock (initialStock and buckets
	// then left out); null or absent: a sale without variants.
	Variants []VariantRequest `json:"variants"`
	LotteryRequest
}

// VariantRequest is one variant of a sale in POST /admin/sales.
type VariantRequest struct {
	SKU     string `json:"sku"`
	Title   string `json:"title"` // "" or absent: the SKU
	Stock   int    `json:"stock"`
	Buckets int    `json:"buckets"` // 0 or absent: 1
}

// PriceRequest is a sale's price in POST /admin/sales.
type PriceRequest struct {
	Amount   *int64 `json:"amount"`
	Currency string `json:"currency"`
}

// NewSale turns the request into the domain's NewSale.
func (r CreateSaleRequest) NewSale() (flashline.NewSale, error) {
	if r.InitialStock == nil && r.Variants == nil {
		return flashline.NewSale{}, flashline.Invalid("initialStock is required (or variants, each with its stock)")
	}
	if r.Variants != nil && r.InitialStock != nil {
		return flashline.NewSale{}, flashline.Invalid("initialStock goes with a sale without variants: a sale with variants has each variant's stock")
	}
	initialStock := 0
	if r.InitialStock != nil {
		initialStock = *r.InitialStock
	}
	var variants []flashline.NewVariant
	if r.Variants != nil {
		variants = make([]flashline.NewVariant, len(r.Variants))
		for i, v := range r.Variants {
			variants[i] = flashline.NewVariant{SKU: v.SKU, Title: v.Title, Stock: v.Stock, Buckets: v.Buckets}
		}
	}
	if r.Title != nil && *r.Title == "" {
		return flashline.NewSale{}, flashline.Invalid("title must be 1-120 characters, or absent (the SKU is shown)")
	}
	var price *flashline.Price
	if r.Price != nil {
		if r.Price.Amount == nil {
			return flashline.NewSale{}, flashline.Invalid("price.amount is required (minor units)")
		}
		price = &flashline.Price{Amount: *r.Price.Amount, Currency: r.Price.Currency}
	}
	perInstrument := 0
	if r.PerInstrumentLimit != nil {
		if *r.PerInstrumentLimit < 1 {
			return flashline.NewSale{}, flashline.Invalid("perInstrumentLimit must be between 1 and 1000, or null for no limit")
		}
		perInstrument = *r.PerInstrumentLimit
	}
	n := flashline.NewSale{
		SKU:                   r.SKU,
		Title:                 deref(r.Title),
		ImageURL:              deref(r.ImageURL),
		InitialStock:          initialStock,
		PerCustomerLimit:      r.PerCustomerLimit,
		ReservationTTLSeconds: r.ReservationTTLSeconds,
		OpensAt:               r.OpensAt,
		Admission:             flashline.Admission(r.Admission),
		Buckets:               r.Buckets,
		Fairness:              flashline.Fairness(r.Fairness),
		ChallengeBits:         r.ChallengeBits,
		PerInstrumentLimit:    perInstrument,
		MinAccountAgeSeconds:  r.MinAccountAgeSeconds,
		Confirmation:          flashline.Confirmation(r.Confirmation),
		Gate:                  flashline.Gate(r.Gate),
		Lottery:               r.LotteryRequest.rules(),
		Price:                 price,
		Variants:              variants,
	}
	return n, n.Validate()
}

// handleCreateSale is POST /admin/sales. A sale confirmed by payment needs
// the instance to take payment events (paymentsConfigured).
func handleCreateSale(store flashline.Store, paymentsConfigured bool, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req CreateSaleRequest
		if err := decodeJSON(c, &req); err != nil {
			writeError(c, logger, err)
			return
		}
		n, err := req.NewSale()
		if err == nil && n.Confirmation == flashline.ConfirmByPayment && !paymentsConfigured {
			err = flashline.ErrPaymentsNotConfigured
		}
		if err != nil {
			writeError(c, logger, err)
			return
		}
		sale, err := store.CreateSale(c.Request.Context(), n)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusCreated, NewSaleView(sale))
	}
}

// handleGetSale is GET /admin/sales/{saleId}: the sale's live page
// (console.go) when a browser asks for HTML, the JSON view otherwise.
func handleGetSale(store flashline.Store, gated bool, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		sale, err := store.Sale(c.Request.Context(), c.Param("saleId"))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		if wantsHTML(c) {
			renderSalePage(c, NewSaleView(sale), gated)
			return
		}
		writeJSON(c, http.StatusOK, NewSaleView(sale))
	}
}

// defaultSalePage is GET /admin/sales' page without ?limit.
const defaultSalePage = 50

// maxAfter bounds ?after (a sale id is far shorter).
const maxAfter = 64

// saleQuery reads GET /admin/sales' parameters: state (repeated: any of
// them), limit (1 to flashline.MaxSalePage) and after (the last sale of the
// previous page).
func saleQuery(c *gin.Context) (flashline.SaleQuery, error) {
	q := flashline.SaleQuery{Limit: defaultSalePage, After: c.Query("after")}
	if len(q.After) > maxAfter {
		return q, flashline.Invalid(fmt.Sprintf("after: a sale id, at most %d characters", maxAfter))
	}
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > flashline.MaxSalePage {
			return q, flashline.Invalid(fmt.Sprintf("limit: a whole number from 1 to %d", flashline.MaxSalePage))
		}
		q.Limit = n
	}
	states := c.QueryArray("state")
	if len(states) > len(saleStates) {
		return q, flashline.Invalid(fmt.Sprintf("state: at most %d", len(saleStates)))
	}
	for _, st := range states {
		if !slices.Contains(saleStates, flashline.SaleState(st)) {
			return q, flashline.Invalid(fmt.Sprintf("state: one of %v, not %q", saleStates, st))
		}
		q.States = append(q.States, flashline.SaleState(st))
	}
	return q, nil
}

// saleStates are the states a sale is listed by, as readers see them.
var saleStates = []flashline.SaleState{flashline.StateScheduled, flashline.StateOpen,
	flashline.StateSoldOut, flashline.StatePaused, flashline.StateClosed}

// listSales reads a page of sales: the API's list and the console's.
func listSales(ctx context.Context, store flashline.Store, q flashline.SaleQuery) (api.SaleList, error) {
	ids, err := store.SaleIDs(ctx, q)
	if err != nil {
		return api.SaleList{}, err
	}
	v := api.SaleList{Sales: make([]api.Sale, 0, len(ids))}
	for _, id := range ids {
		s, err := store.Sale(ctx, id)
		if err != nil {
			return api.SaleList{}, err
		}
		v.Sales = append(v.Sales, NewSaleView(s))
	}
	if len(ids) == q.Limit {
		v.Next = ids[len(ids)-1]
	}
	return v, nil
}

// handleListSales is GET /admin/sales[?state=…&limit=…&after=…].
func handleListSales(store flashline.Store, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		q, err := saleQuery(c)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		v, err := listSales(c.Request.Context(), store, q)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, v)
	}
}

// stateRequest is the optional body of the state actions: who acts
// (recorded with the change; default "admin").
type stateRequest struct {
	Operator string `json:"operator"`
}

// handleSaleAction is POST /admin/sales/{saleId}/{open|pause|resume|close}
// (body optional: {operator}).
func handleSaleAction(store flashline.Store, logger *slog.Logger, action flashline.SaleAction) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req stateRequest
		operator, ok := readOperated(c, logger, &req, &req.Operator, true)
		if !ok {
			return
		}
		ctx := flashline.WithOperator(c.Request.Context(), operator)
		sale, err := store.SetSaleState(ctx, c.Param("saleId"), action)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, NewSaleView(sale))
	}
}

// GateRebuilder rebuilds a paused gated sale's counter from the database
// (*gate.Gate).
type GateRebuilder interface {
	Rebuild(ctx context.Context, saleID string) (int64, error)
}

// handleGateRebuild is POST /admin/sales/{saleId}/gate/rebuild.
func handleGateRebuild(g GateRebuilder, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		counter, err := g.Rebuild(c.Request.Context(), c.Param("saleId"))
		if err != nil {
			writeError(c, logger, err)
			return
		}
		writeJSON(c, http.StatusOK, gin.H{"counter": counter})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
