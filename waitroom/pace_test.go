package waitroom_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

func TestStep(t *testing.T) {
	t.Parallel()
	const tick = 200 * time.Millisecond
	tests := []struct {
		name string
		in   waitroom.PaceInput
		want int64
	}{
		{"HeadroomDrivesTheStep", waitroom.PaceInput{Headroom: 10, Available: 1000, Waiting: 1000, Tick: tick}, 20},
		{"PartialSlotRoundsUp", waitroom.PaceInput{Headroom: 1, Available: 1000, Waiting: 1000, Tick: 50 * time.Millisecond}, 1},
		{"LongerTickLargerStep", waitroom.PaceInput{Headroom: 10, Available: 1000, Waiting: 1000, Tick: time.Second}, 100},
		{"MeasuredLatencyDrivesTheStep", waitroom.PaceInput{Headroom: 10, Latency: 20 * time.Millisecond, Available: 1000, Waiting: 1000, Tick: tick}, 100},
		{"SlowPurchasePathSmallerStep", waitroom.PaceInput{Headroom: 10, Latency: time.Second, Available: 1000, Waiting: 1000, Tick: tick}, 2},
		{"TinyLatencyIsFloored", waitroom.PaceInput{Headroom: 10, Latency: time.Microsecond, Available: 1000, Waiting: 1000, Tick: tick}, 400},
		{"NoStockNoStep", waitroom.PaceInput{Headroom: 10, Available: 0, Waiting: 1000, Tick: tick}, 0},
		{"NobodyWaitingNoStep", waitroom.PaceInput{Headroom: 10, Available: 100, Waiting: 0, Tick: tick}, 0},
		{"NotPastTheLastWaiter", waitroom.PaceInput{Headroom: 10, Available: 100, Waiting: 3, Tick: tick}, 3},
		{"OutstandingCapsTheStep", waitroom.PaceInput{Headroom: 100, Available: 10, Outstanding: 20, Waiting: 1000, Tick: tick}, 2*10 + waitroom.OutstandingFloor - 20},
		{"OutstandingAtTheCapStops", waitroom.PaceInput{Headroom: 100, Available: 10, Outstanding: 28, Waiting: 1000, Tick: tick}, 0},
		{"OutstandingOverTheCapStops", waitroom.PaceInput{Headroom: 100, Available: 1, Outstanding: 500, Waiting: 1000, Tick: tick}, 0},
		{"SaturatedButNothingOutstandingStillProgresses", waitroom.PaceInput{Headroom: 0, Available: 5, Waiting: 1000, Tick: tick}, 1},
		{"OverloadedButNothingOutstandingStillProgresses", waitroom.PaceInput{Headroom: -40, Available: 5, Waiting: 1000, Tick: tick}, 1},
		{"SaturatedWithOutstandingWaits", waitroom.PaceInput{Headroom: 0, Available: 5, Outstanding: 1, Waiting: 1000, Tick: tick}, 0},
		{"LastUnitSmallFloor", waitroom.PaceInput{Headroom: 100, Available: 1, Waiting: 1000, Tick: tick}, 2 + waitroom.OutstandingFloor},
		{"NegativeOutstandingIsNone", waitroom.PaceInput{Headroom: 0, Available: 5, Outstanding: -3, Waiting: 1000, Tick: tick}, 1},
		{"NoTickNoStep", waitroom.PaceInput{Headroom: 10, Available: 5, Waiting: 10}, 0},
		// The path completes a batch per latency, not a reservation per
		// free slot: the limiter's wide headroom is bounded by the batch.
		{"BatchBoundsTheHeadroom", waitroom.PaceInput{Headroom: 3000, Batch: 64, Latency: 20 * time.Millisecond, Available: 100000, Waiting: 100000, Tick: tick}, 640},
		{"BatchAtTheAssumedServiceTime", waitroom.PaceInput{Headroom: 3000, Batch: 64, Available: 100000, Waiting: 100000, Tick: tick}, 128},
		{"SmallHeadroomUnderTheBatch", waitroom.PaceInput{Headroom: 16, Batch: 64, Latency: 20 * time.Millisecond, Available: 100000, Waiting: 100000, Tick: tick}, 160},
		{"StockBoundsTheBatch", waitroom.PaceInput{Headroom: 3000, Batch: 64, Latency: 20 * time.Millisecond, Available: 100, Waiting: 100000, Tick: tick}, 2*100 + waitroom.OutstandingFloor},
		{"SaturatedBatchStillProgresses", waitroom.PaceInput{Headroom: -5, Batch: 64, Available: 100, Waiting: 100000, Tick: tick}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, waitroom.Step(tt.in))
		})
	}
}

// TestStepBounds checks the promises of Step over a grid of inputs: never
// negative, never past the last waiter, never more outstanding than the cap
// allows, and progress whenever stock remains, someone waits and nothing is
// outstanding.
func TestStepBounds(t *testing.T) {
	t.Parallel()
	for _, headroom := range []int64{-5, 0, 1, 7, 1000} {
		for _, available := range []int64{0, 1, 3, 200} {
			for _, outstanding := range []int64{0, 1, 10, 500} {
				for _, waiting := range []int64{0, 1, 50, 100000} {
					for _, batch := range []int64{0, 1, 64} {
						in := waitroom.PaceInput{Headroom: headroom, Batch: batch, Available: available, Outstanding: outstanding, Waiting: waiting, Tick: 200 * time.Millisecond}
						s := waitroom.Step(in)
						require.GreaterOrEqual(t, s, int64(0), "%+v", in)
						require.LessOrEqual(t, s, max(waiting, 0), "%+v", in)
						require.LessOrEqual(t, outstanding+s, max(outstanding, waitroom.OutstandingFactor*available+waitroom.OutstandingFloor), "%+v", in)
						if available > 0 && waiting > 0 && outstanding == 0 {
							require.Positive(t, s, "%+v", in)
						}
						if batch > 0 {
							require.LessOrEqual(t, s, max(batch*2, 1), "%+v: at most a batch per 100 ms assumed", in)
						}
					}
				}
			}
		}
	}
}

// TestCapacity: what the path absorbs in a tick at its measured latency,
// bounded by the batch it completes per latency.
func TestCapacity(t *testing.T) {
	t.Parallel()
	in := waitroom.PaceInput{Headroom: 10000, Batch: 64, Latency: 25 * time.Millisecond, Tick: time.Second}
	require.Equal(t, int64(64*40), in.Capacity(), "64 a batch, 40 batches a second")
	in.Batch = 0
	require.Equal(t, int64(10000*40), in.Capacity(), "no batch given: the headroom alone")
	in.Tick = 0
	require.Zero(t, in.Capacity())
}

func TestRank(t *testing.T) {
	t.Parallel()
	pre := func(position int64, draw uint64) roomtoken.Ticket {
		return roomtoken.Ticket{Position: position, PreOpen: true, Draw: draw}
	}
	post := roomtoken.Ticket{Position: 101}
	random, arrival := flashline.FairnessRandomizedAtOpen, flashline.FairnessArrivalOrder

	require.Equal(t, int64(1), waitroom.Rank(pre(7, 0), random, 100), "the lowest draw ranks first")
	require.Equal(t, int64(100), waitroom.Rank(pre(7, math.MaxUint64), random, 100), "the highest draw ranks last of the pre-open crowd")
	require.Equal(t, int64(51), waitroom.Rank(pre(7, 1<<63), random, 100))
	require.Equal(t, int64(7), waitroom.Rank(pre(7, 1<<63), arrival, 100), "arrival order ignores the draw")
	require.Equal(t, int64(101), waitroom.Rank(post, random, 100), "after the open, arrival order, behind the pre-open crowd")
	require.Equal(t, int64(101), waitroom.Rank(post, arrival, 100))
	// The draw decides, not the arrival.
	require.Less(t, waitroom.Rank(pre(90, 1<<60), random, 100), waitroom.Rank(pre(2, 1<<62), random, 100))
}
