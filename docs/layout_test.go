package docs_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayoutListsEveryPackage: the table of docs/layout.md ("Every
// package") names every package `go list ./...` finds, and no other, with
// exactly the packages of the module each imports in its non-test files.
func TestLayoutListsEveryPackage(t *testing.T) {
	const module = "github.com/flashline/flashline"
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", exitStderr(err))
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	actual := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg, _ := rel(fields[0])
		imports := []string{}
		for _, imp := range fields[1:] {
			if r, ok := rel(imp); ok {
				imports = append(imports, r)
			}
		}
		slices.Sort(imports)
		actual[pkg] = imports
	}

	page, err := os.ReadFile("layout.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(page), "\n## Every package\n")
	require.True(t, ok, "docs/layout.md has no section \"Every package\"")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| [^|]+ \\| ([^|]+) \\|$")
	span := regexp.MustCompile("`([^`]+)`")
	listed := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		imports := []string{}
		for _, s := range span.FindAllStringSubmatch(m[2], -1) {
			imports = append(imports, s[1])
		}
		slices.Sort(imports)
		require.NotContains(t, listed, m[1], "docs/layout.md lists %s twice", m[1])
		listed[m[1]] = imports
	}

	for pkg, imports := range actual {
		got, ok := listed[pkg]
		if !ok {
			t.Errorf("docs/layout.md does not list the package %s (it imports %v)", pkg, imports)
			continue
		}
		if !slices.Equal(got, imports) {
			t.Errorf("docs/layout.md says %s imports %v of the module; it imports %v", pkg, got, imports)
		}
	}
	for pkg := range listed {
		if _, ok := actual[pkg]; !ok {
			t.Errorf("docs/layout.md lists %s, which go list does not find", pkg)
		}
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
