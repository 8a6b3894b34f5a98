package waitroom

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/sql/dbsqlc"
)

type fixedCapacity int64

func (c fixedCapacity) Limit() int64  { return int64(c) }
func (fixedCapacity) InFlight() int64 { return 0 }

func (fixedCapacity) Latency() time.Duration { return 0 }

// TestWatermarkMonotonicWithTwoPacers runs two pacers at once, as if two
// instances both believed they led (no advisory lock), each on its own
// connection with its own memory, plus a third writer trying to set the
// watermark back. Observed from outside, the watermark never decreases, and
// it ends at the highest value anyone set.
func TestWatermarkMonotonicWithTwoPacers(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	ctx := context.Background()
	store := postgres.NewStore(pool, pool)
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_race", InitialStock: 1_000_000, Admission: flashline.AdmissionWaitingRoom})
	require.NoError(t, err)
	_, err = store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)
	// Plenty of waiters to admit.
	_, err = pool.Exec(ctx, `UPDATE waiting_rooms SET next_position = 1000000000 WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)

	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	var ticks atomic.Int64
	for i := range 2 {
		r := NewRoom(pool, DeriveKeyring("k"), fixedCapacity(50+i*30), Options{Tick: 5 * time.Millisecond})
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(conn.Release)
		wg.Go(func() {
			p := newPacerState()
			q := dbsqlc.New(conn)
			for time.Now().Before(deadline) {
				if err := r.tick(ctx, q, p); err != nil {
					t.Error(err)
					return
				}
				ticks.Add(1)
			}
		})
	}
	var highestAttempt atomic.Int64
	wg.Go(func() {
		q := dbsqlc.New(pool)
		for time.Now().Before(deadline) {
			target := rand.Int64N(5000)
			highestAttempt.Store(max(highestAttempt.Load(), target))
			if _, err := q.WaitroomAdvance(ctx, target, 1, sale.ID); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				t.Error(err)
				return
			}
		}
	})
	var observed []int64
	wg.Go(func() {
		for time.Now().Before(deadline) {
			var w int64
			if err := pool.QueryRow(ctx, `SELECT admitted_through FROM waiting_rooms WHERE sale_id = $1`, sale.ID).Scan(&w); err != nil {
				t.Error(err)
				return
			}
			observed = append(observed, w)
		}
	})
	wg.Wait()
	require.NotEmpty(t, observed)
	for i := 1; i < len(observed); i++ {
		require.GreaterOrEqual(t, observed[i], observed[i-1], "the watermark went back")
	}
	var final int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT admitted_through FROM waiting_rooms WHERE sale_id = $1`, sale.ID).Scan(&final))
	require.GreaterOrEqual(t, final, highestAttempt.Load())
	require.Positive(t, final)
	t.Logf("%d ticks by two pacers, %d observations, final watermark %d", ticks.Load(), len(observed), final)
}

// TestOutstandingAgesOut: admissions given out long ago and never used stop
// holding the pacer back; a new leader (no history) is conservative.
func TestOutstandingAgesOut(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	window := time.Minute
	h := &roomHistory{}
	// A leader that has just started knows nothing of the past: admitted
	// minus reserved.
	require.Equal(t, int64(70), h.outstanding(start, start, 100, 30, window))
	for s := range 120 {
		h.record(start.Add(time.Duration(s)*time.Second), int64(100+s), window)
	}
	now := start.Add(119 * time.Second)
	// 60 s ago the watermark was 159; 219 now: 60 given out lately, of which
	// at most admitted − reserved are unused.
	require.Equal(t, int64(60), h.outstanding(now, start, 219, 30, window))
	require.Equal(t, int64(9), h.outstanding(now, start, 219, 210, window))
	require.Equal(t, int64(0), h.outstanding(now, start, 219, 300, window))
	require.LessOrEqual(t, len(h.marks), 62, "history is trimmed to the window")
	for i := range h.marks[1:] {
		require.True(t, h.marks[i+1].at.After(h.marks[i].at), fmt.Sprint(i))
	}
}
