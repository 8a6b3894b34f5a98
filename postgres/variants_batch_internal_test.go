package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// variantSale is a sale of n variants v0..v(n-1) of stock units each.
func variantSale(t *testing.T, n, stock int) (*Store, flashline.Sale) {
	t.Helper()
	vs := make([]flashline.NewVariant, n)
	for i := range vs {
		vs[i] = flashline.NewVariant{SKU: fmt.Sprintf("v%d", i), Stock: stock}
	}
	return batchStore(t, flashline.NewSale{PerCustomerLimit: 1, Variants: vs})
}

func variantReserve(s *Store, saleID, customer, variant string) error {
	_, err := s.Reserve(context.Background(), flashline.ReserveRequest{
		SaleID: saleID, CustomerID: customer, IdempotencyKey: "k", Quantity: 1, Variant: variant,
		Fingerprint: []byte("f/" + variant),
	})
	return err
}

// TestVariantsShareTheSalesBatchesInFlight: the batches of a sale with
// variants are one variant's each, and the sale's batches in flight are
// bounded across its variants as for one SKU (BatchesInFlight), not per
// variant. A first batch is held open while requests of every variant
// arrive from their own goroutines; the sale runs at most BatchesInFlight
// transactions at once, measured in the transactions themselves (the
// purchase pool's connections in use), and every request is served, in
// the variant it asked for.
func TestVariantsShareTheSalesBatchesInFlight(t *testing.T) {
	t.Parallel()
	const variants, perVariant, inFlight = 8, 3, 2
	s, sale := variantSale(t, variants, 10)
	s.opts.BatchesInFlight = inFlight
	var batched, inHook, mostInHook, mostConns atomic.Int64
	s.opts.OnBatch = func(n int) { batched.Add(int64(n)) }
	raise := func(most *atomic.Int64, v int64) {
		for {
			m := most.Load()
			if v <= m || most.CompareAndSwap(m, v) {
				return
			}
		}
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	defer open() // a failure does not leave batches held
	s.testHookAfterBegin = func() {
		raise(&mostInHook, inHook.Add(1))
		raise(&mostConns, int64(s.sale.Stat().AcquiredConns()))
		<-release
		inHook.Add(-1)
	}
	waiting := func() int64 {
		s.batches.mu.Lock()
		defer s.batches.mu.Unlock()
		n := 0
		for _, q := range s.batches.sales {
			n += len(q.waiting)
		}
		return int64(n)
	}

	total := 1 + variants*perVariant
	results := make(chan error, total)
	go func() { results <- variantReserve(s, sale.ID, "first", "v0") }()
	require.Eventually(t, func() bool { return inHook.Load() == 1 }, 10*time.Second, time.Millisecond)
	var wg sync.WaitGroup
	for v := range variants {
		for c := range perVariant {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results <- variantReserve(s, sale.ID, fmt.Sprintf("c%d-%d", v, c), fmt.Sprintf("v%d", v))
			}()
		}
	}
	// Every request is either in a batch held open or waiting, and the
	// sale has as many batches open as it may: the moment of most work in
	// flight.
	require.Eventually(t, func() bool {
		return inHook.Load() > inFlight || inHook.Load() == inFlight && batched.Load()+waiting() == int64(total)
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, int64(inFlight), inHook.Load(), "batches of one sale in flight at once")
	open()
	wg.Wait()
	for range total {
		require.NoError(t, <-results)
	}
	require.Equal(t, int64(inFlight), mostInHook.Load(), "batches in flight at once, across the variants")
	require.LessOrEqual(t, mostConns.Load(), int64(inFlight), "the sale's transactions at once")

	vs := checkInvariant(t, s, sale.ID).Variants
	require.Len(t, vs, variants)
	for i, v := range vs {
		want := perVariant
		if i == 0 {
			want++ // "first"
		}
		require.Equal(t, want, v.Pending, "variant %s", v.SKU)
		require.True(t, v.OK, "variant %s", v.SKU)
	}
}

// TestVariantsShareTheSalesQueueBound: the requests of a sale with variants
// wait in the sale's one queue, bounded as a sale without variants' is
// (Options.QueueRounds): once it is full, a request of yet another variant
// is refused at once, and the sale's QueueFull says so beforehand.
func TestVariantsShareTheSalesQueueBound(t *testing.T) {
	t.Parallel()
	s, sale := variantSale(t, 4, 5)
	s.opts.MaxBatch, s.opts.QueueRounds = 1, 2
	running, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	defer open() // a failure does not leave the batch held
	s.testHookAfterBegin = func() {
		once.Do(func() {
			close(running)
			<-release
		})
	}
	results := make(chan error, 3)
	go func() { results <- variantReserve(s, sale.ID, "first", "v0") }()
	<-running // the sale's one batch is held; the next two wait
	go func() { results <- variantReserve(s, sale.ID, "second", "v1") }()
	go func() { results <- variantReserve(s, sale.ID, "third", "v2") }()
	require.Eventually(t, func() bool {
		s.batches.mu.Lock()
		defer s.batches.mu.Unlock()
		q := s.batches.sales[sale.ID]
		return q != nil && len(q.waiting) == 2
	}, 10*time.Second, time.Millisecond)

	require.True(t, s.QueueFull(sale.ID), "two rounds of one wait, of two variants")
	start := time.Now()
	err := variantReserve(s, sale.ID, "fourth", "v3")
	require.ErrorIs(t, err, flashline.ErrOverloaded)
	require.Less(t, time.Since(start), time.Second, "refused at once, not after a wait")

	open()
	for range 3 {
		require.NoError(t, <-results)
	}
	require.False(t, s.QueueFull(sale.ID))
	got := checkInvariant(t, s, sale.ID)
	require.Equal(t, 3, got.Pending)
}
