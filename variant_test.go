package flashline_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestNewSaleVariants: a sale's variants are checked at creation, each bad
// one answered with what is wrong and where; a good list gives the sale
// its stock and buckets.
func TestNewSaleVariants(t *testing.T) {
	v := func(sku string, stock int) flashline.NewVariant { return flashline.NewVariant{SKU: sku, Stock: stock} }
	many := make([]flashline.NewVariant, flashline.MaxVariants+1)
	for i := range many {
		many[i] = v("v"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26)), 1)
	}
	bad := map[string]struct {
		sale flashline.NewSale
		want string
	}{
		"None":             {flashline.NewSale{Variants: []flashline.NewVariant{}}, "variants must be 1-100"},
		"TooMany":          {flashline.NewSale{Variants: many}, "variants must be 1-100"},
		"LotteryAny":       {flashline.NewSale{Variants: []flashline.NewVariant{v("S", 1), v("any", 1)}, Admission: flashline.AdmissionLottery}, `variants[1].sku "any"`},
		"BadSKU":           {flashline.NewSale{Variants: []flashline.NewVariant{v("S", 1), v("a b", 1)}}, "variants[1].sku must be"},
		"EmptySKU":         {flashline.NewSale{Variants: []flashline.NewVariant{v("", 1)}}, "variants[0].sku must be"},
		"Twice":            {flashline.NewSale{Variants: []flashline.NewVariant{v("S", 1), v("S", 2)}}, "variants[1].sku S appears twice"},
		"NoStock":          {flashline.NewSale{Variants: []flashline.NewVariant{v("S", 0)}}, "variants[0].stock must be"},
		"TooMuchStock":     {flashline.NewSale{Variants: []flashline.NewVariant{v("S", 100_000_001)}}, "variants[0].stock must be"},
		"TooMuchInAll":     {flashline.NewSale{Variants: []flashline.NewVariant{v("S", 60_000_000), v("M", 60_000_000)}}, "add up to at most"},
		"BucketsOverStock": {flashline.NewSale{Variants: []flashline.NewVariant{{SKU: "S", Stock: 2, Buckets: 3}}}, "variants[0].buckets must not exceed"},
		"TooManyBuckets":   {flashline.NewSale{Variants: []flashline.NewVariant{{SKU: "S", Stock: 100, Buckets: 65}}}, "variants[0].buckets must be between"},
		"StockBeside":      {flashline.NewSale{InitialStock: 5, Variants: []flashline.NewVariant{v("S", 1)}}, "initialStock goes with a sale without variants"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			c.sale.SKU = "drop_1"
			err := c.sale.Validate()
			require.Error(t, err)
			var inv *flashline.InvalidError
			require.ErrorAs(t, err, &inv)
			require.Contains(t, err.Error(), c.want)
		})
	}

	good := flashline.NewSale{SKU: "drop_1", Variants: []flashline.NewVariant{v("S", 100), {SKU: "M", Stock: 100, Buckets: 2}, v("L", 100)}}
	require.NoError(t, good.Validate())
	require.Equal(t, 300, good.InitialStock)
	require.Equal(t, 2, good.Buckets)
	require.Equal(t, "S", good.Variants[0].Title, "a variant without a title is shown by its SKU")

	// The Redis gate keeps a counter per variant (gate/): a gated sale may
	// have variants.
	gated := flashline.NewSale{SKU: "drop_2", Gate: flashline.GateRedis, Variants: []flashline.NewVariant{v("S", 3), v("M", 4)}}
	require.NoError(t, gated.Validate())
	require.Equal(t, 7, gated.InitialStock)
}
