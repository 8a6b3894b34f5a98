package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
)

// BenchmarkCrowdFreeze: the freeze at the open of a randomized_at_open room
// with N pre-open holders (issue 48), in two parts.
//
//   - freeze: the lease that freezes the crowd (LeasePositions, the room's
//     row locked FOR UPDATE for the whole call): it reads every holder,
//     hashes them, builds the Merkle root and commits it. freeze-ms is how
//     long every other lease and holder write of the room waits.
//   - draw: GET /sales/{id}/draw's work for that crowd: the holders read
//     (Store.Crowd), ranked (flashline.NewCrowdTranscript), rendered
//     (api.NewCrowdTranscript) and encoded; doc-MB is the document's size.
//
// peak-heap-MB is the largest heap seen while the operation ran (sampled
// every millisecond), B/op what it allocated. The holders are written in
// one INSERT (not timed): ids of 37 characters, as long as the customers'.
// The suite's run (-benchtime 1x) takes N = 1,000 only (does it run);
// 10,000, 100,000 and 1,000,000 are opt-in:
//
//	FLASHLINE_BENCH_CROWD_LARGE=1 go test -run '^$' -bench CrowdFreeze -benchtime 1x ./postgres/
func BenchmarkCrowdFreeze(b *testing.B) {
	sizes := []int{1_000}
	if os.Getenv("FLASHLINE_BENCH_CROWD_LARGE") != "" {
		sizes = []int{10_000, 100_000, 1_000_000}
	}
	pool, _ := testdb.NewPool(b)
	s := postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})
	ctx := context.Background()
	// newCrowd is a room of n holders whose opening time has passed, not
	// frozen yet.
	newCrowd := func(b *testing.B, n int) string {
		b.Helper()
		opens := time.Now().Add(time.Hour)
		sale, err := s.CreateSale(ctx, flashline.NewSale{SKU: "sku_crowd_bench", InitialStock: 10,
			Admission: flashline.AdmissionWaitingRoom, Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
		require.NoError(b, err)
		_, err = pool.Exec(ctx, `INSERT INTO waitroom_holders (sale_id, customer_id)
			SELECT $1, 'cust_' || md5(g::text) FROM generate_series(1, $2::int) g`, sale.ID, n)
		require.NoError(b, err)
		_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = now() - interval '1 second' WHERE sale_id = $1`, sale.ID)
		require.NoError(b, err)
		return sale.ID
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("holders=%d/freeze", n), func(b *testing.B) {
			b.ReportAllocs()
			var peak heapPeak
			for b.Loop() {
				b.StopTimer()
				saleID := newCrowd(b, n)
				runtime.GC()
				peak.start()
				b.StartTimer()
				_, preOpen, err := s.LeasePositions(ctx, saleID, 1, 0)
				b.StopTimer()
				peak.stop()
				require.NoError(b, err)
				require.False(b, preOpen)
				_, err = pool.Exec(ctx, `DELETE FROM waitroom_holders WHERE sale_id = $1`, saleID)
				require.NoError(b, err)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "freeze-ms")
			b.ReportMetric(peak.mb(), "peak-heap-MB")
		})
		b.Run(fmt.Sprintf("holders=%d/draw", n), func(b *testing.B) {
			saleID := newCrowd(b, n)
			_, _, err := s.LeasePositions(ctx, saleID, 1, 0)
			require.NoError(b, err)
			b.ReportAllocs()
			runtime.GC()
			var peak heapPeak
			peak.start()
			size := 0
			b.ResetTimer()
			for b.Loop() {
				c, err := s.Crowd(ctx, saleID)
				require.NoError(b, err)
				doc, err := json.Marshal(api.NewCrowdTranscript(c, flashline.NewCrowdTranscript(c)))
				require.NoError(b, err)
				size = len(doc)
			}
			b.StopTimer()
			peak.stop()
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "draw-ms")
			b.ReportMetric(float64(size)/1e6, "doc-MB")
			b.ReportMetric(peak.mb(), "peak-heap-MB")
		})
	}
}

// heapPeak samples the heap's live objects every millisecond between start
// and stop, keeping the largest.
type heapPeak struct {
	max  atomic.Uint64
	done chan struct{}
	quit chan struct{}
}

func (p *heapPeak) start() {
	p.done, p.quit = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > p.max.Load() {
				p.max.Store(v)
			}
			select {
			case <-p.quit:
				return
			case <-t.C:
			}
		}
	}()
}

func (p *heapPeak) stop() { close(p.quit); <-p.done }

func (p *heapPeak) mb() float64 { return float64(p.max.Load()) / 1e6 }
