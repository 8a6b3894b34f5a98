package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxLines is the most lines a hand-written Go file of the module holds: a
// file past it holds more than one thing, and is split into files named for
// what each holds (as salecache/wrap.go and watch.go were split out of
// salecache.go).
const maxLines = 500

// generated is the line Go's tools look for in a generated file
// (sqlc's internal/dbsqlc, oapi-codegen's internal/apiclient) before its
// package clause.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestNoLongFiles fails when a hand-written non-test Go file of the module
// (any build tags; generated files and tests are not held to it) has more
// than maxLines lines, naming the file.
func TestNoLongFiles(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-f", `{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .CgoFiles}} {{.}}{{end}}{{range .IgnoredGoFiles}} {{.}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", exitStderr(err))
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		for _, name := range fields[1:] {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			path := filepath.Join(fields[0], name)
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			if head, _, _ := bytes.Cut(src, []byte("\npackage ")); generated.Match(head) {
				continue
			}
			checked++
			rel, err := filepath.Rel(root, path)
			require.NoError(t, err)
			rel = filepath.ToSlash(rel)
			n := bytes.Count(src, []byte("\n"))
			if len(src) > 0 && src[len(src)-1] != '\n' {
				n++
			}
			if n > maxLines {
				t.Errorf("%s has %d lines, more than %d: split it into files named for what each holds", rel, n, maxLines)
			}
		}
	}
	require.NotZero(t, checked, "go list named no hand-written file")
}
