package loadtest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// batchSizeMetric is the histogram of reservations per purchase-path
// transaction.
const batchSizeMetric = "flashline_reserve_batch_size"

// BatchStats sums the targets' flashline_reserve_batch_size histograms.
type BatchStats struct {
	Count, Sum float64
	Buckets    map[string]float64 // cumulative count by upper bound ("le")
}

func (b BatchStats) minus(o BatchStats) BatchStats {
	d := BatchStats{Count: b.Count - o.Count, Sum: b.Sum - o.Sum, Buckets: map[string]float64{}}
	for le, n := range b.Buckets {
		d.Buckets[le] = n - o.Buckets[le]
	}
	return d
}

// String is the mean batch size and the histogram, e.g.
// "mean 41.3 over 120 batches; <=1: 3, <=2: 0, ...".
func (b BatchStats) String() string {
	if b.Count == 0 {
		return "none seen (the targets' /metrics has no flashline_reserve_batch_size)"
	}
	les := slices.SortedFunc(maps.Keys(b.Buckets), func(x, y string) int {
		fx, _ := strconv.ParseFloat(x, 64)
		fy, _ := strconv.ParseFloat(y, 64)
		return cmp.Compare(fx, fy)
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "mean %.1f over %.0f batches;", b.Sum/b.Count, b.Count)
	prev := 0.0
	for _, le := range les {
		if le == "+Inf" {
			continue
		}
		fmt.Fprintf(&sb, " <=%s: %.0f", le, b.Buckets[le]-prev)
		prev = b.Buckets[le]
	}
	return sb.String()
}

// batchStats reads the batch-size histogram from every target's /metrics (the
// admin's); a target that does not answer counts as zero.
func (r *runner) batchStats(ctx context.Context) BatchStats {
	st := BatchStats{Buckets: map[string]float64{}}
	apis := r.gen
	if r.cfg.Admin != "" {
		apis = append(apis[:len(apis):len(apis)], r.admin)
	}
	for _, api := range apis {
		resp, err := api.MetricsWithResponse(ctx, bearer(r.cfg.AdminToken))
		if err != nil || resp.StatusCode() != http.StatusOK {
			continue
		}
		_ = st.add(resp.Body)
	}
	return st
}

// add adds the batch-size histogram of one /metrics page (Prometheus's text
// format) to b, whose Buckets must not be nil. A page that does not parse
// adds nothing.
func (b *BatchStats) add(page []byte) error {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return err
	}
	for _, m := range families[batchSizeMetric].GetMetric() {
		h := m.GetHistogram()
		b.Count += float64(h.GetSampleCount()) + h.GetSampleCountFloat()
		b.Sum += h.GetSampleSum()
		for _, bucket := range h.GetBucket() {
			le := strconv.FormatFloat(bucket.GetUpperBound(), 'g', -1, 64) // as written: "1", "64", "+Inf"
			b.Buckets[le] += float64(bucket.GetCumulativeCount()) + bucket.GetCumulativeCountFloat()
		}
	}
	return nil
}
