package auth_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/flashline/flashline/auth"
)

// TestFastCustomerAgreesOnExtremeTimes: FastCustomer read exp and nbf with
// time.Unix, which overflows near the int64 limit, so an nbf of
// 9223371974719179263 came out in the past and FastCustomer accepted a token
// Customer (golang-jwt) refuses as not valid yet. Now it leaves any exp or nbf
// outside ±2^53 to Customer: wherever it decides, it decides as Customer does.
func TestFastCustomerAgreesOnExtremeTimes(t *testing.T) {
	t.Parallel()
	v := newVerifier(t)
	now := time.Now()
	exp := itoa(now.Add(24 * time.Hour).Unix())
	var times []int64
	for _, base := range []int64{math.MaxInt64, math.MaxInt64 - 62135596800, 1 << 62, 1 << 53, 253402300799, 0,
		-253402300799, -(1 << 53), -(1 << 62), math.MinInt64 + 62135596800, math.MinInt64} {
		for d := int64(-2048); d <= 2048; d += 256 {
			if n := base + d; (d <= 0 || n > base) && (d >= 0 || n < base) { // no wrap
				times = append(times, n)
			}
		}
	}
	for _, n := range times {
		for _, claims := range []string{
			`{"sub":"a","exp":` + exp + `,"nbf":` + itoa(n) + `}`,
			`{"sub":"a","exp":` + itoa(n) + `}`,
		} {
			token := signClaims(t, `{"alg":"HS256","typ":"JWT"}`, claims)
			var s auth.Scratch
			id, ok := v.FastCustomer(token, &s, now)
			got := strings.Clone(id)
			c, err := v.Customer(token)
			if ok {
				if err != nil || c.ID != got {
					t.Fatalf("%s: FastCustomer accepted it as %q; Customer: %q, %v", claims, got, c.ID, err)
				}
			} else if n >= -(1<<53) && n <= 1<<53 && err == nil {
				t.Fatalf("%s: within ±2^53 FastCustomer decides, and refused what Customer accepts", claims)
			}
		}
	}
}
