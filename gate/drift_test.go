package gate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
	"github.com/flashline/flashline/salecache"
)

// These tests run the gate job's check while something else is half done,
// and show that what it measures is the counter's real drift, not the
// movements it caught between two reads.

// holdReply is a go-redis hook that lets the first command matching match
// run in Redis and holds its reply from the caller until release is
// closed, having closed held.
type holdReply struct {
	match         func(args []any) bool
	once          sync.Once
	held, release chan struct{}
}

func newHoldReply(t *testing.T, match func(args []any) bool) *holdReply {
	h := &holdReply{match: match, held: make(chan struct{}), release: make(chan struct{})}
	releaseOnCleanup(t, h.release)
	return h
}

// releaseOnCleanup closes release when the test ends, if it did not: a test
// that fails while a hook holds a call must not leave it held, nor its
// database connection, which the pool's closing would wait for forever.
func releaseOnCleanup(t *testing.T, release chan struct{}) {
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
}

func (h *holdReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// A script's EVALSHA that Redis did not know ran nothing: only a
		// reply of a script that ran is held.
		if err == nil && h.match(cmd.Args()) {
			h.once.Do(func() {
				close(h.held)
				<-h.release
			})
		}
		return err
	}
}

func (h *holdReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hookedGate is a second gate in front of the fixture's database and Redis,
// whose Redis client has hook.
func (f *fixture) hookedGate(t *testing.T, hook redis.Hook, opts gate.Options) *gate.Gate {
	t.Helper()
	o := *f.rdb.Options()
	rdb := redis.NewClient(&o)
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(hook)
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	return gate.New(rdb, f.pg, salecache.New(f.pg, salecache.Options{}), opts)
}

func mentions(args []any, key string) bool {
	return slices.ContainsFunc(args, func(a any) bool { return a == key })
}

// requireSelling fails unless the sale is still open: no check paused it.
func (f *fixture) requireSelling(t *testing.T, saleID string) {
	t.Helper()
	s, err := f.pg.Sale(context.Background(), saleID)
	require.NoError(t, err)
	require.Equal(t, flashline.StateOpen, s.State, "paused: %s", s.PauseReason)
}

// TestGateDriftOfARelayInFlight: a relay applies a restock to the counter
// and holds its transaction open (its Redis round trips, stretched by a
// slow Redis) before it marks the restock applied. The gate job read the
// counter with the restock in it and the database with the restock still
// owed, and counted it twice: drift -1 at every check while the relay was
// under way, the gate job's gate_counter_high after three, and a sale
// paused that nothing was wrong with. It now asks Redis which of the owed
// movements it applied, and finds no drift.
func TestGateDriftOfARelayInFlight(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 5, 1)
	res, err := f.store.Reserve(ctx, req(sale.ID, "cust_0", "k", 1))
	require.NoError(t, err)
	f.settle(t, sale.ID)
	// Cancelled on another instance: owed to the gate, not relayed yet.
	_, err = f.pg.Cancel(ctx, res.Reservation.ID, flashline.Actor{CustomerID: "cust_0"})
	require.NoError(t, err)

	// A relay applies it (the apply script writes the applied set; the
	// state script of this change reads it too, with the epoch key).
	hook := newHoldReply(t, func(args []any) bool {
		return mentions(args, gate.AppliedKey(sale.ID)) && !mentions(args, gate.EpochKey(sale.ID))
	})
	relay := f.hookedGate(t, hook, gate.Options{})
	relayed := make(chan error, 1)
	go func() {
		_, err := relay.Relay(ctx)
		relayed <- err
	}()
	select {
	case <-hook.held:
	case err := <-relayed:
		t.Fatalf("the relay ended before its Redis reply was held: %v", err)
	}

	// The gate job checks as many times as make an incident.
	for range 3 {
		require.NoError(t, f.g.Maintain(ctx))
	}
	st := f.g.Status(ctx, sale.ID)
	close(hook.release)
	require.NoError(t, <-relayed)
	f.requireSelling(t, sale.ID)
	require.True(t, st.OK, "status while the relay was under way %+v", st)
	require.EqualValues(t, 5, st.Counter)
	require.EqualValues(t, 5, f.settle(t, sale.ID).Counter)
}

// TestGateDriftOfAUnitBetweenTheReads: a unit handed out and reserved after
// the gate job read the counter and before it read the database was in the
// counter (the read before) and not available (the read after): drift -1,
// an incident for a check that judges at once. The check now reads the
// database before and after the counter and judges only a view in which
// nothing committed between the two.
func TestGateDriftOfAUnitBetweenTheReads(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 5, 1)

	// The gate job's state read (the only script with the epoch key and
	// not the unit numbers') is held once.
	hook := newHoldReply(t, func(args []any) bool {
		return mentions(args, gate.EpochKey(sale.ID)) && !mentions(args, gate.SeqKey(sale.ID))
	})
	checker := f.hookedGate(t, hook, gate.Options{DriftChecks: 1})
	checked := make(chan error, 1)
	go func() { checked <- checker.Maintain(ctx) }()
	select {
	case <-hook.held:
	case err := <-checked:
		t.Fatalf("the check ended before its Redis reply was held: %v", err)
	}
	_, err := f.store.Reserve(ctx, req(sale.ID, "cust_1", "k", 1))
	require.NoError(t, err)
	close(hook.release)
	require.NoError(t, <-checked)
	f.requireSelling(t, sale.ID)
	require.EqualValues(t, 4, f.settle(t, sale.ID).Counter)
}

// TestGateDriftIncidentSaysWhatItCounted: the incident of a drift lists
// the movements it counted as owed back, the units in flight and the
// epochs, so that it explains itself: before, it gave only the sums.
func TestGateDriftIncidentSaysWhatItCounted(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 10, 1)
	// A unit in flight (its request is under way), a restock owed back.
	seq, fresh, err := f.g.Step(ctx, req(sale.ID, "cust_f", "k", 1), 1)
	require.NoError(t, err)
	require.True(t, fresh)
	res, err := f.store.Reserve(ctx, req(sale.ID, "cust_0", "k", 1))
	require.NoError(t, err)
	_, err = f.pg.Cancel(ctx, res.Reservation.ID, flashline.Actor{CustomerID: "cust_0"})
	require.NoError(t, err)
	// A second writer adds units by hand.
	require.NoError(t, f.rdb.IncrBy(ctx, gate.StockKey(sale.ID), 3).Err())
	for range 3 {
		require.NoError(t, f.g.Maintain(ctx))
	}
	var kind, detail string
	require.NoError(t, f.pool.QueryRow(ctx, "SELECT kind, detail FROM incidents WHERE sale_id = $1", sale.ID).Scan(&kind, &detail))
	require.Equal(t, "gate_counter_high", kind)
	for _, want := range []string{
		"drift -3: available 10 − counter 11 − owed back 1 − in flight 1",
		"epoch 0 (counter's 0)",
		fmt.Sprintf("owed back: restock:%s ×1", res.Reservation.ID),
		fmt.Sprintf("in flight: unit %d of cust_f ×1", seq),
	} {
		require.Contains(t, detail, want)
	}
}

// TestGateDriftChecksAcrossInstances: the gate job is periodic, not unique,
// and lands on any instance, so the checks in a row that make a drift an
// incident are the cluster's, not one instance's. Counted per instance, a
// drift that one instance found three times was an incident though the
// other's checks in between found none; and three checks of a drift that
// stayed, made by two instances, were not.
func TestGateDriftChecksAcrossInstances(t *testing.T) {
	f := newFixture(t, false, gate.Options{})
	ctx := context.Background()
	sale := f.sale(t, 10, 1)
	a := f.g
	b := gate.New(f.rdb, f.pg, salecache.New(f.pg, salecache.Options{}), gate.Options{Timeout: 5 * time.Second})

	// A drift that comes and goes: instance a finds it, b does not.
	for range 3 {
		require.NoError(t, f.rdb.IncrBy(ctx, gate.StockKey(sale.ID), 1).Err())
		require.NoError(t, a.Maintain(ctx))
		require.NoError(t, f.rdb.DecrBy(ctx, gate.StockKey(sale.ID), 1).Err())
		require.NoError(t, b.Maintain(ctx))
	}
	require.Empty(t, incidents(t, f.pool, sale.ID))
	f.requireSelling(t, sale.ID)

	// One that stays, checked by a, b, a.
	require.NoError(t, f.rdb.IncrBy(ctx, gate.StockKey(sale.ID), 1).Err())
	for _, g := range []*gate.Gate{a, b, a} {
		require.NoError(t, g.Maintain(ctx))
	}
	require.Equal(t, []string{"gate_counter_high"}, incidents(t, f.pool, sale.ID))
}

// driftSeries is flashline_gate_drift of a sale on reg, by its variant
// label.
func driftSeries(t *testing.T, reg *prometheus.Registry, saleID string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != "flashline_gate_drift" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["sale_id"] == saleID {
				out[labels["variant"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
