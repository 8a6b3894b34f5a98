package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testbeacon"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// beaconLottery creates a lottery sale under a store with beacon b, and
// registers n customers, registration open until an hour from now. Then
// it moves the lottery's times and the beacon's genesis an hour and a
// minute back together (the round fixed at creation stays the first after
// the close): registration has closed, the draw is due, the round's time
// has passed.
func beaconLottery(t *testing.T, b *testbeacon.Beacon, n int) (*postgres.Store, string, func(string) string) {
	t.Helper()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{Beacon: &b.Chain})
	now := time.Now()
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_beacon", InitialStock: 2, Admission: flashline.AdmissionLottery,
		Confirmation: flashline.ConfirmByCustomer,
		Lottery: &flashline.LotteryRules{RegistrationOpensAt: now.Add(-time.Minute), RegistrationClosesAt: now.Add(time.Hour),
			DrawAt: now.Add(time.Hour), PurchaseWindowSeconds: 60, Waitlist: true}})
	require.NoError(t, err)
	for i := range n {
		id := fmt.Sprintf("cust_%d", i)
		_, err := store.Register(ctx, flashline.NewRegistration{SaleID: sale.ID, CustomerID: id, PaymentInstrument: "card-" + id})
		require.NoError(t, err)
	}
	query := func(q string) string {
		var out string
		require.NoError(t, pool.QueryRow(ctx, q, sale.ID).Scan(&out))
		return out
	}
	_, err = pool.Exec(ctx, `UPDATE lotteries SET registration_opens_at = registration_opens_at - interval '61 minutes',
		registration_closes_at = registration_closes_at - interval '61 minutes', draw_at = draw_at - interval '61 minutes',
		beacon_genesis = beacon_genesis - interval '61 minutes' WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = opens_at - interval '61 minutes' WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	return store, sale.ID, query
}

// TestLotteryDrawWaitsForBeacon: the registrants are committed at the close;
// the draw waits for its beacon round (not published: no draw), and once
// the beacon publishes it, draws with it: the ranks are the formula's under
// the round's value, which nothing stored before the close holds.
func TestLotteryDrawWaitsForBeacon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testbeacon.Start(t, t.Name(), time.Now().Add(-24*time.Hour), 3*time.Second)
	store, saleID, query := beaconLottery(t, b, 6)
	before := query(`SELECT (SELECT to_jsonb(l) FROM lotteries l WHERE l.sale_id = $1)::text ||
		(SELECT to_jsonb(s) FROM sales s WHERE s.sale_id = $1)::text ||
		(SELECT coalesce(jsonb_agg(r), '[]') FROM lottery_registrations r WHERE r.sale_id = $1)::text`)

	w := &LotteryWorker{store: store, logger: slog.New(slog.DiscardHandler),
		beacon: Beacon{URL: b.URL, Client: b.Client()}, beaconWait: time.Hour}
	require.NoError(t, w.Work(ctx, nil))
	l, err := store.Lottery(ctx, saleID)
	require.NoError(t, err)
	require.NotNil(t, l.RegistrantsRoot, "registrants committed at the close")
	require.Equal(t, 6, l.RegistrantsCount)
	require.Nil(t, l.DrawnAt, "no draw before the beacon's round")
	round := l.Beacon.Round
	require.Positive(t, b.Asked(round), "the round was asked for")
	_, err = store.Register(ctx, flashline.NewRegistration{SaleID: saleID, CustomerID: "cust_late", PaymentInstrument: "card-late"})
	require.ErrorIs(t, err, flashline.ErrRegistrationClosed)

	b.Release(round)
	require.NoError(t, w.Work(ctx, nil))
	l, err = store.Lottery(ctx, saleID)
	require.NoError(t, err)
	require.NotNil(t, l.DrawnAt)
	published := b.Signer.Round(round)
	require.Equal(t, published.Randomness, l.Beacon.Randomness)
	require.NotContains(t, before, fmt.Sprintf("%x", published.Randomness[:8]), "the round's value was stored before the close")

	regs, err := store.LotteryRegistrations(ctx, saleID)
	require.NoError(t, err)
	customers := make([]string, len(regs))
	for i, r := range regs {
		customers[i] = r.CustomerID
	}
	var root [32]byte
	copy(root[:], l.RegistrantsRoot)
	want := flashline.LotteryOrderV2(saleID, flashline.LotteryFinalSeed(saleID, root, published.Randomness, l.DrawSeed), customers)
	require.Equal(t, want, customers, "the ranks are the formula's under the round's value")
}

// TestLotteryPausedWithoutBeacon: a draw whose round does not come within
// the wait pauses its sale with the reason, and is not made.
func TestLotteryPausedWithoutBeacon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testbeacon.Start(t, t.Name(), time.Now().Add(-24*time.Hour), 3*time.Second)
	store, saleID, _ := beaconLottery(t, b, 3)
	w := &LotteryWorker{store: store, logger: slog.New(slog.DiscardHandler),
		beacon: Beacon{URL: b.URL, Client: b.Client()}, beaconWait: time.Second}
	require.NoError(t, w.Work(ctx, nil))
	sale, err := store.Sale(ctx, saleID)
	require.NoError(t, err)
	require.Equal(t, flashline.StatePaused, sale.State)
	require.True(t, strings.Contains(sale.PauseReason, "beacon"), sale.PauseReason)
	require.Nil(t, sale.Lottery.DrawnAt, "never drawn without the round")
	require.NoError(t, w.Work(ctx, nil)) // paused: not tried again
	sale, err = store.Sale(ctx, saleID)
	require.NoError(t, err)
	require.Nil(t, sale.Lottery.DrawnAt)
}
