// Package docs_test checks the repository's Markdown: every relative link in
// README.md and docs/*.md names a file or folder that exists, and every
// #anchor a heading of the page it points to, as GitHub makes anchors.
package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// readmeMaxLines keeps the README a front page: what Flashline is, the two
// commands, what to try, links. Everything else belongs in docs/.
const readmeMaxLines = 150

var (
	fence      = regexp.MustCompile("(?m)^ {0,3}(```|~~~)")
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRow = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
)

// pages are the Markdown files whose links are checked, relative to the
// repository's root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	return append([]string{"README.md"}, docs...)
}

// prose is a Markdown file without its fenced code blocks (a "# comment" in
// a shell block is no heading, a "](" in Go code no link), line by line.
func prose(md string) []string {
	var out []string
	in := false
	for line := range strings.Lines(md) {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return out
}

// anchors are the anchors of a Markdown file's headings as GitHub makes
// them: the heading's text lower-cased, everything but letters, digits,
// spaces, hyphens and underscores dropped, spaces turned into hyphens, and a
// repeated anchor numbered (-1, -2, ...).
func anchors(md string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(md) {
		m := headingRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := strings.ReplaceAll(m[1], "`", "")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestLinks: every relative link of README.md and docs/*.md points to a
// file or folder of the repository, and every anchor to a heading there.
func TestLinks(t *testing.T) {
	t.Chdir("..") // the repository's root: links in README.md are relative to it
	cache := map[string]map[string]bool{}
	headings := func(file string) map[string]bool {
		if a, ok := cache[file]; ok {
			return a
		}
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		cache[file] = anchors(string(b))
		return cache[file]
	}
	checked := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for n, line := range prose(string(b)) {
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, "``"), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					_, err := os.Stat(path)
					require.NoError(t, err, "%s, line %d: %q names nothing in the repository", page, n+1, target)
				}
				if anchor == "" {
					continue
				}
				require.True(t, strings.HasSuffix(path, ".md"), "%s, line %d: %q: an anchor into a file that is not Markdown", page, n+1, target)
				require.True(t, headings(path)[anchor], "%s, line %d: %q: %s has no heading #%s", page, n+1, target, path, anchor)
			}
		}
	}
	t.Logf("%d relative links checked", checked)
	require.Greater(t, checked, 50, "the links were found")
}

// TestREADMEIsAFrontPage: the README stays short enough to read in five
// minutes; what it leaves out is in docs/.
func TestREADMEIsAFrontPage(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	lines := strings.Count(string(b), "\n")
	require.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines: move the detail into docs/ and link to it", lines)
}

// TestAnchors: the anchors are GitHub's, so that a link checked here works
// there.
func TestAnchors(t *testing.T) {
	t.Parallel()
	a := anchors("# Flashline runbook\n## Against PostgreSQL's own per-request rates, and \"no\" against /healthz\n" +
		"### `make test` runs\n```sh\n# not a heading\n```\n## Faults\n## Faults\n")
	require.Equal(t, map[string]bool{
		"flashline-runbook": true,
		"against-postgresqls-own-per-request-rates-and-no-against-healthz": true,
		"make-test-runs": true,
		"faults":         true,
		"faults-1":       true,
	}, a)
}
