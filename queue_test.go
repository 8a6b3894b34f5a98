package flashline_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestQueueCountsMergeAcrossInstances: two instances' counts of one line,
// as each writes them, add up bucket by bucket; the quantiles are the
// fleet's, not either instance's; a stale instance's waiters asking now
// do not count, and a row no instance writes is left out.
func TestQueueCountsMergeAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := flashline.NewQueueCounts(), flashline.NewQueueCounts()
	// Instance a admitted 50 tickets that waited about 1 s; b 50 that
	// waited about 100 s.
	a.Wait[flashline.QueueBucket(800*time.Millisecond)] = 50
	b.Wait[flashline.QueueBucket(100*time.Second)] = 50
	a.ToReserve[flashline.QueueBucket(3*time.Second)] = 40
	b.ToReserve[flashline.QueueBucket(3*time.Second)] = 30
	a.Arrivals, b.Arrivals = 70, 80
	a.Minutes[100], b.Minutes[100], b.Minutes[101] = 70, 30, 50
	a.Left, b.Left = 3, 4
	b.Returns = 2 // b heard two waiters a had answered (issue 50)
	a.Active, b.Active = 5, 6
	enc := func(c flashline.QueueCounts) []byte {
		out, err := json.Marshal(c)
		require.NoError(t, err)
		return out
	}
	merged, instances, bad := flashline.MergeQueue([]flashline.QueueReport{
		{Instance: "a", Counts: enc(a), Age: time.Second},
		{Instance: "b", Counts: enc(b), Age: time.Minute}, // stale: its Active is old
		{Instance: "c", Counts: []byte(`{"arrivals":1,"wait":[1],"toReserve":[]}`)},
	})
	require.Len(t, bad, 1)
	require.Equal(t, 2, instances)
	require.EqualValues(t, 150, merged.Arrivals)
	require.EqualValues(t, 100, merged.Admitted())
	require.EqualValues(t, 70, merged.Reserved())
	require.EqualValues(t, 7, merged.Left)
	require.EqualValues(t, 2, merged.Returns)
	require.EqualValues(t, 5, merged.LeftLine(), "left the line: the rows' left less their returns")
	require.EqualValues(t, 5, merged.Active)
	require.Equal(t, map[int64]int64{100: 100, 101: 50}, merged.Minutes)

	// Half waited ≤ 1 s, half 90-120 s: the p50 is in the first bucket,
	// the p90 and p99 in b's.
	p50, p90, p99 := flashline.QueueQuantile(merged.Wait, 0.5), flashline.QueueQuantile(merged.Wait, 0.9), flashline.QueueQuantile(merged.Wait, 0.99)
	require.NotNil(t, p50)
	require.InDelta(t, 1, *p50, 1e-9)
	require.InDelta(t, 90+30*0.8, *p90, 1e-9)
	require.InDelta(t, 90+30*0.98, *p99, 1e-9)
	// Either instance alone says otherwise.
	require.InDelta(t, 0.9, *flashline.QueueQuantile(a.Wait, 0.9), 1e-9)
	require.Nil(t, flashline.QueueQuantile(flashline.NewQueueCounts().Wait, 0.5))
	// Past the last bound: the last bound.
	long := flashline.NewQueueCounts()
	long.Wait[len(flashline.QueueBuckets)] = 3
	require.InDelta(t, 7200, *flashline.QueueQuantile(long.Wait, 0.99), 1e-9)
}

// TestQueueCountsRefused: what no instance writes is refused, not summed.
func TestQueueCountsRefused(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"NotJSON":         `{`,
		"ShortBuckets":    `{"wait":[1,2],"toReserve":[1,2]}`,
		"Negative":        `{"arrivals":-1,"wait":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"toReserve":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`,
		"NegativeBin":     `{"wait":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,-5],"toReserve":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`,
		"NegativeReturns": `{"returns":-1,"wait":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"toReserve":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`,
	} {
		_, err := flashline.DecodeQueueCounts([]byte(body))
		require.Error(t, err, name)
	}
	c, err := flashline.DecodeQueueCounts([]byte(`{"wait":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1],"toReserve":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`))
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Admitted())
	require.Zero(t, c.Returns, "a row written before returns were counted")
	// More returns than left (waiters moved and not yet counted left where
	// they were): never below zero.
	c.Left, c.Returns = 2, 5
	require.Zero(t, c.LeftLine())
	b, err := json.Marshal(flashline.NewQueueCounts())
	require.NoError(t, err)
	require.NotContains(t, string(b), "returns", "none: not written, as the Worker writes it")
}
