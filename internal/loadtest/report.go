package loadtest

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// WriteReport writes the run as one self-contained HTML page: for each part
// of the run (Phases, then res itself) the summary table and two charts over
// time, throughput and latency, drawn as inline SVG. No script, no external
// resource; every string goes through html/template.
func (res *Result) WriteReport(w io.Writer) error {
	page := reportPage{Title: "flashline loadtest: " + res.Scenario}
	for _, r := range append(res.Phases[:len(res.Phases):len(res.Phases)], res) {
		page.Sections = append(page.Sections, r.reportSection())
	}
	if err := reportTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("loadtest: write report: %w", err)
	}
	return nil
}

type reportPage struct {
	Title    string
	Sections []reportSection
}

type reportSection struct {
	Scenario string
	Rows     []reportRow
	Charts   []chart
}

type reportRow struct {
	Name, Value string
	Indent      bool // an outcome or a detail under the line above
	Bad         bool // a failed verification
}

func (res *Result) reportSection() reportSection {
	s := reportSection{Scenario: res.Scenario}
	for _, r := range res.summary() {
		name := strings.TrimLeft(r.Name, " ")
		s.Rows = append(s.Rows, reportRow{
			Name:   name,
			Value:  r.Value,
			Indent: name != r.Name,
			Bad:    r.Name == "verified" && !strings.HasPrefix(r.Value, "ok"),
		})
	}
	span := time.Second
	if n := len(res.Timeline); n > 0 {
		span = res.Timeline[n-1].Start + res.Timeline[n-1].Width
	}
	requests, reserved := make([]point, len(res.Timeline)), make([]point, len(res.Timeline))
	var p50, p99 []point
	for i, b := range res.Timeline {
		x := (b.Start + b.Width/2).Seconds()
		requests[i] = point{x, b.RequestRate()}
		reserved[i] = point{x, b.ReservedRate()}
		if b.Requests == 0 {
			// No answer, no latency: a gap in the line, not a zero.
			p50, p99 = append(p50, point{x, math.NaN()}), append(p99, point{x, math.NaN()})
			continue
		}
		p50 = append(p50, point{x, ms(b.P50)})
		p99 = append(p99, point{x, ms(b.P99)})
	}
	s.Charts = []chart{
		newChart("Throughput, per second", timeAxis(span.Seconds()), []series{
			{Name: "requests/s", Color: "#2563eb", Points: requests},
			{Name: "successful reservations/s", Color: "#16a34a", Dash: true, Points: reserved}, // dashed: often on top of requests/s
		}),
		newChart("Latency, ms", timeAxis(span.Seconds()), []series{
			{Name: "p50", Color: "#2563eb", Points: p50},
			{Name: "p99", Color: "#dc2626", Points: p99},
		}),
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type point struct{ X, Y float64 } // Y NaN: no value

type series struct {
	Name, Color string
	Dash        bool
	Points      []point
	Path        string  // the SVG path, in the chart's coordinates
	LegendX     float64 // where its legend entry starts
}

type tick struct {
	Pos   float64
	Label string
}

// chart is a line chart laid out for the template: the plot area is
// [Left, Right] × [Top, Bottom] in a W × H view box that scales to the page.
type chart struct {
	Title                    string
	W, H                     float64
	Left, Right, Top, Bottom float64
	MidX                     float64 // the middle of the x axis
	Y                        float64 // where it sits in an enclosing SVG
	XLabel                   string
	XTicks, YTicks           []tick
	Series                   []series
}

// axis is a chart's x axis: from 0 to Max, ticks labelled with Unit.
type axis struct {
	Max         float64
	Unit, Label string
}

func timeAxis(seconds float64) axis {
	return axis{Max: seconds, Unit: "s", Label: "time since start"}
}

func newChart(title string, xa axis, ss []series) chart {
	// A 420-wide view box: on a phone, 13-unit text comes out about 11px.
	c := chart{Title: title, W: 420, H: 262, Left: 46, Right: 408, Top: 34, Bottom: 226, XLabel: xa.Label}
	xMax := xa.Max
	c.MidX = (c.Left + c.Right) / 2
	yMax := 0.0
	for _, s := range ss {
		for _, p := range s.Points {
			if !math.IsNaN(p.Y) {
				yMax = max(yMax, p.Y)
			}
		}
	}
	yStep := niceStep(yMax / 4)
	yMax = math.Max(yStep, math.Ceil(yMax/yStep)*yStep)
	xStep := niceStep(xMax / 6)
	x := func(v float64) float64 { return c.Left + v/xMax*(c.Right-c.Left) }
	y := func(v float64) float64 { return c.Bottom - v/yMax*(c.Bottom-c.Top) }
	for v := 0.0; v <= yMax*(1+1e-9); v += yStep {
		c.YTicks = append(c.YTicks, tick{y(v), number(v)})
	}
	for v := 0.0; v <= xMax*(1+1e-9); v += xStep {
		c.XTicks = append(c.XTicks, tick{x(v), number(v) + xa.Unit})
	}
	legendX := c.Left
	for _, s := range ss {
		var d strings.Builder
		run := 0 // points in the current stretch of the line
		for _, p := range s.Points {
			if math.IsNaN(p.Y) {
				if run == 1 {
					d.WriteString(" m-2 0 h4") // a lone point: a short dash
				}
				run = 0
				continue
			}
			cmd := " L"
			if run == 0 {
				cmd = " M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f", cmd, x(p.X), y(p.Y))
			run++
		}
		if run == 1 {
			d.WriteString(" m-2 0 h4")
		}
		s.Path = strings.TrimSpace(d.String())
		s.LegendX = legendX
		legendX += 46 + 7.2*float64(len(s.Name))
		c.Series = append(c.Series, s)
	}
	return c
}

// niceStep is the smallest 1, 2, 2.5 or 5 times a power of ten at least
// raw (1 for raw <= 0).
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// number is a tick label: 0.25, 40, 2500, 12k, 1.5M.
func number(v float64) string {
	suffix := ""
	switch {
	case v >= 1e6:
		v, suffix = v/1e6, "M"
	case v >= 1e4:
		v, suffix = v/1e3, "k"
	}
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64) + suffix
}

// chartStyle is the charts' CSS, in the report page and in a standalone SVG.
const chartStyle = `svg text { font: 13px system-ui, sans-serif; fill: #333; }
.grid { stroke: #e5e5e5; }
.axis { stroke: #888; }
.line { fill: none; stroke-width: 2; stroke-linejoin: round; stroke-linecap: round; }
.dash { stroke-dasharray: 6 5; }
`

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"f":   func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"add": func(a, b float64) float64 { return a + b },
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 15px/1.4 system-ui, sans-serif; color: #111; margin: 0 auto; padding: 12px; max-width: 860px; }
h1 { font-size: 1.3em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin: 1.2em 0 .3em; }
table { border-collapse: collapse; width: 100%; }
td { padding: .2em .5em; vertical-align: top; border-bottom: 1px solid #eee; overflow-wrap: anywhere; }
td:first-child { width: 35%; color: #444; }
tr.indent td:first-child { padding-left: 1.8em; }
tr.bad td { color: #b91c1c; font-weight: bold; }
svg { display: block; width: 100%; max-width: 600px; height: auto; }
` + chartStyle + `</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{range .Sections}}<section>
<h2>{{.Scenario}}</h2>
<table>
{{range .Rows}}<tr{{if .Indent}} class="indent"{{end}}{{if .Bad}} class="bad"{{end}}><td>{{.Name}}</td><td>{{.Value}}</td></tr>
{{end}}</table>
{{range .Charts}}<h3>{{.Title}}</h3>
{{template "chart" .}}
{{end}}</section>
{{end}}</body>
</html>
{{define "chart"}}{{$c := .}}<svg viewBox="0 0 {{f .W}} {{f .H}}" width="{{f .W}}" height="{{f .H}}" y="{{f .Y}}" role="img" aria-label="{{.Title}}">
<title>{{.Title}}</title>
{{range .YTicks}}<line class="grid" x1="{{f $c.Left}}" x2="{{f $c.Right}}" y1="{{f .Pos}}" y2="{{f .Pos}}"/>
<text x="{{f (add $c.Left -6)}}" y="{{f (add .Pos 4)}}" text-anchor="end">{{.Label}}</text>
{{end}}{{range .XTicks}}<line class="axis" x1="{{f .Pos}}" x2="{{f .Pos}}" y1="{{f $c.Bottom}}" y2="{{f (add $c.Bottom 5)}}"/>
<text x="{{f .Pos}}" y="{{f (add $c.Bottom 20)}}" text-anchor="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{f .Left}}" x2="{{f .Right}}" y1="{{f .Bottom}}" y2="{{f .Bottom}}"/>
<line class="axis" x1="{{f .Left}}" x2="{{f .Left}}" y1="{{f .Top}}" y2="{{f .Bottom}}"/>
<text x="{{f .MidX}}" y="{{f (add .H -4)}}" text-anchor="middle">{{.XLabel}}</text>
{{range .Series}}{{if .Path}}<path class="line{{if .Dash}} dash{{end}}" stroke="{{.Color}}" d="{{.Path}}"/>
{{end}}<line class="line{{if .Dash}} dash{{end}}" stroke="{{.Color}}" x1="{{f .LegendX}}" x2="{{f (add .LegendX 22)}}" y1="14" y2="14"/>
<text x="{{f (add .LegendX 28)}}" y="18">{{.Name}}</text>
{{end}}</svg>{{end}}`))
