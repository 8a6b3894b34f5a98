package flashline

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// The waiting room's analytics: how long people waited, how many came,
// left, were admitted and reserved. Nothing of it is written per arrival or
// per poll: each instance counts its own waiters in memory (QueueCounts,
// waitroom's analytics), writes its counts of each sale to a small shared
// table at most once a second while they change (one row per instance and
// sale), and the console and the report add every instance's rows together
// (MergeQueue), as the fleet's reservation answers are added. The times are
// fixed histograms (QueueBuckets), so two instances' counts merge exactly:
// a bucket's count is the sum of the instances' counts of it.

// QueueBuckets are the upper bounds, in seconds, of the buckets of the
// queue's times (ticket to admission, admission to reservation); a last
// bucket, past the last bound, counts the longer ones.
var QueueBuckets = []float64{1, 2, 5, 10, 20, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600, 7200}

// QueueMinutes is how many minutes of arrivals an instance's counts keep,
// the latest.
const QueueMinutes = 120

// QueueActiveFresh is how recent an instance's counts must be for its
// waiters seen lately (QueueCounts.Active) to count: an instance writes its
// counts once a second while they change, and every 2.5 s at least while it
// has active waiters.
const QueueActiveFresh = 5 * time.Second

// QueueCounts is one instance's counts of one sale's line since the
// instance started, as it writes them (JSON).
type QueueCounts struct {
	// Arrivals is the places in line this instance handed out (new
	// tickets; a ticket given back counts once, where it was taken).
	Arrivals int64 `json:"arrivals"`
	// Wait counts the tickets admitted by this instance by time from
	// arrival to admission, one count per bucket of QueueBuckets and a last
	// past them.
	Wait []int64 `json:"wait"`
	// ToReserve counts the reservations this instance made with an
	// admission token, by time from admission to reservation.
	ToReserve []int64 `json:"toReserve"`
	// Left is the waiters this instance answered "waiting" (or "sold out
	// for now") that then asked nothing more of it for a while
	// (waitroom.LeftAfter) without being admitted or told the sale sold out
	// for good: each instance judges it alone, so a waiter who moved to
	// another instance counts here too.
	Left int64 `json:"left"`
	// Returns is the waiters this instance first heard long after their
	// page began asking (waitroom.ReturnAfter): heard before, elsewhere or
	// before they went quiet. Counts written before it have none (0).
	Returns int64 `json:"returns,omitempty"`
	// Active is the waiters this instance answered "waiting" in the last
	// LeftAfter, when it wrote these counts (a gauge, not a total).
	Active int64 `json:"active"`
	// Minutes is the arrivals of each minute (unix minute → count), the
	// latest QueueMinutes.
	Minutes map[int64]int64 `json:"minutes,omitempty"`
}

// Admitted is the tickets admitted (the Wait histogram's count).
func (c QueueCounts) Admitted() int64 { return sum(c.Wait) }

// LeftLine is the waiters who left the line, of counts added over every
// instance (MergeQueue): Left less Returns, as every instance a waiter
// talked to ends its time with it once, silent (left) or not, and each but
// the first heard it as a return; never below zero. Of one instance's
// counts it is a figure of nothing (its Left and Returns are its own).
func (c QueueCounts) LeftLine() int64 { return max(0, c.Left-c.Returns) }

// Reserved is the reservations made with an admission token.
func (c QueueCounts) Reserved() int64 { return sum(c.ToReserve) }

func sum(b []int64) int64 {
	var n int64
	for _, x := range b {
		n += x
	}
	return n
}

// QueueReport is one instance's counts of a sale as the database holds
// them (encoded), and how long ago they were written.
type QueueReport struct {
	Instance string
	Counts   []byte
	Age      time.Duration
}

// QueueRow is one instance's or edge's counts of a sale's line (encoded)
// to be written as of At: an origin writes the edges' counts it heard as
// their rows, each as of when the edge signed its report, so that the
// origins hearing the same report write it once and an older report never
// replaces a newer one.
type QueueRow struct {
	SaleID   string
	Instance string
	Counts   []byte
	At       time.Time
}

// DecodeQueueCounts reads one instance's counts, refusing what no instance
// writes (bucket lists of another length, negative or absurd counts): a
// row that cannot be read is left out of the sums rather than poisoning
// them.
func DecodeQueueCounts(b []byte) (QueueCounts, error) {
	var c QueueCounts
	if err := json.Unmarshal(b, &c); err != nil {
		return QueueCounts{}, fmt.Errorf("queue counts: %w", err)
	}
	ok := func(n int64) bool { return n >= 0 && n <= 1e12 }
	if len(c.Wait) != len(QueueBuckets)+1 || len(c.ToReserve) != len(QueueBuckets)+1 ||
		!ok(c.Arrivals) || !ok(c.Left) || !ok(c.Returns) || !ok(c.Active) || len(c.Minutes) > QueueMinutes {
		return QueueCounts{}, fmt.Errorf("queue counts: not an instance's counts")
	}
	for _, list := range [][]int64{c.Wait, c.ToReserve} {
		for _, n := range list {
			if !ok(n) {
				return QueueCounts{}, fmt.Errorf("queue counts: count %d", n)
			}
		}
	}
	for _, n := range c.Minutes {
		if !ok(n) {
			return QueueCounts{}, fmt.Errorf("queue counts: count %d", n)
		}
	}
	return c, nil
}

// NewQueueCounts is empty counts with their buckets.
func NewQueueCounts() QueueCounts {
	return QueueCounts{Wait: make([]int64, len(QueueBuckets)+1), ToReserve: make([]int64, len(QueueBuckets)+1), Minutes: map[int64]int64{}}
}

// Add adds o's counts to c's (Active only when fresh says o's is current).
func (c *QueueCounts) Add(o QueueCounts, fresh bool) {
	c.Arrivals += o.Arrivals
	c.Left += o.Left
	c.Returns += o.Returns
	if fresh {
		c.Active += o.Active
	}
	for i := range c.Wait {
		c.Wait[i] += o.Wait[i]
		c.ToReserve[i] += o.ToReserve[i]
	}
	for m, n := range o.Minutes {
		c.Minutes[m] += n
	}
}

// QueueBucket is the index of the bucket of QueueBuckets that d falls in.
func QueueBucket(d time.Duration) int {
	s := d.Seconds()
	for i, le := range QueueBuckets {
		if s <= le {
			return i
		}
	}
	return len(QueueBuckets)
}

// QueueQuantile is the q-quantile (0 < q ≤ 1) of a histogram of
// QueueBuckets' counts, in seconds, interpolated within its bucket as
// Prometheus's histogram_quantile does; nil without counts. A quantile past
// the last bound is the last bound (a lower bound of the truth).
func QueueQuantile(counts []int64, q float64) *float64 {
	total := sum(counts)
	if total == 0 || len(counts) != len(QueueBuckets)+1 {
		return nil
	}
	rank := q * float64(total)
	var seen float64
	for i, n := range counts {
		if n == 0 || seen+float64(n) < rank {
			seen += float64(n)
			continue
		}
		if i == len(QueueBuckets) {
			v := QueueBuckets[i-1]
			return &v
		}
		low := 0.0
		if i > 0 {
			low = QueueBuckets[i-1]
		}
		v := low + (QueueBuckets[i]-low)*(rank-seen)/float64(n)
		v = math.Round(v*1000) / 1000
		return &v
	}
	v := QueueBuckets[len(QueueBuckets)-1]
	return &v
}

// MergeQueue adds the instances' counts of a sale together; a row that
// cannot be read is left out and returned in bad. Active counts only from
// rows younger than QueueActiveFresh.
func MergeQueue(reports []QueueReport) (merged QueueCounts, instances int, bad []error) {
	merged = NewQueueCounts()
	for _, r := range reports {
		c, err := DecodeQueueCounts(r.Counts)
		if err != nil {
			bad = append(bad, fmt.Errorf("instance %s: %w", r.Instance, err))
			continue
		}
		merged.Add(c, r.Age <= QueueActiveFresh)
		instances++
	}
	return merged, instances, bad
}
