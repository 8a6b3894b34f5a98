package waitroom

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestQueueStatsCounts: an instance's counts of a line, from the answers it
// gave: a wait counted once per admitted ticket however often it asks, a
// waiter silent for LeftAfter counted as left (an admitted one, or one told
// the sale sold out, is not), the time from admission to reservation, and
// the arrivals by minute; concurrent answers counted under -race.
func TestQueueStatsCounts(t *testing.T) {
	t.Parallel()
	var q queueStats
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ticket := func(c string) roomtoken.Ticket {
		return roomtoken.Ticket{SaleID: "s", CustomerID: c, ArrivedAt: t0, Position: 1}
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			q.arrived("s", t0)
			q.answered("s", ticket(string(rune('a'+i%26))+string(rune('a'+i/26))), StatusWaiting, t0)
		})
	}
	wg.Wait()
	// "aa" is admitted after 7 s, and asks twice more; "ba" is told the
	// sale sold out; the others fall silent.
	for range 3 {
		q.answered("s", ticket("aa"), StatusAdmitted, t0.Add(7*time.Second))
	}
	q.answered("s", ticket("ba"), StatusSoldOut, t0.Add(7*time.Second))
	q.sweep(t0.Add(30 * time.Second))
	c := q.sales["s"].counts
	require.EqualValues(t, 100, c.Arrivals)
	require.EqualValues(t, 1, c.Admitted())
	require.EqualValues(t, 1, c.Wait[flashline.QueueBucket(7*time.Second)])
	require.EqualValues(t, 98, c.Active)
	require.Zero(t, c.Left)
	require.Equal(t, map[int64]int64{t0.Unix() / 60: 100}, c.Minutes)

	q.reserved(roomtoken.Admission{SaleID: "s", CustomerID: "aa", ExpiresAt: t0.Add(7*time.Second + 120*time.Second)}, 120*time.Second, t0.Add(10*time.Second))
	require.EqualValues(t, 1, q.sales["s"].counts.ToReserve[flashline.QueueBucket(3*time.Second)])

	q.sweep(t0.Add(LeftAfter + time.Minute))
	c = q.sales["s"].counts
	require.EqualValues(t, 98, c.Left)
	require.Zero(t, c.Active)
	require.Empty(t, q.waiters)

	// What changed is written once, then not again until it changes.
	counts, versions := q.unwritten()
	require.Len(t, counts, 1)
	q.wrote(versions)
	counts, _ = q.unwritten()
	require.Empty(t, counts)
	decoded, err := flashline.DecodeQueueCounts(func() []byte { b, _ := q.unwrittenAll(); return b }())
	require.NoError(t, err)
	require.EqualValues(t, 98, decoded.Left)
}

// unwrittenAll is s's counts encoded, as unwritten writes them.
func (q *queueStats) unwrittenAll() ([]byte, error) {
	q.mu.Lock()
	q.sales["s"].wrote = 0
	q.mu.Unlock()
	counts, _ := q.unwritten()
	return counts["s"], nil
}
