package docs_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// noDocGo are the packages of layout.md's table whose doc.go is not held to
// their line, and why.
var noDocGo = map[string]string{
	"deploy":                    "a test only: no package to document",
	"docs":                      "a test only: no package to document",
	"internal/testkit/rehearse": "a test only: no package to document",
	"internal/dbsqlc":           "sqlc's: every file in it is generated",
}

// TestDocGoSaysTheLayoutLine: the doc.go of every package in
// docs/layout.md's table ("Every package") opens its package comment with
// the table's line on what the package holds, "Package <name> holds
// <line>." ("Command <name> holds <line>." for a command), so that go doc
// and the map say the same. It reads the table as TestLayoutListsEveryPackage
// does, which holds the table to go list.
func TestDocGoSaysTheLayoutLine(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("layout.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(page), "\n## Every package\n")
	require.True(t, ok, "docs/layout.md has no section \"Every package\"")

	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Name}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", exitStderr(err))
	const module = "github.com/flashline/flashline"
	names := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, name, _ := strings.Cut(strings.TrimSpace(line), " ")
		rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
		if rel == "" {
			rel = "."
		}
		names[rel] = name
	}

	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([^|]+) \\| [^|]+ \\|$")
	checked := 0
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		pkg, holds := m[1], strings.TrimSpace(m[2])
		if _, ok := noDocGo[pkg]; ok {
			continue
		}
		name, ok := names[pkg]
		if !ok {
			continue // TestLayoutListsEveryPackage names it
		}
		want := "Package " + name + " holds " + holds + "."
		if name == "main" {
			want = "Command " + filepath.Base(pkg) + " holds " + holds + "."
		}
		path := filepath.Join("..", pkg, "doc.go")
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s/doc.go: %v (it opens its package comment with %q)", pkg, err, want)
			continue
		}
		checked++
		got := ""
		if f.Doc != nil {
			got = strings.Join(strings.Fields(f.Doc.Text()), " ")
		}
		if !strings.HasPrefix(got, want) {
			first, _, _ := strings.Cut(got, ". ")
			t.Errorf("%s/doc.go opens its package comment with %q; docs/layout.md's line makes it %q", pkg, first, want)
		}
	}
	require.NotZero(t, checked, "no doc.go checked")
}
