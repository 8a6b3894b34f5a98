package handlers_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/handlers"
)

// TestRepairViewNamesVariants: the console's repair answer names each
// bucket's variant and each variant's total in a sale with variants, and
// in a sale without variants is the document it was (no variant keys).
func TestRepairViewNamesVariants(t *testing.T) {
	t.Parallel()
	plain := flashline.RepairPlan{SaleID: "s1", State: flashline.StatePaused, Buckets: []flashline.RepairBucket{
		{Bucket: 0, Stock: 4, Opening: 4, Implied: 4, Ledger: 4},
		{Bucket: 1, Stock: 5, Opening: 3, Held: 1, Implied: 2, Ledger: 3},
	}}
	b, err := json.Marshal(handlers.NewRepairView(plain))
	require.NoError(t, err)
	require.JSONEq(t, `{"saleId":"s1","state":"paused","needed":true,"applied":false,
		"buckets":[{"bucket":0,"stock":4,"implied":4,"ledger":4,"unrecorded":0,"correction":0},
		           {"bucket":1,"stock":5,"implied":2,"ledger":3,"unrecorded":2,"correction":-3}],
		"total":{"bucket":-1,"stock":9,"implied":6,"ledger":7,"unrecorded":2,"correction":-3}}`, string(b))

	variants := flashline.RepairPlan{SaleID: "s2", State: flashline.StatePaused, Buckets: []flashline.RepairBucket{
		{Bucket: 0, Variant: "S", Stock: 2, Opening: 3, Held: 1, Implied: 2, Ledger: 2},
		{Bucket: 64, Variant: "M", Stock: 3, Opening: 3, Implied: 3, Ledger: 3},
		{Bucket: 65, Variant: "M", Stock: 4, Opening: 2, Implied: 2, Ledger: 2},
	}}
	v := handlers.NewRepairView(variants)
	require.Equal(t, []string{"S", "M", "M"}, []string{v.Buckets[0].Variant, v.Buckets[1].Variant, v.Buckets[2].Variant})
	require.Len(t, v.Variants, 2)
	require.Equal(t, "S", v.Variants[0].Variant)
	require.Equal(t, 0, v.Variants[0].Correction)
	require.Equal(t, "M", v.Variants[1].Variant)
	require.Equal(t, 7, v.Variants[1].Stock)
	require.Equal(t, -2, v.Variants[1].Correction)
	require.Equal(t, 2, v.Variants[1].Unrecorded)
	require.Empty(t, v.Total.Variant)
}
