package loadtest

import (
	"bufio"
	"cmp"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CurvePoint is one open-loop run of the overload scenario at one offered
// rate, with the admission limiter on or off (scripts/overload-curve.sh).
type CurvePoint struct {
	Limiter  string // "on" or "off"
	Offered  float64
	Sent     float64 // requests/s the load generator managed to send
	Reserved float64 // successful reservations/s
	P99      time.Duration
}

// ReadCurve reads the points scripts/overload-curve.sh records, one per
// line: limiter, offered/s, sent/s, reserved/s, p99 (a Go duration),
// separated by tabs.
func ReadCurve(r io.Reader) ([]CurvePoint, error) {
	var points []CurvePoint
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 5 {
			return nil, fmt.Errorf("loadtest: curve line %d: want 5 tab-separated fields, got %d", n, len(f))
		}
		p := CurvePoint{Limiter: f[0]}
		var errs [4]error
		p.Offered, errs[0] = strconv.ParseFloat(f[1], 64)
		p.Sent, errs[1] = strconv.ParseFloat(f[2], 64)
		p.Reserved, errs[2] = strconv.ParseFloat(f[3], 64)
		p.P99, errs[3] = time.ParseDuration(f[4])
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("loadtest: curve line %d: %w", n, err)
			}
		}
		points = append(points, p)
	}
	return points, sc.Err()
}

// WriteCurveSVG draws the overload curve as one self-contained SVG image (for
// the README): reserved/s and p99 latency against the offered rate, limiter on
// and off.
func WriteCurveSVG(w io.Writer, points []CurvePoint) error {
	byMode := map[string][]point{}
	latency := map[string][]point{}
	xMax := 0.0
	for _, p := range slices.SortedFunc(slices.Values(points), func(a, b CurvePoint) int { return cmp.Compare(a.Offered, b.Offered) }) {
		byMode[p.Limiter] = append(byMode[p.Limiter], point{p.Offered, p.Reserved})
		latency[p.Limiter] = append(latency[p.Limiter], point{p.Offered, ms(p.P99)})
		xMax = max(xMax, p.Offered)
	}
	x := axis{Max: xMax, Label: "offered reservations/s"}
	modes := []struct{ key, name, color string }{{"on", "limiter on", "#2563eb"}, {"off", "limiter off", "#dc2626"}}
	var goodput, p99 []series
	for _, m := range modes {
		goodput = append(goodput, series{Name: m.name, Color: m.color, Dash: m.key == "off", Points: byMode[m.key]})
		p99 = append(p99, series{Name: m.name, Color: m.color, Dash: m.key == "off", Points: latency[m.key]})
	}
	// Stacked, each under a line of its own for its title.
	const titleH = 24
	page := struct {
		Title  string
		W, H   float64
		Charts []chart
	}{Title: "flashline: goodput under overload, limiter on and off"}
	for _, c := range []chart{
		newChart("Reserved per second", x, goodput),
		newChart("p99 latency of reservations, ms", x, p99),
	} {
		c.Y = page.H + titleH
		page.W, page.H = c.W, c.Y+c.H
		page.Charts = append(page.Charts, c)
	}
	if err := curveTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("loadtest: write curve: %w", err)
	}
	return nil
}

var curveTemplate = template.Must(template.Must(reportTemplate.Clone()).New("curve").Parse(
	`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{f .W}} {{f .H}}" width="{{f .W}}" height="{{f .H}}">
<style>
` + chartStyle + `</style>
<title>{{.Title}}</title>
<rect width="100%" height="100%" fill="#fff"/>
{{range .Charts}}<text x="{{f .Left}}" y="{{f (add .Y -6)}}" style="font-weight: bold">{{.Title}}</text>
{{template "chart" .}}
{{end}}</svg>
`))
