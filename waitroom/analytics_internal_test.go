package waitroom

import (
	"fmt"
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
			q.answered("s", ticket(string(rune('a'+i%26))+string(rune('a'+i/26))), StatusWaiting, t0, t0)
		})
	}
	wg.Wait()
	// "aa" is admitted after 7 s, and asks twice more; "ba" is told the
	// sale sold out; the others fall silent.
	for range 3 {
		q.answered("s", ticket("aa"), StatusAdmitted, t0, t0.Add(7*time.Second))
	}
	q.answered("s", ticket("ba"), StatusSoldOut, t0, t0.Add(7*time.Second))
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

// TestEdgeLines: an origin keeps each run of each edge's latest counts of a
// line, as of the report they came in: a later report's replace them, an
// older one's (heard late, from a retry) never do, the same counts heard
// again are not written again, and at most maxEdges runs per sale are kept.
func TestEdgeLines(t *testing.T) {
	t.Parallel()
	var l edgeLines
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	l.set("s", "edge/e1/r1", []byte(`1`), false, t0, t0)
	rows := l.unwritten()
	require.Equal(t, []flashline.QueueRow{{SaleID: "s", Instance: "edge/e1/r1", Counts: []byte(`1`), At: t0}}, rows)
	l.wrote(rows)
	require.Empty(t, l.unwritten())

	l.set("s", "edge/e1/r1", []byte(`1`), false, t0.Add(time.Second), t0.Add(time.Second))
	require.Empty(t, l.unwritten(), "the same counts again")
	l.set("s", "edge/e1/r1", []byte(`0`), false, t0.Add(-time.Second), t0.Add(time.Second))
	require.Empty(t, l.unwritten(), "an older report's")
	l.set("s", "edge/e1/r1", []byte(`2`), false, t0.Add(2*time.Second), t0.Add(2*time.Second))
	rows = l.unwritten()
	require.Len(t, rows, 1)
	require.Equal(t, []byte(`2`), rows[0].Counts)
	// A later report's counts heard while the earlier were being written
	// stay to be written.
	l.set("s", "edge/e1/r1", []byte(`3`), false, t0.Add(3*time.Second), t0.Add(3*time.Second))
	l.wrote(rows)
	rows = l.unwritten()
	require.Len(t, rows, 1)
	require.Equal(t, []byte(`3`), rows[0].Counts)
	l.wrote(rows)

	// The same counts, with waiters active, are written again once the
	// row would be too old for its Active to count.
	l.set("s", "edge/e1/r1", []byte(`3`), true, t0.Add(4*time.Second), t0.Add(4*time.Second))
	require.Empty(t, l.unwritten(), "written %s ago", time.Second)
	l.set("s", "edge/e1/r1", []byte(`3`), true, t0.Add(3*time.Second+activeRefresh), t0.Add(3*time.Second+activeRefresh))
	rows = l.unwritten()
	require.Len(t, rows, 1)
	require.Equal(t, t0.Add(3*time.Second+activeRefresh), rows[0].At)
	l.wrote(rows)

	for i := range maxEdges + 10 {
		l.set("s", fmt.Sprintf("edge/e%d/r", i), []byte(`1`), false, t0, t0)
	}
	require.Len(t, l.rows["s"], maxEdges)
	// Written and not heard from for edgeLineForget: forgotten; a sale
	// no longer a waiting room: forgotten.
	l.wrote(l.unwritten())
	l.keep(func(string) bool { return true }, t0.Add(edgeLineForget+10*time.Second))
	require.Empty(t, l.rows["s"])
	l.set("s", "edge/e1/r2", []byte(`1`), false, t0, t0)
	l.keep(func(string) bool { return false }, t0)
	require.Empty(t, l.rows)
}

// TestQueueStatsActiveRefresh: a line whose waiters keep asking and nothing
// else changes (a held line) is written again every activeRefresh, so that
// its row stays fresh enough for its Active to count; a line without
// active waiters is not.
func TestQueueStatsActiveRefresh(t *testing.T) {
	t.Parallel()
	var q queueStats
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	q.answered("s", roomtoken.Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0}, StatusWaiting, t0, t0)
	q.sweep(t0)
	_, versions := q.unwritten()
	q.wrote(versions)
	q.answered("s", roomtoken.Ticket{SaleID: "s", CustomerID: "c", ArrivedAt: t0}, StatusWaiting, t0, t0.Add(time.Second))
	q.sweep(t0.Add(time.Second))
	counts, _ := q.unwritten()
	require.Empty(t, counts, "nothing changed, written a second ago")
	q.sweep(t0.Add(activeRefresh))
	counts, versions = q.unwritten()
	require.Len(t, counts, 1, "written again while its waiter is active")
	q.wrote(versions)
	// Gone quiet: counted as left, once; then nothing more to write.
	q.sweep(t0.Add(time.Second + LeftAfter + time.Second))
	counts, versions = q.unwritten()
	require.Len(t, counts, 1)
	q.wrote(versions)
	q.sweep(t0.Add(time.Second + LeftAfter + 10*time.Second))
	counts, _ = q.unwritten()
	require.Empty(t, counts)
}
