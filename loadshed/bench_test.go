package loadshed

import (
	"context"
	"errors"
	"testing"
	"time"
)

// BenchmarkAcquireRelease is the admitted path: a free slot, then Release.
func BenchmarkAcquireRelease(b *testing.B) {
	l := newLimiter(b, fixed(1000, Options{}))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tok, err := l.Acquire(ctx, PriorityReserve)
		if err != nil {
			b.Fatal(err)
		}
		tok.Release(Success)
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	l := newLimiter(b, fixed(100_000, Options{}))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			tok, err := l.Acquire(ctx, PriorityReserve)
			if err != nil {
				b.Error(err)
				return
			}
			tok.Release(Success)
		}
	})
}

// BenchmarkShed is the refusal path: the limit is full and the queue is
// disabled or full, so the decision is an immediate ErrShed.
func BenchmarkShed(b *testing.B) {
	ctx := context.Background()
	for _, bb := range []struct {
		name string
		opts Options
		fill int // waiters to park in the queue
	}{
		{"QueueDisabled", fixed(1, Options{QueueSize: -1}), 0},
		{"QueueFull", fixed(1, Options{QueueSize: 8, MaxWait: time.Hour}), 8},
	} {
		b.Run(bb.name, func(b *testing.B) {
			l := fullLimiter(b, bb.opts, bb.fill)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Acquire(ctx, PriorityReserve); !errors.Is(err, ErrShed) {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkShedParallel(b *testing.B) {
	l := fullLimiter(b, fixed(1, Options{QueueSize: -1}), 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := l.Acquire(ctx, PriorityReserve); !errors.Is(err, ErrShed) {
				b.Error(err)
				return
			}
		}
	})
}

// fullLimiter returns a limiter whose one slot is taken and whose queue holds
// fill waiters, all cleaned up when the benchmark ends.
func fullLimiter(b *testing.B, o Options, fill int) *Limiter {
	b.Helper()
	l := newLimiter(b, o)
	hold := mustAcquire(b, l, PriorityReserve)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan acquired, fill)
	for range fill {
		acquireAsync(ctx, l, PriorityReserve, "", done)
	}
	waitQueued(b, l, int64(fill))
	b.Cleanup(func() {
		cancel()
		for range fill {
			<-done
		}
		hold.Release(Success)
	})
	return l
}
