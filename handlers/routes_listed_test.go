package handlers_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// routeCall is a route registered on a gin engine or group (r.GET(...),
// public.handle(http.MethodPost, ...)).
var routeCall = regexp.MustCompile(`\.(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS|Any)\(|\.handle\(http\.Method`)

// notListings are the files outside handlers/routes*.go allowed to call
// routeCall, and why.
var notListings = map[string]string{
	"handlers/cors.go": "the mechanism routes_*.go register cross-origin routes and their preflights with",
}

// TestEveryRouteInARoutesFile: every route of the module is registered in
// one of handlers/routes*.go, so that a newcomer finds a route by who calls
// it (routes_shop.go, routes_admin.go, routes_providers.go, routes_edge.go)
// and nowhere else.
func TestEveryRouteInARoutesFile(t *testing.T) {
	t.Parallel()
	var outside []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator)))
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		if _, ok := notListings[rel]; ok || (strings.HasPrefix(rel, "handlers/routes") && !strings.Contains(strings.TrimPrefix(rel, "handlers/"), "/")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if routeCall.MatchString(line) {
				outside = append(outside, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, outside, "routes registered outside handlers/routes*.go")
}
