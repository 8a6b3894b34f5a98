package roomtoken

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAdmissionRoundTrip(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	tests := []struct {
		name string
		in   Admission
		want Admission // zero means in
	}{
		{"Plain", goldenAdmission(), Admission{}},
		{"FromTicket", Admission{ID: AdmissionID(goldenTicket()), SaleID: "s", CustomerID: "c", ExpiresAt: t0}, Admission{}},
		{"IDAlphabet", Admission{ID: "Az09-_", SaleID: "s", CustomerID: "c", ExpiresAt: t0}, Admission{}},
		{"NotASCII", Admission{ID: "a", SaleID: "vente-été", CustomerID: "客户 🛒 <&>", ExpiresAt: t0}, Admission{}},
		{"LongestWorstIDs", Admission{ID: strings.Repeat("_", MaxIDLen), SaleID: worst, CustomerID: worst, ExpiresAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC)}, Admission{}},
		{"LongestWorstRunes", Admission{ID: strings.Repeat("-", MaxIDLen), SaleID: worstRunes, CustomerID: worstRunes, ExpiresAt: t0}, Admission{}},
		{"WonVariant", Admission{ID: "reg_1", SaleID: "s", CustomerID: "c", ExpiresAt: t0, Variant: "tee-red.M_2"}, Admission{}},
		{"LongestWithVariant", Admission{ID: strings.Repeat("_", MaxIDLen), SaleID: worst, CustomerID: worst, ExpiresAt: time.Date(2200, 12, 31, 23, 59, 59, 0, time.UTC), Variant: strings.Repeat("v", 64)}, Admission{}},
		{
			"KeptToTheSecond",
			Admission{ID: "a", SaleID: "s", CustomerID: "c", ExpiresAt: t0.Add(time.Second - 1)},
			Admission{ID: "a", SaleID: "s", CustomerID: "c", ExpiresAt: t0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := tt.want
			if want == (Admission{}) {
				want = tt.in
			}
			tok := k.SignAdmission(tt.in)
			require.LessOrEqual(t, len(tok), MaxTokenLen)
			require.True(t, strings.HasPrefix(tok, goldenHeaderK1+"."), tok)
			got, err := k.ParseAdmission(tok)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, tok, k.SignAdmission(got), "a parsed admission signs to the same token")
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	a := goldenAdmission() // sale_1, cust_1, expires t0+2m
	tests := []struct {
		name     string
		sale     string
		customer string
		now      time.Time
		want     error // nil means admitted
	}{
		{"Good", "sale_1", "cust_1", t0, nil},
		{"GoodUntilTheLastInstant", "sale_1", "cust_1", a.ExpiresAt.Add(-time.Nanosecond), nil},
		{"ExpiredAtExpiry", "sale_1", "cust_1", a.ExpiresAt, ErrAdmissionExpired},
		{"ExpiredAfter", "sale_1", "cust_1", a.ExpiresAt.Add(time.Hour), ErrAdmissionExpired},
		{"OtherSale", "sale_2", "cust_1", t0, ErrAdmissionOtherSale},
		{"OtherCustomer", "sale_1", "cust_2", t0, ErrAdmissionOtherCustomer},
		{"CustomerCaseMatters", "sale_1", "CUST_1", t0, ErrAdmissionOtherCustomer},
		{"OtherSaleWinsOverExpiry", "sale_2", "cust_2", a.ExpiresAt, ErrAdmissionOtherSale},
		{"OtherCustomerWinsOverExpiry", "sale_1", "cust_2", a.ExpiresAt, ErrAdmissionOtherCustomer},
		{"EmptyCaller", "", "", t0, ErrAdmissionOtherSale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := a.Check(tt.sale, tt.customer, tt.now)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.ErrorContains(t, err, "check admission "+goldenAdmissionID)
			for _, other := range []error{ErrAdmissionExpired, ErrAdmissionOtherSale, ErrAdmissionOtherCustomer} {
				if other != tt.want {
					require.NotErrorIs(t, err, other)
				}
			}
		})
	}

	t.Run("ZeroAdmissionChecksNothingIn", func(t *testing.T) {
		t.Parallel()
		require.Error(t, Admission{}.Check("", "", t0))
	})
}

func BenchmarkParseAdmission(b *testing.B) {
	k := testRing(b, "k1:"+secret1)
	tok := k.SignAdmission(goldenAdmission())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.ParseAdmission(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAdmissionVariantClaim: the won variant is a signed claim, written only
// when there is one, and a claim that is no variant's SKU is refused.
func TestAdmissionVariantClaim(t *testing.T) {
	t.Parallel()
	k := testRing(t, "k1:"+secret1)
	plain := Admission{ID: "reg_1", SaleID: "s", CustomerID: "c", ExpiresAt: t0}
	require.NotContains(t, claimsOf(t, k.SignAdmission(plain)), `"variant"`)
	won := plain
	won.Variant = "RED"
	require.Contains(t, claimsOf(t, k.SignAdmission(won)), `"variant":"RED"`)
	for _, bad := range []string{`""`, `"a b"`, `"` + strings.Repeat("v", 65) + `"`, `1`} {
		tok := k.keys[0].sign([]byte(`{"aud":"flashline-admission","sub":"c","jti":"reg_1","exp":` +
			strconv.FormatInt(t0.Unix(), 10) + `,"sale":"s","variant":` + bad + `}`))
		_, err := k.ParseAdmission(tok)
		requireSentinel(t, err, ErrMalformed)
	}
}

func claimsOf(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	b, err := b64.DecodeString(parts[1])
	require.NoError(t, err)
	return string(b)
}
