package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/testkit/testbeacon"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// beaconRoom creates a randomized_at_open waiting-room sale opening in an
// hour under a store with beacon b (its round fixed at creation), with n
// pre-open holders. Then it moves the opening time and the beacon's
// genesis back together by an hour plus shift (the round fixed at creation
// stays CrowdRound of the opening time): with shift a second, the room
// opened a second ago and its round is a few seconds ahead.
func beaconRoom(t *testing.T, b *testbeacon.Beacon, n int, shift time.Duration) (*postgres.Store, string, func(string) string) {
	t.Helper()
	ctx := context.Background()
	pool, _ := testdb.NewPool(t)
	store := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{Beacon: &b.Chain})
	opens := time.Now().Add(time.Hour)
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_crowd_beacon", InitialStock: 10,
		Admission: flashline.AdmissionWaitingRoom, Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
	require.NoError(t, err)
	holders := make([]string, n)
	for i := range holders {
		holders[i] = fmt.Sprintf("cust_%d", i)
	}
	require.NoError(t, store.AddHolders(ctx, sale.ID, holders))
	require.NoError(t, store.CountTickets(ctx, sale.ID, int64(n)))
	query := func(q string) string {
		var out string
		require.NoError(t, pool.QueryRow(ctx, q, sale.ID).Scan(&out))
		return out
	}
	back := fmt.Sprintf("%d milliseconds", (time.Hour + shift).Milliseconds())
	_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = opens_at - $2::interval WHERE sale_id = $1`, sale.ID, back)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE waiting_rooms SET beacon_genesis = beacon_genesis - $2::interval WHERE sale_id = $1`, sale.ID, back)
	require.NoError(t, err)
	return store, sale.ID, query
}

// advance moves saleID's watermark towards target as the pacer does, and
// returns it.
func advance(t *testing.T, store *postgres.Store, saleID string, target int64) int64 {
	t.Helper()
	var watermark int64
	led, err := store.LeadPacer(context.Background(), func(ctx context.Context, db flashline.PacerStore) error {
		var err error
		watermark, _, err = db.Advance(ctx, saleID, target, 1)
		return err
	})
	require.NoError(t, err)
	require.True(t, led)
	return watermark
}

// TestCrowdWaitsForBeacon: a randomized_at_open room's round is fixed at
// creation; the freeze commits the holders but not the final seed, and the
// pacer admits no rank until the round is had; the lottery's job then ranks
// the crowd with it. Nothing stored before the round holds its value, and
// the published transcript checks out from the document alone, beacon
// signature included.
func TestCrowdWaitsForBeacon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testbeacon.Start(t, t.Name(), time.Now().Add(-24*time.Hour), 3*time.Second)
	store, saleID, query := beaconRoom(t, b, 12, time.Second)
	c, err := store.Crowd(ctx, saleID)
	require.NoError(t, err)
	require.NotNil(t, c.Beacon, "the round is fixed at creation")
	round := c.Beacon.Round
	require.Equal(t, flashline.CrowdRound(c.Beacon.Chain, c.OpensAt), round)

	require.Zero(t, advance(t, store, saleID, 5), "the freeze admits nobody before the round")
	before := query(`SELECT (SELECT to_jsonb(w) FROM waiting_rooms w WHERE w.sale_id = $1)::text ||
		(SELECT to_jsonb(s) FROM sales s WHERE s.sale_id = $1)::text`)
	c, err = store.Crowd(ctx, saleID)
	require.NoError(t, err)
	require.NotNil(t, c.Root, "the holders are committed at the freeze")
	require.Nil(t, c.FinalSeed, "not ranked before the round")
	round = c.Beacon.Round // the same, unless this machine froze it late (crowdRound)
	require.True(t, c.Beacon.Chain.RoundTime(round).After(*c.CommittedAt), "the round comes after the commitment")
	doc := api.NewCrowdTranscript(c, flashline.NewCrowdTranscript(c))
	require.Equal(t, "committed", doc.Status)
	require.Equal(t, round, doc.Beacon.Round)

	w := &LotteryWorker{store: store, logger: slog.New(slog.DiscardHandler),
		beacon: Beacon{URL: b.URL, Client: b.Client()}, beaconWait: time.Hour}
	require.NoError(t, w.Work(ctx, nil))
	require.Zero(t, advance(t, store, saleID, 5), "nobody admitted while the round is not had")

	b.Release(round)
	require.Eventually(t, func() bool {
		require.NoError(t, w.Work(ctx, nil))
		c, err = store.Crowd(ctx, saleID)
		require.NoError(t, err)
		return c.FinalSeed != nil
	}, 30*time.Second, 100*time.Millisecond, "ranked once the round is published")
	published := b.Signer.Round(round)
	require.Equal(t, published.Randomness, c.Beacon.Randomness)
	require.NotContains(t, before, fmt.Sprintf("%x", published.Randomness[:8]), "the round's value was stored before it was published")
	var root [32]byte
	copy(root[:], c.Root)
	f := flashline.LotteryFinalSeed(saleID, root, published.Randomness, c.Seed)
	require.Equal(t, f[:], c.FinalSeed)
	require.Equal(t, int64(5), advance(t, store, saleID, 5), "admitted once ranked")

	// The transcript, as GET /sales/{id}/draw serves it, checks out alone.
	body, err := json.Marshal(api.NewCrowdTranscript(c, flashline.NewCrowdTranscript(c)))
	require.NoError(t, err)
	var got api.DrawTranscript
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "drawn", got.Status)
	tr, err := got.Domain()
	require.NoError(t, err)
	for _, s := range flashline.VerifyDrawTranscript(tr, flashline.DrawPins{BeaconPublicKey: b.Chain.PublicKey, Root: c.Root}) {
		require.True(t, s.OK, "%s: %s", s.Name, s.Detail)
	}
}

// TestCrowdPausedWithoutBeacon: a crowd whose round does not come within
// the wait pauses its sale with the reason, and is never ranked; so does a
// crowd whose stored round was published before its commitment (written
// here by hand: the freeze never stores one).
func TestCrowdPausedWithoutBeacon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("RoundBeforeCommitment=", late), func(t *testing.T) {
			t.Parallel()
			b := testbeacon.Start(t, t.Name(), time.Now().Add(-24*time.Hour), 3*time.Second)
			store, saleID, query := beaconRoom(t, b, 3, time.Second)
			require.Zero(t, advance(t, store, saleID, 5))
			if late {
				c, err := store.Crowd(ctx, saleID)
				require.NoError(t, err)
				early := c.Beacon.Chain.RoundAt(*c.CommittedAt)
				query(fmt.Sprintf(`UPDATE waiting_rooms SET beacon_round = %d WHERE sale_id = $1 RETURNING beacon_round::text`, early))
			}
			w := &LotteryWorker{store: store, logger: slog.New(slog.DiscardHandler),
				beacon: Beacon{URL: b.URL, Client: b.Client()}, beaconWait: time.Second}
			require.Eventually(t, func() bool {
				require.NoError(t, w.Work(ctx, nil))
				sale, err := store.Sale(ctx, saleID)
				require.NoError(t, err)
				return sale.State == flashline.StatePaused
			}, 30*time.Second, 100*time.Millisecond, "paused")
			sale, err := store.Sale(ctx, saleID)
			require.NoError(t, err)
			require.True(t, strings.Contains(sale.PauseReason, "beacon"), sale.PauseReason)
			c, err := store.Crowd(ctx, saleID)
			require.NoError(t, err)
			require.Nil(t, c.FinalSeed, "never ranked without the round")
			require.Zero(t, advance(t, store, saleID, 5))
		})
	}
}

// TestCrowdRoundFixedAtTheFreeze: the line of a sale an operator opens
// before its time does not wait for the round fixed at creation, nor does
// a freeze that comes after that round was out use it: the freeze takes
// the first round CrowdBeaconDelay after its own time instead, still one
// published after the commitment.
func TestCrowdRoundFixedAtTheFreeze(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, shift := range map[string]time.Duration{"OpenedEarly": -time.Hour, "FrozeLate": time.Minute} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := testbeacon.Start(t, t.Name(), time.Now().Add(-24*time.Hour), 3*time.Second)
			store, saleID, _ := beaconRoom(t, b, 4, shift)
			c, err := store.Crowd(ctx, saleID)
			require.NoError(t, err)
			fixed := c.Beacon.Round
			if shift < 0 {
				_, err = store.SetSaleState(ctx, saleID, flashline.ActionOpen)
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool {
				advance(t, store, saleID, 1)
				c, err = store.Crowd(ctx, saleID)
				require.NoError(t, err)
				return c.Root != nil
			}, 30*time.Second, 100*time.Millisecond, "frozen")
			if shift < 0 {
				require.Less(t, c.Beacon.Round, fixed, "an earlier round than the one fixed at creation")
			} else {
				require.Greater(t, c.Beacon.Round, fixed, "a later round than the one fixed at creation, which was out")
			}
			require.Equal(t, flashline.CrowdRound(c.Beacon.Chain, *c.CommittedAt), c.Beacon.Round)
			require.True(t, c.Beacon.Chain.RoundTime(c.Beacon.Round).After(*c.CommittedAt), "published after the commitment")
		})
	}
}
