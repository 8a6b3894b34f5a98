package stack_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/gate"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/salecache"
	"github.com/flashline/flashline/stack"
)

// sees is what each wrapper of the Store says it must see, by its package.
var sees = map[string]flashline.StockEffect{
	reflect.TypeFor[salecache.Options]().PkgPath(): salecache.Sees,
	reflect.TypeFor[gate.Options]().PkgPath():      gate.Sees,
}

// TestWrappersSeeEveryStockChange walks the stack from the Store the HTTP
// layer uses down to the adapter, and fails when a wrapper lets a Store
// method that changes stock as it must see (its package's Sees) pass through
// to the one below without declaring the method itself: promoted from the
// embedded Store, the call would change stock behind its back (as
// ApplyPaymentEvent once cancelled and voided past both wrappers).
func TestWrappersSeeEveryStockChange(t *testing.T) {
	t.Parallel()
	db := postgres.NewStore(postgres.Pools{}, postgres.Options{})
	st := stack.New(db, stack.Options{})
	storeType := reflect.TypeFor[flashline.Store]()
	var wrappers []reflect.Type
	v := reflect.ValueOf(st.Store)
	for v.Type() != reflect.TypeFor[*postgres.Store]() {
		wrappers = append(wrappers, v.Type())
		inner, ok := v.Type().FieldByName("Store")
		require.True(t, ok && inner.Anonymous && inner.Type == storeType, "%s wraps no embedded flashline.Store", v.Type())
		v = v.FieldByIndex(inner.Index).Elem()
	}
	require.Len(t, wrappers, 2, "the sale cache's wrapper, then the gate's, then the adapter: %v", wrappers)
	require.Equal(t, db, v.Interface(), "the bottom of the stack is the adapter given to stack.New")

	for _, w := range wrappers {
		must, ok := sees[w.PkgPath()]
		require.True(t, ok, "%s wraps the Store: its package must say what it Sees", w)
		declared := declaredMethods(t, w)
		for i := range storeType.NumMethod() {
			name := storeType.Method(i).Name
			effect, known := flashline.StockEffectOf(name)
			require.True(t, known, "Store.%s has no stock effect in flashline.StockEffectOf", name)
			if effect&must != 0 {
				require.True(t, declared[name], "%s must see Store.%s (it changes stock) but lets it pass through: declare it", w, name)
			}
		}
	}
}

// declaredMethods lists the methods t's own package declares on it (not
// those promoted from a field it embeds), read from the package's source.
func declaredMethods(tb testing.TB, t reflect.Type) map[string]bool {
	tb.Helper()
	// The module's packages are this one's siblings (go test runs in
	// stack/). Not go/build's Import: it needs GOROOT, which a binary built
	// with -trimpath (make test's) does not know.
	rel, ok := strings.CutPrefix(t.PkgPath(), "github.com/flashline/flashline/")
	require.True(tb, ok, "%s is not a package of this module", t.PkgPath())
	dir := filepath.Join("..", filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	require.NoError(tb, err)
	fset := token.NewFileSet()
	out := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		require.NoError(tb, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.Name == t.Name() {
				out[fn.Name.Name] = true
			}
		}
	}
	require.NotEmpty(tb, out, "no method of %s found in %s", t, dir)
	return out
}
