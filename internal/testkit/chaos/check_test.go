package chaos

import (
	"context"
	"os"
	"strings"
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

// TestMinimizeRecorded shrinks a recorded history that porcupine finds not
// linearizable to a minimal one that it still does (each operation left
// out in turn, kept out when the rest stays illegal), and logs it:
// FLASHLINE_CHAOS_RECHECK=chaos-out/<fault>-seed<n>.json. The 201s of holds
// the sweeper expired are kept (an expiry of a hold no client was given is
// illegal by itself).
func TestMinimizeRecorded(t *testing.T) {
	path := os.Getenv("FLASHLINE_CHAOS_RECHECK")
	if path == "" {
		t.Skip("FLASHLINE_CHAOS_RECHECK names no recorded history")
	}
	rec, err := ReadRecorded(path)
	if err != nil {
		t.Fatal(err)
	}
	illegal := func(ops []*Op) bool {
		v := Check(context.Background(), rec.Initial, rec.OpensAt, rec.Customers, ops, rec.Facts)
		return v.Porcupine == "Illegal"
	}
	ops := rec.Ops
	if !illegal(ops) {
		t.Skip("porcupine finds the history linearizable")
	}
	expired := map[string]bool{}
	for _, r := range rec.Facts.Rows {
		if r.State == OutExpired {
			expired[r.ID] = true
		}
	}
	for shrunk := true; shrunk; {
		shrunk = false
		for i := len(ops) - 1; i >= 0; i-- {
			if ops[i].Kind == Reserve && ops[i].Outcome == OutCreated && expired[ops[i].ResID] {
				continue
			}
			try := append(append([]*Op(nil), ops[:i]...), ops[i+1:]...)
			if illegal(try) {
				ops, shrunk = try, true
			}
		}
	}
	for _, op := range ops {
		t.Logf("%s %s %3d %s", op.Call.Format("15:04:05.000"), op.Return.Format("15:04:05.000"), op.Client, describe(op))
		for _, a := range op.Attempts {
			t.Logf("      %s-%s instance %d: %s", a.Start.Format("15:04:05.000"), a.End.Format("15:04:05.000"), a.Instance, a.Label())
		}
	}
}

// TestLimitReachedWithoutAHoldIsIllegal: limit_reached is the answer to a
// customer with an active hold, never to one who holds nothing (found by
// redis-kill, where the gate refused a customer on the limit for units of
// a refused request still on their way back: TestGateLimitSeesAUnitStillInFlight
// in package gate).
func TestLimitReachedWithoutAHoldIsIllegal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	limit := &Op{Client: 0, Kind: Reserve, Customer: "c", Key: "k2", Qty: 1,
		Call: t0, Return: t0.Add(10 * time.Millisecond), Outcome: OutLimitReached,
		Attempts: []Attempt{{Status: 409, Code: "limit_reached", Start: t0, End: t0.Add(10 * time.Millisecond)}}}
	f := Facts{
		Initial: 2, Stock: 2, LedgerSum: 2, SaleState: "open", InvariantOK: true,
		Ledger: map[string][]LedgerRow{"": {{Reason: "initial", Delta: 2, Committed: &t0}}},
		Orders: map[string][]Order{},
	}
	v := Check(context.Background(), 2, time.Time{}, []string{"c"}, []*Op{limit}, f)
	if v.Porcupine != "Illegal" || len(v.Violations) == 0 {
		t.Fatalf("limit_reached without a hold: porcupine %s, violations %v", v.Porcupine, v.Violations)
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

// A confirm that committed a second before its client was answered (its
// flush stalled) may be missed by a read of the sale in between, but not by
// one sent after the answer (found by failover, on a just-promoted standby).
func TestReadMissesACommitUntilItsAnswer(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	expires := t0.Add(time.Minute)
	reserve := &Op{Client: 0, Kind: Reserve, Customer: "c", Key: "k", Qty: 1, ResID: "r1", ExpiresAt: expires,
		Call: t0, Return: t0.Add(10 * time.Millisecond), Outcome: OutCreated,
		Attempts: []Attempt{{Status: 201, Start: t0, End: t0.Add(10 * time.Millisecond)}}}
	confirm := &Op{Client: 0, Kind: Confirm, Customer: "c", ResID: "r1", ExpiresAt: expires, OrderID: "o1",
		Call: t0.Add(100 * time.Millisecond), Return: t0.Add(1200 * time.Millisecond), Outcome: OutConfirmed,
		Attempts: []Attempt{{Status: 200, Start: t0.Add(100 * time.Millisecond), End: t0.Add(1200 * time.Millisecond)}}}
	read := func(d time.Duration) *Op {
		return &Op{Client: 1, Kind: ReadSale, Call: t0.Add(d), Return: t0.Add(d + 5*time.Millisecond),
			Outcome: OutRead, Counts: Counts{Available: 1, Pending: 1}}
	}
	f := Facts{
		Initial: 2, Stock: 1, LedgerSum: 1, SaleState: "open", InvariantOK: true,
		Rows: []Row{{ID: "r1", Customer: "c", Key: "k", State: OutConfirmed, Qty: 1, CreatedAt: t0.Add(5 * time.Millisecond), ExpiresAt: expires,
			ConfirmedAt: at(110 * time.Millisecond), Committed: at(110 * time.Millisecond)}},
		Ledger: map[string][]LedgerRow{
			"":   {{Reason: "initial", Delta: 2, Committed: at(-time.Second)}},
			"r1": {{Reason: "reserve", Delta: -1, Committed: at(8 * time.Millisecond)}},
		},
		Orders: map[string][]Order{"r1": {{ID: "o1", Committed: at(110 * time.Millisecond)}}},
	}
	v := Check(context.Background(), 2, time.Time{}, []string{"c"}, []*Op{reserve, confirm, read(900 * time.Millisecond)}, f)
	if len(v.Violations) > 0 {
		t.Fatalf("a read before the confirm's answer: violations %v", v.Violations)
	}
	v = Check(context.Background(), 2, time.Time{}, []string{"c"}, []*Op{reserve, confirm, read(1300 * time.Millisecond)}, f)
	if len(v.Violations) == 0 {
		t.Fatal("a read after the confirm's answer that missed it passed")
	}
}

// A 201 the database has no row of is a violation in Check and a loss in
// CheckLossy (a failover with asynchronous replication), which still fails
// on more units sold than the stock.
func TestLossyCheckReportsLossesFailsOversell(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	expires := t0.Add(time.Minute)
	created := func(c int, id string) *Op {
		return &Op{Client: c, Kind: Reserve, Customer: []string{"a", "b"}[c], Key: "k", Qty: 1, ResID: id, ExpiresAt: expires,
			Call: t0, Return: t0.Add(10 * time.Millisecond), Outcome: OutCreated,
			Attempts: []Attempt{{Status: 201, Start: t0, End: t0.Add(10 * time.Millisecond)}}}
	}
	// a's hold was lost with the old primary; b's is there.
	ops := []*Op{created(0, "lost"), created(1, "kept")}
	f := Facts{
		Initial: 2, Stock: 1, LedgerSum: 1, SaleState: "open", InvariantOK: true,
		Rows: []Row{{ID: "kept", Customer: "b", Key: "k", State: OutPending, Qty: 1, CreatedAt: t0.Add(5 * time.Millisecond), ExpiresAt: expires,
			Committed: at(8 * time.Millisecond)}},
		Ledger: map[string][]LedgerRow{
			"":     {{Reason: "initial", Delta: 2, Committed: at(-time.Second)}},
			"kept": {{Reason: "reserve", Delta: -1, Committed: at(8 * time.Millisecond)}},
		},
		Orders: map[string][]Order{},
	}
	customers := []string{"a", "b"}
	if v := Check(context.Background(), 2, time.Time{}, customers, ops, f); len(v.Violations) == 0 {
		t.Fatal("Check passed a 201 without a row")
	}
	v := CheckLossy(context.Background(), 2, time.Time{}, customers, ops, f)
	if len(v.Violations) > 0 || len(v.Losses) == 0 {
		t.Fatalf("CheckLossy: violations %v, losses %v; want none and some", v.Violations, v.Losses)
	}
	if l := Losses(2, ops, f); l.Acknowledged != 2 || l.Missing != 1 || !l.Lost() {
		t.Fatalf("Losses: %+v; want 2 acknowledged, 1 missing", l)
	}
	f.Stock, f.LedgerSum = -1, -1 // two more units sold than there were
	if v := CheckLossy(context.Background(), 2, time.Time{}, customers, ops, f); len(v.Violations) == 0 {
		t.Fatal("CheckLossy passed an oversold stock")
	}
}

// A sweep's expiration, which no client is answered for, may be invisible
// longer than VisibilityLag after its commit timestamp when its flush
// stalls (found by failover: a promoted standby's first sweep, unseen by
// reads 330 and 480 ms after its commit timestamp), but not after the sweep
// that made it was done.
func TestReadMissesASweepUntilItIsDone(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	expires := t0.Add(time.Second)
	reserve := &Op{Client: 0, Kind: Reserve, Customer: "c", Key: "k", Qty: 1, ResID: "r1", ExpiresAt: expires,
		Call: t0, Return: t0.Add(10 * time.Millisecond), Outcome: OutCreated,
		Attempts: []Attempt{{Status: 201, Start: t0, End: t0.Add(10 * time.Millisecond)}}}
	read := func(d time.Duration) *Op {
		return &Op{Client: 1, Kind: ReadSale, Call: t0.Add(d), Return: t0.Add(d + 5*time.Millisecond),
			Outcome: OutRead, Counts: Counts{Available: 1, Pending: 1}}
	}
	swept := 1100 * time.Millisecond
	f := Facts{
		Initial: 2, Stock: 2, LedgerSum: 2, SaleState: "open", InvariantOK: true,
		Rows: []Row{{ID: "r1", Customer: "c", Key: "k", State: OutExpired, Qty: 1, CreatedAt: t0.Add(5 * time.Millisecond), ExpiresAt: expires,
			ExpiredAt: at(swept), RestockedAt: at(swept), Committed: at(swept)}},
		Ledger: map[string][]LedgerRow{
			"":   {{Reason: "initial", Delta: 2, Committed: at(-time.Second)}},
			"r1": {{Reason: "reserve", Delta: -1, Committed: at(8 * time.Millisecond)}, {Reason: "expire", Delta: 1, Committed: at(swept)}},
		},
		SweepsDone: []time.Time{t0.Add(swept + 600*time.Millisecond)},
	}
	v := Check(context.Background(), 2, time.Time{}, []string{"c"}, []*Op{reserve, read(swept + 480*time.Millisecond)}, f)
	if len(v.Violations) > 0 {
		t.Fatalf("a read before the sweep was done: violations %v", v.Violations)
	}
	v = Check(context.Background(), 2, time.Time{}, []string{"c"}, []*Op{reserve, read(swept + 700*time.Millisecond)}, f)
	if len(v.Violations) == 0 {
		t.Fatal("a read after the sweep was done that missed it passed")
	}
}

// TestVariantsEachHeldToItsOwnUnits: in a sale of two variants of one unit
// each, a hold of each is legal; a second hold of the same variant is not
// (porcupine, and the variant's accounting), though the sale had a unit
// left; and variant_sold_out is legal only when its variant was short (in a
// gated sale, or its counter: less the units owed back to it, not to
// another variant's).
func TestVariantsEachHeldToItsOwnUnits(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	expires := t0.Add(time.Minute)
	reserve := func(client int, customer, variant, id string, d time.Duration) *Op {
		return &Op{Client: client, Kind: Reserve, Customer: customer, Key: "k-" + variant, Variant: variant, Qty: 1, ResID: id, ExpiresAt: expires,
			Call: t0.Add(d), Return: t0.Add(d + 10*time.Millisecond), Outcome: OutCreated, Body: []byte(`{"reservationId":"` + id + `","variant":"` + variant + `"}`),
			Attempts: []Attempt{{Status: 201, Start: t0.Add(d), End: t0.Add(d + 10*time.Millisecond)}}}
	}
	facts := func(second string) Facts {
		stock := map[string]int{"A": 1, "B": 1}
		stock["A"]--
		stock[second]--
		return Facts{
			Initial: 2, Stock: 0, LedgerSum: 0, SaleState: "open", InvariantOK: true,
			Variants: []VariantFacts{
				{SKU: "A", Initial: 1, Stock: stock["A"], LedgerSum: stock["A"], OK: stock["A"] >= 0},
				{SKU: "B", Initial: 1, Stock: stock["B"], LedgerSum: stock["B"], OK: true},
			},
			Rows: []Row{
				{ID: "r1", Customer: "c1", Key: "k-A", Variant: "A", State: OutPending, Qty: 1, CreatedAt: t0.Add(5 * time.Millisecond), ExpiresAt: expires, Committed: at(8 * time.Millisecond)},
				{ID: "r2", Customer: "c2", Key: "k-" + second, Variant: second, State: OutPending, Qty: 1, CreatedAt: t0.Add(105 * time.Millisecond), ExpiresAt: expires, Committed: at(108 * time.Millisecond)},
			},
			Ledger: map[string][]LedgerRow{
				"":   {{Variant: "A", Reason: "initial", Delta: 1, Committed: at(-time.Minute)}, {Variant: "B", Reason: "initial", Delta: 1, Committed: at(-time.Minute)}},
				"r1": {{Variant: "A", Reason: "reserve", Delta: -1, Committed: at(8 * time.Millisecond)}},
				"r2": {{Variant: second, Reason: "reserve", Delta: -1, Committed: at(108 * time.Millisecond)}},
			},
			Orders: map[string][]Order{},
		}
	}
	read := &Op{Client: 2, Kind: ReadVariants, Call: t0.Add(50 * time.Millisecond), Return: t0.Add(60 * time.Millisecond), Outcome: OutRead,
		Variants: []VariantCounts{{SKU: "A", Pending: 1}, {SKU: "B", Available: 1}}}
	customers := []string{"c1", "c2"}

	v := Check(context.Background(), 2, time.Time{}, customers, []*Op{reserve(0, "c1", "A", "r1", 0), read, reserve(1, "c2", "B", "r2", 100*time.Millisecond)}, facts("B"))
	if v.Porcupine != "Ok" || len(v.Violations) > 0 {
		t.Fatalf("a hold of each variant: porcupine %s, violations %v", v.Porcupine, v.Violations)
	}

	v = Check(context.Background(), 2, time.Time{}, customers, []*Op{reserve(0, "c1", "A", "r1", 0), read, reserve(1, "c2", "A", "r2", 100*time.Millisecond)}, facts("A"))
	if v.Porcupine != "Illegal" || len(v.Violations) < 2 {
		t.Fatalf("two holds of a variant of one unit: porcupine %s, violations %v", v.Porcupine, v.Violations)
	}

	// A read whose variants' counts are not the model's.
	wrong := *read
	wrong.Variants = []VariantCounts{{SKU: "A", Available: 1}, {SKU: "B", Pending: 1}}
	v = Check(context.Background(), 2, time.Time{}, customers, []*Op{reserve(0, "c1", "A", "r1", 0), &wrong, reserve(1, "c2", "B", "r2", 100*time.Millisecond)}, facts("B"))
	if v.Porcupine != "Illegal" {
		t.Fatalf("a read of the wrong variant's units: porcupine %s", v.Porcupine)
	}

	// variant_sold_out for B while B had its unit: a violation; for A
	// once A's unit was held: legal.
	refused := func(variant string) *Op {
		return &Op{Client: 1, Kind: Reserve, Customer: "c2", Key: "k-x-" + variant, Variant: variant, Qty: 1,
			Call: t0.Add(50 * time.Millisecond), Return: t0.Add(60 * time.Millisecond), Outcome: OutVariantSoldOut,
			Attempts: []Attempt{{Status: 409, Code: "variant_sold_out", Start: t0.Add(50 * time.Millisecond), End: t0.Add(60 * time.Millisecond)}}}
	}
	v = Check(context.Background(), 2, time.Time{}, customers, []*Op{reserve(0, "c1", "A", "r1", 0), refused("A"), reserve(1, "c2", "B", "r2", 100*time.Millisecond)}, facts("B"))
	if v.Porcupine != "Ok" || len(v.Violations) > 0 {
		t.Fatalf("variant_sold_out of a variant held: porcupine %s, violations %v", v.Porcupine, v.Violations)
	}
	v = Check(context.Background(), 2, time.Time{}, customers, []*Op{reserve(0, "c1", "A", "r1", 0), refused("B"), reserve(1, "c2", "B", "r2", 100*time.Millisecond)}, facts("B"))
	if len(v.Violations) != 1 || !strings.Contains(v.Violations[0], "variant_sold_out while") {
		t.Fatalf("variant_sold_out of a variant with its unit: violations %v", v.Violations)
	}

	// Gated (a counter per variant): B's unit handed out to a request that
	// died, owed back to B's counter by a return written ReturnGrace later,
	// makes B's variant_sold_out legal; a unit owed back to A's counter
	// does not.
	gated := func(variant string) Facts {
		f := facts("B")
		f.Gate = GateFacts{On: true, Agreed: true, Movements: []GateMovement{
			{Reason: "return", Variant: variant, Qty: 1, Created: t0.Add(ReturnGrace), Applied: at(ReturnGrace + time.Second)},
		}}
		return f
	}
	v = Check(context.Background(), 2, time.Time{}, customers, []*Op{reserve(0, "c1", "A", "r1", 0), refused("B"), reserve(1, "c2", "B", "r2", 100*time.Millisecond)}, gated("B"))
	if v.Porcupine != "Ok" || len(v.Violations) > 0 {
		t.Fatalf("gated: variant_sold_out of a variant whose unit its counter was without: porcupine %s, violations %v", v.Porcupine, v.Violations)
	}
	v = Check(context.Background(), 2, time.Time{}, customers, []*Op{reserve(0, "c1", "A", "r1", 0), refused("B"), reserve(1, "c2", "B", "r2", 100*time.Millisecond)}, gated("A"))
	if len(v.Violations) != 1 || !strings.Contains(v.Violations[0], "less those its counter may have been without") {
		t.Fatalf("gated: variant_sold_out of a variant with its unit, another variant's owed back: violations %v", v.Violations)
	}
}
