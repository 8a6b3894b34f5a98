package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// A run on a sale with variants (Fault.Variants, issue 49): the sale is
// created with variants, its stock split among them; the buyers choose
// one at random and switch when theirs is sold out (workload.go); the
// model holds each variant's units (VariantsModel), each variant_sold_out
// is checked against its variant's timeline, and its accounting against
// the database here.

// splitVariants gives sale variants in the proportions parts (none: it is
// left without), its InitialStock split among them (each at least a unit,
// the last the rest), and returns their SKUs.
func splitVariants(sale *client.NewSale, parts []int) []string {
	if len(parts) == 0 {
		return nil
	}
	sum := 0
	for _, p := range parts {
		sum += p
	}
	skus := make([]string, len(parts))
	left := sale.InitialStock
	for i, p := range parts {
		skus[i] = fmt.Sprintf("V%d", i+1)
		units := max(1, sale.InitialStock*p/sum)
		if i == len(parts)-1 {
			units = left
		}
		left -= units
		sale.Variants = append(sale.Variants, client.NewVariant{SKU: skus[i], Stock: units})
	}
	return skus
}

// createSale creates sale; one with variants is sent without initialStock
// (each variant has its own).
func createSale(ctx context.Context, c *client.Client, sale client.NewSale) (client.Result[client.Sale], error) {
	if len(sale.Variants) == 0 {
		return c.CreateSale(ctx, testserver.AdminToken, sale)
	}
	b, err := json.Marshal(sale)
	if err != nil {
		return client.Result[client.Sale]{}, err
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		return client.Result[client.Sale]{}, err
	}
	delete(body, "initialStock")
	if b, err = json.Marshal(body); err != nil {
		return client.Result[client.Sale]{}, err
	}
	return c.CreateSaleJSON(ctx, testserver.AdminToken, string(b))
}

// variantsSold is each variant's units after the run, by state, for the
// report.
func variantsSold(f Facts) string {
	units := map[string]map[string]int{}
	for _, row := range f.Rows {
		if units[row.Variant] == nil {
			units[row.Variant] = map[string]int{}
		}
		units[row.Variant][row.State] += row.Qty
	}
	parts := make([]string, len(f.Variants))
	for i, v := range f.Variants {
		u := units[v.SKU]
		parts[i] = fmt.Sprintf("%s %d confirmed, %d pending, %d left of %d (invariant ok %v)", v.SKU, u[OutConfirmed], u[OutPending], v.Stock, v.Initial, v.OK)
	}
	return strings.Join(parts, "; ")
}

// checkVariants holds each variant of a sale with variants to its own
// units, as check holds the sale: its stock + pending + confirmed = its
// initial units, none held or sold beyond them, its ledger sums to its
// stock, the database's invariant of the variant holds; every hold is of
// one of them, and their units add up to the sale's.
func checkVariants(f Facts, bad, lost func(format string, args ...any)) {
	if len(f.Variants) == 0 {
		return
	}
	vunits := map[string]map[string]int{}
	for _, row := range f.Rows {
		if vunits[row.Variant] == nil {
			vunits[row.Variant] = map[string]int{}
		}
		vunits[row.Variant][row.State] += row.Qty
	}
	sum := 0
	for _, fv := range f.Variants {
		u := vunits[fv.SKU]
		delete(vunits, fv.SKU)
		sum += fv.Initial
		if got := fv.Stock + u[OutPending] + u[OutConfirmed]; got != fv.Initial {
			bad("variant %s: stock %d + pending %d + confirmed %d = %d, initial %d", fv.SKU, fv.Stock, u[OutPending], u[OutConfirmed], got, fv.Initial)
		}
		if u[OutPending]+u[OutConfirmed] > fv.Initial || fv.Stock < 0 {
			bad("variant %s oversold: %d units held or sold of %d, stock %d", fv.SKU, u[OutPending]+u[OutConfirmed], fv.Initial, fv.Stock)
		}
		if fv.LedgerSum != fv.Stock {
			bad("variant %s: its ledger sums to %d, its stock is %d", fv.SKU, fv.LedgerSum, fv.Stock)
		}
		if !fv.OK {
			lost("variant %s: the database's invariant of the variant (sale_variant_invariant) does not hold", fv.SKU)
		}
	}
	for sku, u := range vunits {
		bad("reservations of no variant of the sale (%q): %v", sku, u)
	}
	if sum != f.Initial {
		bad("the variants' initial units add up to %d, the sale's are %d", sum, f.Initial)
	}
}

// GateVariantFacts is one variant's counter of a gated sale with variants
// at the end: the admin view's counter and drift, and the units of the
// variant's stock rows.
type GateVariantFacts struct {
	SKU                   string
	Counter, Drift, Stock int64
}

// variantCounters is, in a gated sale with variants, each variant's counter
// and drift as the admin view s lists them, with its stock rows' units
// (bucket / 64 is the variant's position); none in a sale without.
func (r *Run) variantCounters(ctx context.Context, s client.Sale) ([]GateVariantFacts, error) {
	if len(r.cfg.Fault.Variants) == 0 {
		return nil, nil
	}
	rows, err := r.DB.Query(ctx, `SELECT v.sku, coalesce(sum(s.quantity), 0)::bigint FROM sale_variants v
		LEFT JOIN stock s ON s.sale_id = v.sale_id AND s.bucket / 64 = v.position
		WHERE v.sale_id = $1 GROUP BY v.sku, v.position ORDER BY v.position`, r.SaleID)
	if err != nil {
		return nil, fmt.Errorf("read the variants' stock: %w", err)
	}
	stock, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		SKU   string
		Units int64
	}])
	if err != nil {
		return nil, fmt.Errorf("read the variants' stock: %w", err)
	}
	if len(s.Gate.Variants) != len(stock) {
		return nil, fmt.Errorf("the gate lists %d variants' counters, the sale has %d variants", len(s.Gate.Variants), len(stock))
	}
	out := make([]GateVariantFacts, len(stock))
	for i, v := range s.Gate.Variants {
		if v.SKU != stock[i].SKU {
			return nil, fmt.Errorf("the gate's counter %d is of variant %s, the sale's variant %d is %s", i, v.SKU, i, stock[i].SKU)
		}
		out[i] = GateVariantFacts{SKU: v.SKU, Counter: v.Counter, Drift: v.Drift, Stock: stock[i].Units}
	}
	return out, nil
}

// formatVariantCounters is each variant's counter, drift and stock rows'
// units, for a note or a violation ("" for none).
func formatVariantCounters(vs []GateVariantFacts) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "; variant %s: counter %d, drift %d, stock %d", v.SKU, v.Counter, v.Drift, v.Stock)
	}
	return b.String()
}

// variantsAgree reports whether every variant's counter agrees with its
// stock rows: drift 0, the counter their units.
func variantsAgree(vs []GateVariantFacts) bool {
	for _, v := range vs {
		if v.Drift != 0 || v.Counter != v.Stock {
			return false
		}
	}
	return true
}

// owedBack counts the units owed back to the gate's counters (gate_outbox)
// by reason and variant, and those never applied, for the report.
func owedBack(ms []GateMovement) string {
	counts := map[string]int{}
	for _, m := range ms {
		k := m.Reason + " to " + m.Variant
		if m.Applied == nil {
			k += " (not applied)"
		}
		counts[k] += m.Qty
	}
	if len(counts) == 0 {
		return "none"
	}
	return FormatCounts(counts)
}
