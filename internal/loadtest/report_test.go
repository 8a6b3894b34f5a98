package loadtest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// synthetic is a tally fed answers that arrived at fixed offsets from its start.
type synthetic struct {
	*tally
	n int
}

func newSynthetic() *synthetic { return &synthetic{tally: newTally()} }

// add records an answer that arrived at offset after the start, took
// latency, and had status (a 201 gives a new reservation unless replayOf
// names an earlier one).
func (s *synthetic) add(offset, latency time.Duration, status int, code, replayOf string) string {
	a := answer{status: status, code: code, latency: latency, done: s.start.Add(offset)}
	id := ""
	if status == http.StatusCreated {
		s.n++
		id = fmt.Sprintf("r%d", s.n)
		if replayOf != "" {
			id = replayOf
		}
		a.body = []byte(`{"reservationId":"` + id + `"}`)
	}
	s.tally.add(a)
	return id
}

func TestBucketWidth(t *testing.T) {
	t.Parallel()
	for span, want := range map[time.Duration]time.Duration{
		300 * time.Millisecond: 10 * time.Millisecond,
		5 * time.Second:        200 * time.Millisecond,
		20 * time.Second:       500 * time.Millisecond,
		30 * time.Second:       time.Second,
		10 * time.Minute:       time.Second,
	} {
		require.Equal(t, want, bucketWidth(span), "span %v", span)
	}
}

func TestTimeline(t *testing.T) {
	t.Parallel()

	t.Run("CountsAndPercentilesPerBucket", func(t *testing.T) {
		t.Parallel()
		s := newSynthetic()
		// Second 0: 100 answers of 1..100 ms, 60 of them new reservations.
		for i := range 100 {
			status, code := http.StatusCreated, ""
			if i >= 60 {
				status, code = http.StatusConflict, "sold_out"
			}
			s.add(time.Duration(i)*5*time.Millisecond, time.Duration(i+1)*time.Millisecond, status, code, "")
		}
		// Second 1: nothing. Second 2: a 201, its replay (not a new
		// reservation) and a 503.
		first := s.add(2100*time.Millisecond, 7*time.Millisecond, http.StatusCreated, "", "")
		s.add(2200*time.Millisecond, 9*time.Millisecond, http.StatusCreated, "", first)
		s.add(2300*time.Millisecond, 3*time.Millisecond, http.StatusServiceUnavailable, "overloaded", "")
		// Second 29, and a straggler in the last 0.1 s: folded into second 29.
		s.add(29500*time.Millisecond, 4*time.Millisecond, http.StatusCreated, "", "")
		s.add(30050*time.Millisecond, 6*time.Millisecond, http.StatusCreated, "", "")

		res := s.result(30100 * time.Millisecond)
		require.Equal(t, 105, res.Requests)
		require.Equal(t, 63, res.Reserved)
		tl := res.Timeline
		require.Len(t, tl, 30)
		for i, b := range tl {
			require.Equal(t, time.Duration(i)*time.Second, b.Start)
		}
		require.Equal(t, time.Second, tl[0].Width)
		require.Equal(t, 1100*time.Millisecond, tl[29].Width, "the last 0.1 s is folded into the last second")

		require.Equal(t, Bucket{Start: 0, Width: time.Second, Requests: 100, Reserved: 60, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond}, tl[0])
		require.Equal(t, Bucket{Start: time.Second, Width: time.Second}, tl[1])
		require.Equal(t, Bucket{Start: 2 * time.Second, Width: time.Second, Requests: 3, Reserved: 1, P50: 7 * time.Millisecond, P99: 7 * time.Millisecond}, tl[2])
		require.Equal(t, 2, tl[29].Requests)
		require.Equal(t, 2, tl[29].Reserved)
		require.InDelta(t, 100.0, tl[0].RequestRate(), 1e-9)
		require.InDelta(t, 60.0, tl[0].ReservedRate(), 1e-9)
		require.InDelta(t, 2/1.1, tl[29].RequestRate(), 1e-9)

		sumReq, sumRes := 0, 0
		for _, b := range tl {
			sumReq, sumRes = sumReq+b.Requests, sumRes+b.Reserved
		}
		require.Equal(t, res.Requests, sumReq)
		require.Equal(t, res.Reserved, sumRes)
	})

	t.Run("ShortRunHasFinerBuckets", func(t *testing.T) {
		t.Parallel()
		s := newSynthetic()
		for i := range 50 {
			s.add(time.Duration(i)*6*time.Millisecond, time.Millisecond, http.StatusCreated, "", "")
		}
		res := s.result(300 * time.Millisecond)
		require.Len(t, res.Timeline, 30)
		for _, b := range res.Timeline {
			require.Equal(t, 10*time.Millisecond, b.Width)
			require.InDelta(t, 1+2.0/3, float64(b.Requests), 1, "50 answers over 30 buckets")
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, newTally().result(0).Timeline)
	})

	t.Run("ConcurrentAdds", func(t *testing.T) {
		t.Parallel()
		tl := newTally()
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				for i := range 200 {
					a := answer{status: http.StatusConflict, code: "sold_out", latency: time.Millisecond, done: time.Now()}
					if i%4 == 0 {
						a = answer{status: http.StatusCreated, latency: 2 * time.Millisecond, done: time.Now(),
							body: fmt.Appendf(nil, `{"reservationId":"r-%d-%d"}`, g, i)}
					}
					tl.add(a)
				}
			})
		}
		wg.Wait()
		res := tl.result(time.Since(tl.start))
		sumReq, sumRes := 0, 0
		for _, b := range res.Timeline {
			sumReq, sumRes = sumReq+b.Requests, sumRes+b.Reserved
		}
		require.Equal(t, 32*200, sumReq)
		require.Equal(t, 32*50, sumRes)
		require.Equal(t, res.Reserved, sumRes)
	})
}

// sample is a finished run with hostile strings where the server or a
// scenario could put them.
func sample(t *testing.T) *Result {
	t.Helper()
	s := newSynthetic()
	for i := range 400 {
		status, code := http.StatusCreated, ""
		if i%3 == 0 {
			status, code = http.StatusConflict, "<script>alert(1)</script>"
		}
		s.add(time.Duration(i)*12*time.Millisecond, time.Duration(1+i%20)*time.Millisecond, status, code, "")
	}
	res := s.result(5 * time.Second)
	res.Scenario = "hot"
	res.SaleID = "sale_0123"
	res.Notes = []string{"crowd\t3 customers <b>bold</b>", "  status \"waiting\"\t4 & more"}
	res.Batches = BatchStats{Count: 2, Sum: 3, Buckets: map[string]float64{"1": 1, "2": 2, "+Inf": 2}}
	res.Verified = "ok: 266 reserved <img src=x onerror=alert(1)>"
	return res
}

func render(t *testing.T, res *Result) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, res.WriteReport(&b))
	return b.String()
}

// svgs checks that every <svg> in page is well-formed XML and returns them.
func svgs(t *testing.T, page string) []string {
	t.Helper()
	var out []string
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		require.Positive(t, j, "an <svg> is closed")
		svg := rest[i : i+j+len("</svg>")]
		requireWellFormed(t, svg)
		require.Contains(t, svg, "<path class=\"line")
		out = append(out, svg)
		rest = rest[i+j:]
	}
}

func TestWriteReport(t *testing.T) {
	t.Parallel()

	t.Run("SummaryAndTwoCharts", func(t *testing.T) {
		t.Parallel()
		res := sample(t)
		page := render(t, res)
		require.True(t, strings.HasPrefix(page, "<!doctype html>"))
		require.True(t, strings.HasSuffix(page, "</html>\n"))
		for _, tag := range []string{"html", "head", "body", "table", "section", "style", "title"} {
			require.Equal(t, strings.Count(page, "<"+tag), strings.Count(page, "</"+tag+">"), "<%s> balanced", tag)
		}
		require.Len(t, svgs(t, page), 2)
		require.Contains(t, page, "Throughput, per second")
		require.Contains(t, page, "Latency, ms")
		require.Contains(t, page, "successful reservations/s")
		require.Contains(t, page, ">p99<")
		// Self-contained: nothing fetched, nothing run.
		require.NotContains(t, page, "http")
		require.NotContains(t, page, "<script")

		// The same facts as the text summary, row by row.
		var text bytes.Buffer
		res.print(&text)
		for _, r := range res.summary() {
			require.Contains(t, page, "<td>"+template.HTMLEscapeString(strings.TrimSpace(r.Name))+"</td>")
			require.Contains(t, page, "<td>"+template.HTMLEscapeString(r.Value)+"</td>")
			require.Contains(t, text.String(), r.Value)
		}
		for _, fact := range []string{"sale_0123", "400 in 5s", "80 requests/s", "266 (53/s)", "10ms / 18ms / 20ms / 20ms", "mean 1.5 over 2 batches"} {
			require.Contains(t, page, fact)
		}
	})

	t.Run("HostileStringsEscaped", func(t *testing.T) {
		t.Parallel()
		page := render(t, sample(t))
		require.NotContains(t, page, "<script>")
		require.NotContains(t, page, "<b>")
		require.NotContains(t, page, "<img")
		require.Contains(t, page, "409 &lt;script&gt;alert(1)&lt;/script&gt;")
		require.Contains(t, page, "3 customers &lt;b&gt;bold&lt;/b&gt;")
		require.Contains(t, page, "status &#34;waiting&#34;")
		require.Contains(t, page, "&lt;img src=x onerror=alert(1)&gt;")
	})

	t.Run("PhasesFirst", func(t *testing.T) {
		t.Parallel()
		race, storm := sample(t), sample(t)
		race.Scenario, storm.Scenario = "northline race", "northline"
		storm.Phases = []*Result{race}
		page := render(t, storm)
		require.Len(t, svgs(t, page), 4)
		require.Less(t, strings.Index(page, "<h2>northline race</h2>"), strings.Index(page, "<h2>northline</h2>"))
	})

	t.Run("FailedVerificationStandsOut", func(t *testing.T) {
		t.Parallel()
		res := sample(t)
		res.Verified = "OVERSOLD: 201 held of 200"
		require.Contains(t, render(t, res), `<tr class="bad"><td>verified</td><td>OVERSOLD: 201 held of 200</td></tr>`)
	})

	t.Run("NoRequests", func(t *testing.T) {
		t.Parallel()
		res := newTally().result(time.Second)
		res.Scenario = "hot"
		page := render(t, res)
		require.Equal(t, 2, strings.Count(page, "<svg"))
		require.NotContains(t, page, "NaN")
	})

	t.Run("GapsInLatency", func(t *testing.T) {
		t.Parallel()
		s := newSynthetic()
		s.add(100*time.Millisecond, time.Millisecond, http.StatusCreated, "", "")
		s.add(5500*time.Millisecond, time.Millisecond, http.StatusCreated, "", "")
		s.add(29500*time.Millisecond, time.Millisecond, http.StatusCreated, "", "")
		res := s.result(30 * time.Second)
		page := render(t, res)
		require.NotContains(t, page, "NaN")
		charts := svgs(t, page)
		// The latency lines are three short dashes, one at each answer.
		require.Equal(t, 2*3, strings.Count(charts[1], "m-2 0 h4"))
		require.Equal(t, 2*3, strings.Count(charts[1], "M"))
	})
}

// requireWellFormed fails unless doc is well-formed XML.
func requireWellFormed(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		require.NoError(t, err, "well-formed XML:\n%s", doc)
	}
}
