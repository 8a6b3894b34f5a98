package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Result is what a scenario measured.
type Result struct {
	Scenario  string
	SaleID    string
	Elapsed   time.Duration
	Requests  int
	Outcomes  map[string]int // "201", "409 sold_out", "503 overloaded", "error", ...
	Latencies []time.Duration
	Reserved  int // distinct reservations the clients were given
	Health    []time.Duration
	Batches   BatchStats // the targets' purchase-path batches during the run
	Notes     []string   // scenario-specific lines of the summary ("name\tvalue")
	Verified  string     // what the final check found
	// Timeline is the run over time, by when each answer arrived.
	Timeline []Bucket
	// Phases are earlier parts of the run, summarised before this one
	// (northline's race before its retry storm).
	Phases []*Result
}

// Throughput is the answers per second.
func (res *Result) Throughput() float64 { return float64(res.Requests) / res.Elapsed.Seconds() }

// Goodput is the successful reservations per second.
func (res *Result) Goodput() float64 { return float64(res.Reserved) / res.Elapsed.Seconds() }

// tally collects answers from many goroutines.
type tally struct {
	mu        sync.Mutex
	start     time.Time // the run's start: answers are placed in time from here
	outcomes  map[string]int
	latencies []time.Duration
	at        []time.Duration // when each answer arrived, after start; parallel to latencies
	// reservedAt is when each distinct reservation was first given, after start.
	reservedAt []time.Duration
	ids        map[string]int
}

func newTally() *tally {
	return &tally{start: time.Now(), outcomes: map[string]int{}, ids: map[string]int{}}
}

func (t *tally) add(a answer) {
	id := a.reservationID
	if id == "" && a.status == http.StatusCreated {
		// An answer the typed client did not decode (vegeta's).
		var created struct{ ReservationID string }
		_ = json.Unmarshal(a.body, &created)
		id = created.ReservationID
	}
	done := a.done
	if done.IsZero() {
		done = time.Now()
	}
	at := max(0, done.Sub(t.start))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outcomes[a.outcome()]++
	t.latencies = append(t.latencies, a.latency)
	t.at = append(t.at, at)
	if id != "" {
		if t.ids[id] == 0 {
			t.reservedAt = append(t.reservedAt, at)
		}
		t.ids[id]++ // replays name the same id: counted once
	}
}

func (t *tally) result(elapsed time.Duration) *Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &Result{
		Elapsed:   elapsed,
		Requests:  len(t.latencies), // each answer adds one latency and one outcome
		Outcomes:  t.outcomes,
		Latencies: t.latencies,
		Reserved:  len(t.ids),
		Timeline:  timeline(elapsed, t.at, t.latencies, t.reservedAt),
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// row is one line of the summary: a name and its value.
type row struct {
	Name, Value string
}

// summary is the summary's lines, for the text table and the HTML report.
func (res *Result) summary() []row {
	lat := slices.Clone(res.Latencies)
	slices.Sort(lat)
	rows := []row{
		{"scenario", res.Scenario},
		{"sale", res.SaleID},
		{"requests", fmt.Sprintf("%d in %v", res.Requests, res.Elapsed.Round(time.Millisecond))},
		{"throughput", fmt.Sprintf("%.0f requests/s", res.Throughput())},
		{"successful reservations", fmt.Sprintf("%d (%.0f/s)", res.Reserved, res.Goodput())},
	}
	if len(lat) > 0 { // the no scenario counts answers, it does not time them
		rows = append(rows, row{"latency p50 / p90 / p99 / max", fmt.Sprintf("%v / %v / %v / %v",
			percentile(lat, .5).Round(time.Microsecond), percentile(lat, .9).Round(time.Microsecond),
			percentile(lat, .99).Round(time.Microsecond), percentile(lat, 1).Round(time.Microsecond))})
	}
	if len(res.Health) > 0 {
		h := slices.Clone(res.Health)
		slices.Sort(h)
		rows = append(rows, row{"/healthz p50 / p99 / max", fmt.Sprintf("%v / %v / %v (%d probes)",
			percentile(h, .5).Round(time.Microsecond), percentile(h, .99).Round(time.Microsecond), percentile(h, 1).Round(time.Microsecond), len(h))})
	}
	for _, k := range slices.Sorted(maps.Keys(res.Outcomes)) {
		rows = append(rows, row{"  " + k, strconv.Itoa(res.Outcomes[k])})
	}
	for _, n := range res.Notes {
		name, value, _ := strings.Cut(n, "\t")
		rows = append(rows, row{name, value})
	}
	return append(rows,
		row{"reserve batches", res.Batches.String()},
		row{"verified", res.Verified})
}

func (res *Result) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range res.summary() {
		fmt.Fprintf(tw, "%s\t%s\t\n", r.Name, r.Value)
	}
	_ = tw.Flush()
}
