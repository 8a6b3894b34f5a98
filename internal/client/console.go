package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/flashline/flashline/api"
)

// The console's JSON routes (docs/console.md): the live snapshot, the report
// and the repair, in the shapes of package api.

// Live is GET /admin/sales/{id}/live.
func (c *Client) Live(ctx context.Context, adminToken, saleID string) (Result[api.Live], error) {
	return call[api.Live](ctx, c, Request{Method: http.MethodGet, Path: adminSalePath(saleID) + "/live", Token: adminToken})
}

// Report is GET /admin/sales/{id}/report (JSON).
func (c *Client) Report(ctx context.Context, adminToken, saleID string) (Result[api.Report], error) {
	return call[api.Report](ctx, c, Request{Method: http.MethodGet, Path: adminSalePath(saleID) + "/report", Token: adminToken})
}

// Repair is POST /admin/sales/{id}/repair: the plan, written with apply.
func (c *Client) Repair(ctx context.Context, adminToken, saleID, operator string, apply bool) (Result[api.Repair], error) {
	body, err := json.Marshal(struct {
		Operator string `json:"operator,omitempty"`
		Apply    bool   `json:"apply"`
	}{operator, apply})
	if err != nil {
		return Result[api.Repair]{}, err
	}
	return call[api.Repair](ctx, c, Request{Method: http.MethodPost, Path: adminSalePath(saleID) + "/repair", Token: adminToken, Body: string(body)})
}
