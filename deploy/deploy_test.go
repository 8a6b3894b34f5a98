// Package deploy_test checks the Prometheus alert rules and the Grafana
// dashboard in this folder: every query parses as PromQL, every metric it
// names is one the service defines, and every alert's runbook entry exists.
package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	var r rules
	require.NoError(t, yaml.Unmarshal(raw, &r))
	require.NotEmpty(t, r.Groups)
	defined := definedMetrics(t)
	runbook, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	anchors := headingAnchors(string(runbook))
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			n++
			requireMetricsDefined(t, rule.Alert, rule.Expr, defined)
			require.Contains(t, []string{"critical", "warning"}, rule.Labels["severity"], rule.Alert)
			require.NotEmpty(t, rule.Annotations["summary"], rule.Alert)
			doc, anchor, ok := strings.Cut(rule.Annotations["runbook"], "#")
			require.True(t, ok && doc == "docs/operations.md", "%s: runbook %q", rule.Alert, rule.Annotations["runbook"])
			require.True(t, anchors[anchor], "%s: docs/operations.md has no heading #%s", rule.Alert, anchor)
		}
	}
	require.Positive(t, n)
	if promtool, err := exec.LookPath("promtool"); err == nil {
		out, err := exec.Command(promtool, "check", "rules", "prometheus/alerts.yml").CombinedOutput()
		require.NoError(t, err, "%s", out)
	} else {
		t.Log("promtool is not installed (Debian: prometheus); the rules were checked by the PromQL parser only")
	}
}

func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/flashline.json")
	require.NoError(t, err)
	var d struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	require.NotEmpty(t, d.Panels)
	defined := definedMetrics(t)
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			requireMetricsDefined(t, p.Title, tg.Expr, defined)
		}
	}
}

// requireMetricsDefined parses expr and requires every metric it selects to
// be defined by the service (or Prometheus's own up).
func requireMetricsDefined(t *testing.T, what, expr string, defined map[string]bool) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	require.NoError(t, err, "%s: %s", what, expr)
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && defined[base] {
					name = base
				}
			}
			require.True(t, name == "up" || defined[name], "%s: metric %s is not defined by the service", what, vs.Name)
		}
		return nil
	})
}

var metricName = regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(flashline_[a-z_]+)"`)

// definedMetrics are the metric names the service's Go code defines.
func definedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	defined := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricName.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, defined["flashline_http_requests_total"], "the scan found the service's metrics")
	return defined
}

// headingAnchors are the anchors of a Markdown file's headings, as GitHub
// makes them: lower case, spaces to dashes, punctuation dropped.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 \-_]`)
	for line := range strings.Lines(md) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#")))
			anchors[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
		}
	}
	return anchors
}

// TestImageIsSafeToDeploy keeps the image's default command production's:
// serve --demo accepts development secrets, derives the waiting-room keys
// and the payment secret from the JWT secret and prints secrets, so only
// docker-compose.yml (the laptop's demo) may ask for it, and it must ask
// explicitly rather than inherit it from the image.
func TestImageIsSafeToDeploy(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	var cmd []string
	for line := range strings.Lines(string(raw)) {
		instr, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.EqualFold(instr, "CMD") {
			// The exec form, a JSON array; the last CMD is the one that counts.
			cmd = nil
			require.NoError(t, json.Unmarshal([]byte(args), &cmd), "Dockerfile: CMD %s: want the exec form", args)
		}
	}
	require.NotEmpty(t, cmd, "Dockerfile has no CMD")
	for _, a := range cmd {
		require.False(t, strings.HasPrefix(a, "--demo"), "Dockerfile: CMD %q: the image must not run the demo; docker-compose.yml asks for it", cmd)
	}
	require.Equal(t, []string{"serve"}, cmd, "Dockerfile: the image's default command")

	raw, err = os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	require.Equal(t, []string{"serve", "--demo"}, compose.Services["flashline"].Command, "docker-compose.yml: the flashline service asks for the demo itself")
}
