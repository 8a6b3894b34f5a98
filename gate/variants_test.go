package gate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
	"github.com/flashline/flashline/internal/testkit/testdb"
)

// A gated sale with variants has a counter per variant (issue 49): these
// tests run it against a real PostgreSQL and Redis, as gate_test.go does.

func (f *fixture) variantSale(t *testing.T, limit int, variants ...flashline.NewVariant) flashline.Sale {
	t.Helper()
	s, err := f.store.CreateSale(context.Background(), flashline.NewSale{
		SKU: "sku_gate_variants", PerCustomerLimit: limit, ReservationTTLSeconds: 600,
		Gate: flashline.GateRedis, Variants: variants,
	})
	require.NoError(t, err)
	require.Equal(t, flashline.GateRedis, s.Gate)
	require.Len(t, s.Variants, len(variants))
	return s
}

func variantReq(saleID, variant, customer, key string, qty int) flashline.ReserveRequest {
	r := req(saleID, customer, key, qty)
	r.Variant = variant
	r.Fingerprint = fmt.Appendf(r.Fingerprint, "\x00variant\x00%s", variant)
	return r
}

// variantCounters reads each variant's counter in Redis.
func (f *fixture) variantCounters(t *testing.T, sale flashline.Sale) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, v := range sale.Variants {
		n, err := f.rdb.Get(context.Background(), gate.VariantStockKey(sale.ID, v.SKU)).Int64()
		require.NoError(t, err, "counter of variant %s", v.SKU)
		out[v.SKU] = n
	}
	return out
}

// variantCounts reads each variant's available and pending units in the
// database.
func (f *fixture) variantCounts(t *testing.T, saleID string) (available, pending map[string]int64) {
	t.Helper()
	s, err := f.pg.Sale(context.Background(), saleID)
	require.NoError(t, err)
	available, pending = map[string]int64{}, map[string]int64{}
	for _, v := range s.Variants {
		require.True(t, v.OK, "variant %s adds up: %+v", v.SKU, v)
		available[v.SKU], pending[v.SKU] = int64(v.Available), int64(v.Pending)
	}
	return available, pending
}

// settleVariants relays until nothing is in flight or owed: each variant's
// counter is what the database has available of it.
func (f *fixture) settleVariants(t *testing.T, sale flashline.Sale) flashline.GateStatus {
	t.Helper()
	ctx := context.Background()
	var st flashline.GateStatus
	var available map[string]int64
	require.Eventually(t, func() bool {
		_, err := f.g.Relay(ctx)
		require.NoError(t, err)
		st = f.g.Status(ctx, sale.ID)
		available, _ = f.variantCounts(t, sale.ID)
		if !st.OK || len(st.Variants) != len(sale.Variants) {
			return false
		}
		for _, v := range st.Variants {
			if v.Drift != 0 || v.Counter != available[v.SKU] {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "gate status %+v, available %v", st, available)
	return st
}

// TestGateVariantsSellExactly: many buyers at once, each trying the
// variants in a random order (retrying each attempt), sell exactly each
// variant's stock; a variant sold out at its counter is refused
// variant_sold_out without a unit; the per-customer limit counts across the
// sale; and, with cancels and new buyers at once, each counter ends equal to
// the database's units of its variant.
func TestGateVariantsSellExactly(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.variantSale(t, 1,
		flashline.NewVariant{SKU: "S", Stock: 10},
		flashline.NewVariant{SKU: "M", Stock: 15, Buckets: 2},
		flashline.NewVariant{SKU: "L", Stock: 20, Buckets: 3})
	stock := map[string]int64{"S": 10, "M": 15, "L": 20}
	skus := []string{"S", "M", "L"}
	// The counters are the variants', the sale's own key is never written.
	require.Equal(t, stock, f.variantCounters(t, sale))
	n, err := f.rdb.Exists(ctx, gate.StockKey(sale.ID)).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	type win struct{ variant, customer, id string }
	var mu sync.Mutex
	var wins []win
	// buy has customer c try the variants in a random order until one
	// reserves, each attempt sent three times (a retry reuses its unit).
	buy := func(c string) {
		for _, i := range rand.Perm(len(skus)) {
			v := skus[i]
			r := variantReq(sale.ID, v, c, "key_"+v, 1)
			won := false
			for range 3 {
				res, err := f.store.Reserve(ctx, r)
				switch {
				case err == nil && !res.Replayed:
					mu.Lock()
					wins = append(wins, win{v, c, res.Reservation.ID})
					mu.Unlock()
					if res.Reservation.Variant != v {
						t.Errorf("reserved %s of %s: the reservation names %q", c, v, res.Reservation.Variant)
					}
					won = true
				case err == nil:
					won = true
				case errors.Is(err, flashline.ErrVariantSoldOut):
				default:
					t.Errorf("reserve %s of %s: %v", c, v, err)
				}
			}
			if won {
				return
			}
		}
	}
	var wg sync.WaitGroup
	for c := range 120 {
		wg.Go(func() { buy(fmt.Sprintf("cust_%d", c)) })
	}
	wg.Wait()
	sold := map[string]int64{}
	for _, w := range wins {
		sold[w.variant]++
	}
	require.Equal(t, stock, sold, "each variant's stock sold, exactly")
	require.Equal(t, map[string]int64{"S": 0, "M": 0, "L": 0}, f.variantCounters(t, sale))
	available, pending := f.variantCounts(t, sale.ID)
	require.Equal(t, map[string]int64{"S": 0, "M": 0, "L": 0}, available)
	require.Equal(t, stock, pending)
	st := f.settleVariants(t, sale)
	require.Zero(t, st.Counter)

	// A variant sold out at its counter is refused there, as the purchase
	// path refuses it (409 variant_sold_out), and takes no unit.
	seq, err := f.rdb.Get(ctx, gate.SeqKey(sale.ID)).Int64()
	require.NoError(t, err)
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, "M", "cust_late", "k", 1))
	require.ErrorIs(t, err, flashline.ErrVariantSoldOut)
	after, err := f.rdb.Get(ctx, gate.SeqKey(sale.ID)).Int64()
	require.NoError(t, err)
	require.Equal(t, seq, after, "no unit handed out for a sold-out variant")

	// The limit is the sale's: a holder of one variant is refused another.
	first := wins[0]
	other := "S"
	if first.variant == "S" {
		other = "L"
	}
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, other, first.customer, "key_other", 1))
	require.ErrorIs(t, err, flashline.ErrLimitReached)
	// A variant the sale does not have, or none, is refused before the
	// gate counts anything.
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, "XL", "cust_late", "k2", 1))
	var inv *flashline.InvalidError
	require.ErrorAs(t, err, &inv)
	require.Contains(t, err.Error(), "no variant XL")
	_, err = f.store.Reserve(ctx, req(sale.ID, "cust_late", "k3", 1))
	require.ErrorAs(t, err, &inv)
	after, err = f.rdb.Get(ctx, gate.SeqKey(sale.ID)).Int64()
	require.NoError(t, err)
	require.Equal(t, seq, after)

	// Cancels of two variants while new buyers try every variant: each unit
	// restocked goes back to its own variant's counter, and is sold again
	// from there.
	// The gate job runs all along: it must find no drift in any variant
	// while units move.
	stop := make(chan struct{})
	var job sync.WaitGroup
	job.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := f.g.Relay(ctx); err != nil {
				t.Errorf("relay: %v", err)
			}
			if err := f.g.Maintain(ctx); err != nil {
				t.Errorf("maintain: %v", err)
			}
		}
	})
	cancelled := map[string]int64{}
	for _, w := range wins {
		if w.variant != "L" && cancelled[w.variant] < 3 {
			cancelled[w.variant]++
			wg.Go(func() {
				if _, err := f.store.Cancel(ctx, w.id, flashline.Actor{CustomerID: w.customer}); err != nil {
					t.Errorf("cancel %s: %v", w.id, err)
				}
			})
		}
	}
	for c := range 30 {
		wg.Go(func() { buy(fmt.Sprintf("cust_new_%d", c)) })
	}
	wg.Wait()
	f.g.WaitGiveBacks()
	close(stop)
	job.Wait()
	st = f.settleVariants(t, sale)
	available, pending = f.variantCounts(t, sale.ID)
	for _, v := range skus {
		require.Equal(t, stock[v], available[v]+pending[v], "variant %s", v)
	}
	var sum int64
	for _, v := range st.Variants {
		sum += v.Counter
	}
	require.Equal(t, sum, st.Counter)
	// The gate job finds nothing to say.
	require.NoError(t, f.g.Maintain(ctx))
	require.Empty(t, incidents(t, f.pool, sale.ID))
}

// TestGateVariantDriftNamesTheVariant: a counter of one variant above what
// the database accounts for pauses the sale with an incident that names that
// variant; one below is reported and named; resume is refused until a
// rebuild.
func TestGateVariantDriftNamesTheVariant(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, false, gate.Options{DriftChecks: 2, Registry: reg})
	ctx := context.Background()
	sale := f.variantSale(t, 1, flashline.NewVariant{SKU: "S", Stock: 5}, flashline.NewVariant{SKU: "M", Stock: 5})
	_, err := f.store.Reserve(ctx, variantReq(sale.ID, "S", "cust_0", "k", 1))
	require.NoError(t, err)
	f.settleVariants(t, sale)

	// A second writer takes units of S by hand: undersell of S, reported,
	// not paused.
	require.NoError(t, f.rdb.DecrBy(ctx, gate.VariantStockKey(sale.ID, "S"), 2).Err())
	for range 2 {
		require.NoError(t, f.g.Maintain(ctx))
	}
	require.Equal(t, []string{"gate_drift"}, incidents(t, f.pool, sale.ID))
	detail := lastIncidentDetail(t, f, sale.ID)
	require.Contains(t, detail, "the gate's counter of variant S is below")
	require.Contains(t, detail, "variant S: drift 2: available 4 − counter 2 − owed back 0 − in flight 0")
	require.NotContains(t, detail, "variant M")
	s, err := f.store.Sale(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, flashline.StateOpen, s.State)
	require.False(t, s.GateStatus.OK)
	require.EqualValues(t, 2, s.GateStatus.Drift)
	require.Equal(t, []flashline.GateVariantStatus{{SKU: "S", Counter: 2, Drift: 2}, {SKU: "M", Counter: 5, Drift: 0}}, s.GateStatus.Variants)
	require.Equal(t, map[string]float64{"S": 2, "M": 0}, driftSeries(t, reg, sale.ID), "flashline_gate_drift by variant")

	// One that adds units to M: its counter could let more buyers try than
	// M has units: paused, M named. Another variant's undersell does not
	// hide it (the sums of the two counters would agree).
	require.NoError(t, f.rdb.IncrBy(ctx, gate.VariantStockKey(sale.ID, "M"), 2).Err())
	for range 2 {
		require.NoError(t, f.g.Maintain(ctx))
	}
	require.Equal(t, []string{"gate_drift", "gate_counter_high"}, incidents(t, f.pool, sale.ID))
	detail = lastIncidentDetail(t, f, sale.ID)
	require.Contains(t, detail, "the gate's counter of variant M is above")
	require.Contains(t, detail, "variant M: drift -2: available 5 − counter 7 − owed back 0 − in flight 0")
	s, err = f.store.Sale(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, flashline.StatePaused, s.State)
	require.Contains(t, s.PauseReason, "variant M")
	require.EqualValues(t, -2, s.GateStatus.Drift)
	require.EqualValues(t, 9, s.GateStatus.Counter, "the counters' sum agrees with the database's 9 units: only per variant does it drift")
	require.Equal(t, map[string]float64{"S": 2, "M": -2}, driftSeries(t, reg, sale.ID), "flashline_gate_drift by variant")
	_, err = f.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.ErrorIs(t, err, flashline.ErrInvariantBroken)

	counter, err := f.g.Rebuild(ctx, sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 9, counter)
	require.Equal(t, map[string]int64{"S": 4, "M": 5}, f.variantCounters(t, sale))
	s, err = f.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.NoError(t, err)
	require.True(t, s.GateStatus.OK)
}

func lastIncidentDetail(t *testing.T, f *fixture, saleID string) string {
	t.Helper()
	var d string
	require.NoError(t, f.pool.QueryRow(context.Background(),
		"SELECT detail FROM incidents WHERE sale_id = $1 ORDER BY incident_id DESC LIMIT 1", saleID).Scan(&d))
	return d
}

// TestGateVariantRebuild: Redis loses a gated sale with variants' counters;
// the gate job pauses it; the rebuild writes each variant's counter from the
// database (its initial − pending − confirmed, a restock owed to the old
// counter counted once), the buyers across the sale and their attempts; the
// sale then sells each variant's rest exactly.
func TestGateVariantRebuild(t *testing.T) {
	f := newFixture(t, true, gate.Options{})
	ctx := context.Background()
	sale := f.variantSale(t, 1,
		flashline.NewVariant{SKU: "S", Stock: 4},
		flashline.NewVariant{SKU: "M", Stock: 3, Buckets: 2})
	var mID string
	for c, v := range []string{"S", "S", "M", "M"} {
		res, err := f.store.Reserve(ctx, variantReq(sale.ID, v, fmt.Sprintf("cust_%d", c), "k", 1))
		require.NoError(t, err)
		if c == 3 {
			mID = res.Reservation.ID
		}
	}
	f.settleVariants(t, sale)
	// A cancel of M that the relay has not applied when Redis restarts
	// empty: owed to the old counter, counted by the new one once.
	_, err := f.pg.Cancel(ctx, mID, flashline.Actor{CustomerID: "cust_3"})
	require.NoError(t, err)
	f.redis.Restart()
	require.Eventually(t, func() bool {
		return f.rdb.Ping(ctx).Err() == nil
	}, 10*time.Second, 20*time.Millisecond)
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, "S", "cust_x", "k", 1))
	require.ErrorIs(t, err, flashline.ErrUnavailable)
	_, err = f.store.SetSaleState(ctx, sale.ID, flashline.ActionPause)
	require.NoError(t, err)
	_, err = f.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.ErrorIs(t, err, flashline.ErrInvariantBroken)

	counter, err := f.g.Rebuild(ctx, sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, counter)
	require.Equal(t, map[string]int64{"S": 2, "M": 2}, f.variantCounters(t, sale))
	n, err := f.rdb.Exists(ctx, gate.StockKey(sale.ID)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no counter of the sale as a whole")
	// The owed cancel was settled by the rebuild: relaying it now would
	// count it twice.
	_, err = f.g.Relay(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"S": 2, "M": 2}, f.variantCounters(t, sale))
	s, err := f.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.NoError(t, err)
	require.True(t, s.GateStatus.OK)
	require.Len(t, s.GateStatus.Variants, 2)

	// The buyers are the sale's: a holder of S is refused M.
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, "M", "cust_0", "k2", 1))
	require.ErrorIs(t, err, flashline.ErrLimitReached)
	// A retry of a reservation from before the rebuild replays it.
	res, err := f.store.Reserve(ctx, variantReq(sale.ID, "M", "cust_2", "k", 1))
	require.NoError(t, err)
	require.True(t, res.Replayed)
	// The rest sells out exactly, variant by variant.
	for c := range 3 {
		for _, v := range []string{"S", "M"} {
			_, err := f.store.Reserve(ctx, variantReq(sale.ID, v, fmt.Sprintf("cust_new_%s%d", v, c), "k", 1))
			if c < 2 {
				require.NoError(t, err, "%s #%d", v, c)
			} else {
				require.ErrorIs(t, err, flashline.ErrVariantSoldOut, "%s #%d", v, c)
			}
		}
	}
	f.settleVariants(t, sale)
	available, pending := f.variantCounts(t, sale.ID)
	require.Equal(t, map[string]int64{"S": 0, "M": 0}, available)
	require.Equal(t, map[string]int64{"S": 4, "M": 3}, pending)
}

// TestGateVariantUnitsGoBackToTheirCounter: a unit the database refused and
// a unit whose request died go back to the counter of the variant they came
// from; a retry of an attempt naming another variant while its unit is in
// flight is the key reused.
func TestGateVariantUnitsGoBackToTheirCounter(t *testing.T) {
	// Every unit in flight is abandoned at once: the gate job returns it at
	// its first check.
	f := newFixture(t, false, gate.Options{ReturnGrace: time.Nanosecond})
	ctx := context.Background()
	sale := f.variantSale(t, 2, flashline.NewVariant{SKU: "S", Stock: 3}, flashline.NewVariant{SKU: "M", Stock: 3})

	// A request takes a unit of M and dies before the database sees it.
	_, fresh, err := f.g.Step(ctx, variantReq(sale.ID, "M", "cust_dead", "k", 1), 2)
	require.NoError(t, err)
	require.True(t, fresh)
	require.Equal(t, map[string]int64{"S": 3, "M": 2}, f.variantCounters(t, sale))
	st := f.g.Status(ctx, sale.ID)
	require.True(t, st.OK, "a unit in flight is no drift: %+v", st)
	// Its retry naming S instead is another request under the same key.
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, "S", "cust_dead", "k", 1))
	require.ErrorIs(t, err, flashline.ErrIdempotencyKeyReused)

	// The database refuses a unit of M the gate let through (the customer
	// holds a reservation of S: one per customer): it goes back to M's.
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, "S", "cust_a", "k", 1))
	require.NoError(t, err)
	_, err = f.store.Reserve(ctx, variantReq(sale.ID, "M", "cust_a", "k2", 1))
	require.ErrorIs(t, err, flashline.ErrLimitReached)
	f.g.WaitGiveBacks()

	require.Eventually(t, func() bool {
		// The gate job's run: relay, then look after the sale.
		_, err := f.g.Relay(ctx)
		if err == nil {
			err = f.g.Maintain(ctx)
		}
		if err != nil {
			t.Logf("gate job: %v", err)
			return false
		}
		return f.g.Status(ctx, sale.ID).OK && f.variantCounters(t, sale)["M"] == 3
	}, 10*time.Second, 20*time.Millisecond)
	st = f.settleVariants(t, sale)
	require.Equal(t, map[string]int64{"S": 2, "M": 3}, f.variantCounters(t, sale))
	require.EqualValues(t, 5, st.Counter)
	var variants []string
	rows, err := f.pool.Query(ctx, "SELECT coalesce(variant, '') FROM gate_outbox WHERE sale_id = $1 ORDER BY movement_id", sale.ID)
	require.NoError(t, err)
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		variants = append(variants, v)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"M", "M"}, variants, "both returns name M")
	require.Empty(t, incidents(t, f.pool, sale.ID))
}

// TestGateVariantsMigrationDown: migration 000028's down runs (and its up
// again) while no gated sale has variants, and refuses while one does: the
// version before could not gate it. Each run in a transaction rolled back.
func TestGateVariantsMigrationDown(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	root, err := testdb.RepoRoot()
	require.NoError(t, err)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "migrations", name))
		require.NoError(t, err)
		return string(b)
	}
	down, up := read("000028_gate_variants.down.sql"), read("000028_gate_variants.up.sql")
	run := func(sqls ...string) error {
		tx, err := f.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		for _, s := range sqls {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	// A gated sale without variants, and a sale with variants without the
	// gate, are the version before's to keep.
	f.sale(t, 3, 1)
	_, err = f.pg.CreateSale(ctx, flashline.NewSale{SKU: "sku_plain_variants", PerCustomerLimit: 1, ReservationTTLSeconds: 600,
		Variants: []flashline.NewVariant{{SKU: "S", Stock: 1}}})
	require.NoError(t, err)
	require.NoError(t, run(down, up))
	f.variantSale(t, 1, flashline.NewVariant{SKU: "S", Stock: 1})
	require.ErrorContains(t, run(down), "gated sales with variants exist")
}
