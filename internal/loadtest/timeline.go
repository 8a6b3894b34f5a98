package loadtest

import (
	"slices"
	"time"
)

// Bucket is a slice of the run's time: the answers that arrived in
// [Start, Start+Width) after the run's start.
type Bucket struct {
	Start, Width time.Duration
	Requests     int
	Reserved     int // distinct reservations first given (201s; replays not counted again)
	P50, P99     time.Duration
}

// RequestRate is the bucket's answers per second.
func (b Bucket) RequestRate() float64 { return float64(b.Requests) / b.Width.Seconds() }

// ReservedRate is the bucket's successful reservations per second.
func (b Bucket) ReservedRate() float64 { return float64(b.Reserved) / b.Width.Seconds() }

// bucketWidth is 1s, or finer for runs under 20s so that a chart still has
// 20 to 40 points: the smallest of 10ms, 20ms, 50ms, ... 500ms that keeps
// the run within 40 buckets.
func bucketWidth(span time.Duration) time.Duration {
	for _, w := range []time.Duration{10, 20, 50, 100, 200, 500} {
		if w *= time.Millisecond; span <= 40*w {
			return w
		}
	}
	return time.Second
}

// timeline buckets a run of length elapsed by when each answer arrived:
// at[i] and latencies[i] are one answer, reservedAt when each distinct
// reservation was first given. A last bucket shorter than a quarter of the
// width is folded into the one before it, so that a few stragglers do not
// make a rate out of a sliver of time.
func timeline(elapsed time.Duration, at, latencies, reservedAt []time.Duration) []Bucket {
	span := elapsed
	for _, d := range at {
		span = max(span, d+1) // +1: an answer at span belongs inside it
	}
	if span <= 0 {
		return nil
	}
	w := bucketWidth(span)
	n := int((span + w - 1) / w)
	if n > 1 && span-time.Duration(n-1)*w < w/4 {
		n--
	}
	index := func(d time.Duration) int { return min(int(d/w), n-1) }
	buckets := make([]Bucket, n)
	lat := make([][]time.Duration, n)
	for i := range buckets {
		buckets[i].Start, buckets[i].Width = time.Duration(i)*w, w
	}
	buckets[n-1].Width = span - buckets[n-1].Start
	for i, d := range at {
		b := index(d)
		buckets[b].Requests++
		lat[b] = append(lat[b], latencies[i])
	}
	for _, d := range reservedAt {
		buckets[index(d)].Reserved++
	}
	for i := range buckets {
		slices.Sort(lat[i])
		buckets[i].P50, buckets[i].P99 = percentile(lat[i], .5), percentile(lat[i], .99)
	}
	return buckets
}
