package gate

import (
	"context"

	"github.com/flashline/flashline"
)

// For the tests of package gate_test (which import postgres, which imports
// gate).

func StockKey(saleID string) string { return keysOf(saleID).stock }
func SeqKey(saleID string) string   { return keysOf(saleID).seq }

// VariantStockKey is the counter of a variant of a sale with variants.
func VariantStockKey(saleID, sku string) string { return keysOf(saleID).counter(sku) }

// Step runs the gate step alone: a request that took a unit and died.
func (g *Gate) Step(ctx context.Context, req flashline.ReserveRequest, limit int) (seq int64, fresh bool, err error) {
	out, err := g.step(ctx, req, limit, req.Variant)
	return out.seq, out.fresh, err
}

// WaitGiveBacks waits for the units given back off the request path.
func (g *Gate) WaitGiveBacks() { g.givingBack.Wait() }

// Apply applies movements as a relay does.
func (g *Gate) Apply(ctx context.Context, moves []flashline.GateMovement) ([]string, error) {
	r := relayRun{g: g, skip: map[string]bool{}, aside: map[string]bool{}}
	return r.apply(ctx, moves)
}

func EpochKey(saleID string) string   { return keysOf(saleID).epoch }
func AppliedKey(saleID string) string { return keysOf(saleID).applied }

// ViewDetail is what a drift incident of the sale would say now ("" when
// the sale could not be read).
func ViewDetail(ctx context.Context, g *Gate, saleID string) string {
	v, _, err := g.measure(ctx, saleID)
	if err != nil {
		return ""
	}
	return v.detail()
}
