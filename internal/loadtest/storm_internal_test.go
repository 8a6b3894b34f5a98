package loadtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/client"
)

// TestStormVariants: the storm's units are split over its variants as
// evenly as can be, the first ones taking what is left over, and checkout i
// names variant i mod the variants; a storm without variants has none.
func TestStormVariants(t *testing.T) {
	sale := client.NewSale{SKU: "sku_storm", InitialStock: 10}
	skus := stormVariants(&sale, 10, 3, 2)
	require.Equal(t, []string{"v1", "v2", "v3"}, skus)
	require.Equal(t, []client.NewVariant{{SKU: "v1", Stock: 4, Buckets: 2}, {SKU: "v2", Stock: 3, Buckets: 2}, {SKU: "v3", Stock: 3, Buckets: 2}}, sale.Variants)
	require.Zero(t, sale.InitialStock)
	named := map[string]int{}
	for i := range 10 {
		named[skus[i%len(skus)]]++
	}
	for _, v := range sale.Variants {
		require.Equal(t, v.Stock, named[v.SKU], "variant %s", v.SKU)
	}

	plain := client.NewSale{SKU: "sku_storm", InitialStock: 10}
	require.Nil(t, stormVariants(&plain, 10, 0, 1))
	require.Equal(t, 10, plain.InitialStock)
	require.Empty(t, plain.Variants)
}
