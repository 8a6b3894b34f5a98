package chaos

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestCheckRecorded checks a history written by a failing run again:
// FLASHLINE_CHAOS_RECHECK=chaos-out/<fault>-seed<n>.json.
func TestCheckRecorded(t *testing.T) {
	path := os.Getenv("FLASHLINE_CHAOS_RECHECK")
	if path == "" {
		t.Skip("FLASHLINE_CHAOS_RECHECK names no recorded history")
	}
	rec, err := ReadRecorded(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v := Check(context.Background(), rec.Initial, rec.OpensAt, rec.Customers, rec.Ops, rec.Facts)
	t.Logf("porcupine %s in %s (%d reads left to the timeline)", v.Porcupine, time.Since(start), v.ReadsLeftOut)
	for _, s := range v.Violations {
		t.Errorf("violation: %s", s)
	}
}

// TestSweepVisibleUpToTheLagAfterItsCommit: a read of the sale sent just
// after the sweeper's commit timestamp, which still sees the hold pending,
// is legal: a transaction becomes visible up to VisibilityLag after its
// commit timestamp (found by redis-reset, where porcupine had placed the
// sweep before such a read and called the history illegal).
func TestSweepVisibleUpToTheLagAfterItsCommit(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	expires := t0.Add(time.Second)
	ops := []*Op{
		{Client: 0, Kind: Reserve, Customer: "c", Key: "k", Qty: 1, ResID: "r1", ExpiresAt: expires,
			Call: t0, Return: t0.Add(10 * time.Millisecond), Outcome: OutCreated,
			Attempts: []Attempt{{Status: 201, Start: t0, End: t0.Add(10 * time.Millisecond)}}},
		{Client: 1, Kind: ReadSale, Call: t0.Add(1200*time.Millisecond + 300*time.Microsecond), Return: t0.Add(1210 * time.Millisecond),
			Outcome: OutRead, Counts: Counts{Available: 1, Pending: 1}},
	}
	f := Facts{
		Initial: 2, Stock: 2, LedgerSum: 2, SaleState: "open", InvariantOK: true,
		Rows: []Row{{ID: "r1", Customer: "c", Key: "k", State: OutExpired, Qty: 1, CreatedAt: t0.Add(5 * time.Millisecond), ExpiresAt: expires,
			ExpiredAt: at(1100 * time.Millisecond), RestockedAt: at(1100 * time.Millisecond), Committed: at(1200 * time.Millisecond)}},
		Ledger: map[string][]LedgerRow{
			"":   {{Reason: "initial", Delta: 2, Committed: at(-time.Second)}},
			"r1": {{Reason: "reserve", Delta: -1, Committed: at(8 * time.Millisecond)}, {Reason: "expire", Delta: 1, Committed: at(1200 * time.Millisecond)}},
		},
		Orders: map[string][]Order{},
	}
	v := Check(context.Background(), 2, time.Time{}, []string{"c"}, ops, f)
	if v.Porcupine != "Ok" || len(v.Violations) > 0 {
		t.Fatalf("porcupine %s, violations %v", v.Porcupine, v.Violations)
	}
}
