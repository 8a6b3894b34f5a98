package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
)

// The console's view of the fleet. Each instance counts its own reservation
// answers in its metrics (reservationOutcomes); RunPublisher writes what
// changed in the last second to a small shared table (one row per instance,
// postgres.Store.PublishAnswers: one statement a second at most, none while
// nothing changes but the one that says so), and a sale's live snapshot
// reads every row in its one transaction (flashline.SaleWatch.Fleet). The
// live page then sums them, as the pacer sums what each instance reported:
// the fleet's rates, whichever instance served the page, with a breakdown
// per instance. Nothing is written per request, nor read per viewer (the
// snapshot is shared, live.go).

// AnswerPublisher writes an instance's reservation answers of its last
// seconds (*postgres.Store).
type AnswerPublisher interface {
	PublishAnswers(ctx context.Context, instance string, seconds float64, counts []byte) error
}

// InstanceName names this process in the console's fleet: its host and
// process id, as River's client id does (several instances may share a
// host).
func InstanceName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown-host"
	}
	if len(host) > 100 {
		host = host[:100]
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

// RunPublisher writes this instance's reservation answers (gathered from
// reg) every LiveInterval while they change, until ctx is done. A failed
// write is logged and the next tick writes the next second's.
func RunPublisher(ctx context.Context, store AnswerPublisher, reg prometheus.Gatherer, instance string, logger *slog.Logger) error {
	ticker := time.NewTicker(LiveInterval)
	defer ticker.Stop()
	prev, prevAt := gatherOutcomes(reg), time.Now()
	wroteAnswers := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		now, at := gatherOutcomes(reg), time.Now()
		delta := outcomeDelta(prev, now)
		seconds := at.Sub(prevAt).Seconds()
		prev, prevAt = now, at
		if len(delta) == 0 && !wroteAnswers {
			continue // idle, and said so already
		}
		body, err := json.Marshal(delta)
		if err == nil {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = store.PublishAnswers(wctx, instance, seconds, body)
			cancel()
		}
		if err != nil {
			logger.WarnContext(ctx, "console: publish this instance's answers", "err", err)
			continue
		}
		wroteAnswers = len(delta) > 0
	}
}

// outcomeDelta is what grew between two readings of reservationOutcomes
// (only what grew: an idle reading is empty).
func outcomeDelta(prev, now map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, n := range now {
		if n > prev[k] {
			d[k] = n - prev[k]
		}
	}
	return d
}

// instanceAnswers is one instance's answers over its last seconds.
type instanceAnswers struct {
	name    string
	this    bool
	seconds float64
	delta   map[string]float64
}

// fleetRates sums the instances' answers: answers per second add up; the
// mean batch and the p99 are those of every instance's batches and
// latencies together.
func fleetRates(all []instanceAnswers) (api.LiveRates, []api.InstanceRates) {
	fleet := api.LiveRates{Refused: map[string]float64{}}
	merged := map[string]float64{}
	per := make([]api.InstanceRates, 0, len(all))
	for _, a := range all {
		r := liveRates(map[string]float64{}, a.delta, a.seconds)
		fleet.Reserved += r.Reserved
		for k, n := range r.Refused {
			fleet.Refused[k] += n
		}
		for k, n := range a.delta {
			merged[k] += n
		}
		per = append(per, api.InstanceRates{Instance: a.name, This: a.this, Reserved: r.Reserved, Refused: r.Refused, BatchSize: r.BatchSize, P99Ms: r.P99Ms})
	}
	together := liveRates(map[string]float64{}, merged, 1)
	fleet.BatchSize, fleet.P99Ms = together.BatchSize, together.P99Ms
	return fleet, per
}

// otherInstances decodes the other instances' reports; one that cannot be
// read is left out (and said so in the log).
func otherInstances(self string, reports []flashline.InstanceReport, logger *slog.Logger) []instanceAnswers {
	var out []instanceAnswers
	for _, r := range reports {
		// A report covers about a second (RunPublisher); a row that says
		// otherwise, or whose counts are not finite and non-negative (a
		// hand-edited row: NaN passes the table's CHECK), would make the
		// fleet's rates NaN and every instance's live page unencodable.
		if r.Instance == self || !(r.Seconds >= 0.1 && r.Seconds <= 60) {
			continue
		}
		var delta map[string]float64
		err := json.Unmarshal(r.Counts, &delta)
		for k, n := range delta {
			if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 || n > 1e12 || !finiteKey(k) {
				err = fmt.Errorf("count %q is %v", k, n)
				break
			}
		}
		if err != nil {
			if logger != nil {
				logger.Warn("console: an instance's answers unreadable", "instance", r.Instance, "err", err)
			}
			continue
		}
		out = append(out, instanceAnswers{name: r.Instance, seconds: r.Seconds, delta: delta})
	}
	return out
}

// finiteKey reports whether a count's key, when it is a latency bucket's,
// has a bound the p99 can be: a number or +Inf (ParseFloat also reads
// "NaN" and "-Inf").
func finiteKey(k string) bool {
	if !strings.HasPrefix(k, keyLatencyPrefix) {
		return true
	}
	le, err := strconv.ParseFloat(strings.TrimPrefix(k, keyLatencyPrefix), 64)
	return err != nil || !math.IsNaN(le) && !math.IsInf(le, -1)
}
