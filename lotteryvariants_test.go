package flashline_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestLotteryAwards: the award rule of a lottery with variants, rank by
// rank: the variant named while a unit of it is left (none after, whatever
// is left of others); any takes the first variant, in the sale's order,
// with a unit left; once every unit is awarded, nobody wins.
func TestLotteryAwards(t *testing.T) {
	variants := []flashline.LotteryVariant{{SKU: "S", Units: 1}, {SKU: "M", Units: 2}, {SKU: "L", Units: 1}}
	choices := []string{"M", "", "S", "S", "", "M", "L", "", ""}
	want := []string{"M", "S", "", "", "M", "", "L", "", ""}
	require.Equal(t, want, flashline.LotteryAwards(choices, variants))
	require.Equal(t, []string{"", ""}, flashline.LotteryAwards([]string{"XL", ""}, nil))

	// The choice is committed: another choice is another leaf, "any" the
	// v2 leaf.
	r := flashline.RegistrantOf("sale_1", "cust_1")
	require.NotEqual(t, flashline.RegistrantChoiceLeaf(r, "S"), flashline.RegistrantChoiceLeaf(r, "M"))
	require.Equal(t, flashline.RegistrantLeaf(r), flashline.RegistrantChoiceLeaf(r, ""))

	for named, want := range map[string]string{"": "", "any": "", "M": "M"} {
		got, err := flashline.VariantChoice(named, variants)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := flashline.VariantChoice("XL", variants)
	require.Error(t, err)
	_, err = flashline.VariantChoice("S", nil)
	require.Error(t, err, "a lottery without variants takes no variant")
	got, err := flashline.VariantChoice("", nil)
	require.NoError(t, err)
	require.Empty(t, got)
}
