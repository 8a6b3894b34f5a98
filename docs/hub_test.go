package docs_test

import (
	"cmp"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mayImport is the hub rule: each adapter, and the packages allowed to
// import it in their non-test files (a name, or a prefix ending in "/").
// Every other package depends on the root's interfaces (store.go,
// gatestore.go, roomstore.go, jobstore.go, facts.go) or on small ones of its
// own, and cmd/ passes the adapter in. Tests are not held to it: a test may
// import an adapter to set up a real database, a Redis or a cache.
var mayImport = map[string][]string{
	// The PostgreSQL adapter: only the binaries wire it. No test harness
	// under internal/ needs it in its non-test files (testserver starts
	// real `flashline serve` processes), so none is excepted.
	"postgres": {"cmd/"},
	// The Redis gate and the sale cache: stack puts them in front of the
	// database; the gate and the waiting room read the cache through a
	// Memory of their own, the jobs the gate through a Gate of theirs.
	"gate":      {"cmd/", "stack"},
	"salecache": {"cmd/", "stack"},
}

// TestHubRule fails when a package imports an adapter that mayImport does
// not allow it (as `go list` shows its non-test imports): jobs once worked
// on *postgres.Store and *gate.Gate, stack made the database adapter itself,
// and the gate and the waiting room took a *salecache.Cache.
func TestHubRule(t *testing.T) {
	t.Parallel()
	const module = "github.com/flashline/flashline"
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", exitStderr(err))
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := cmp.Or(strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/"), ".")
		for _, imp := range fields[1:] {
			adapter, ok := strings.CutPrefix(imp, module+"/")
			allowed, isAdapter := mayImport[adapter]
			if !ok || !isAdapter {
				continue
			}
			if !slices.ContainsFunc(allowed, func(a string) bool {
				return pkg == a || strings.HasSuffix(a, "/") && strings.HasPrefix(pkg, a)
			}) {
				t.Errorf("%s imports %s; only %v may (the hub rule: depend on the root's interfaces, or declare a small one, and let cmd/ pass the adapter)", pkg, adapter, allowed)
			}
		}
	}
}
