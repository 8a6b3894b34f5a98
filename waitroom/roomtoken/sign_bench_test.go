package roomtoken_test

import (
	"testing"
	"time"

	"github.com/flashline/flashline/waitroom/roomtoken"
)

// BenchmarkSignTicket is what signing a new pre-open ticket costs: the edge
// signs one per new customer in a crowd before the open.
func BenchmarkSignTicket(b *testing.B) {
	k, err := roomtoken.ParseKeyring("b1:bench-waitroom-key-0123456789abcdef")
	if err != nil {
		b.Fatal(err)
	}
	t := roomtoken.Ticket{SaleID: "sale_01M98BYEW9VE5Y9X8M48DE3MNA", CustomerID: "edge-bench-17",
		ArrivedAt: time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC), Position: 1, PreOpen: true, Draw: 11465074282443589526}
	b.ReportAllocs()
	for b.Loop() {
		_ = k.SignTicket(t)
	}
}
