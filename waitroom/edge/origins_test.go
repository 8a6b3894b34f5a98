package edge_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitroom/edge"
)

// CustomerOrigin spreads customers evenly over the origins, even customers
// whose keys differ in a digit or two.
func TestCustomerOriginSpreads(t *testing.T) {
	t.Parallel()
	const customers = 8000
	for n := 1; n <= 4; n++ {
		at := make([]int, n)
		for i := range customers {
			at[edge.CustomerOrigin("Bearer customer-"+strconv.Itoa(i), n)]++
		}
		for o, got := range at {
			share := float64(got) * float64(n) / customers
			require.InDelta(t, 1, share, 0.03, "origin %d of %d: %d of %d customers", o, n, got, customers)
		}
	}
}

// TestCustomerOriginIgnoresRespelling: one token, spelled as the origins
// accept it (the scheme's case, spaces, the signature's last character),
// goes to one origin: a shopper cannot choose theirs.
func TestCustomerOriginIgnoresRespelling(t *testing.T) {
	t.Parallel()
	for i := range 200 {
		tok := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjLSIsImkiOiI" + strconv.Itoa(i) + "In0.c2lnbmF0dXJl"
		for n := 2; n <= 5; n++ {
			want := edge.CustomerOrigin("Bearer "+tok, n)
			for _, h := range []string{"bearer " + tok, "BEARER    " + tok + "  ", "Bearer " + tok[:len(tok)-1] + "Z", "Bearer \t" + tok} {
				require.Equal(t, want, edge.CustomerOrigin(h, n), "%q over %d", h, n)
			}
		}
	}
}
