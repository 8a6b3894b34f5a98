package flashline

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryStoreMethodHasAStockEffect: a method added to Store is classified
// (stockEffects) when it is added, and a method removed leaves no entry.
func TestEveryStoreMethodHasAStockEffect(t *testing.T) {
	t.Parallel()
	store := reflect.TypeFor[Store]()
	methods := map[string]bool{}
	for i := range store.NumMethod() {
		name := store.Method(i).Name
		methods[name] = true
		_, known := StockEffectOf(name)
		require.True(t, known, "Store.%s: say in stockEffects how it changes stock (0: not at all)", name)
	}
	for name := range stockEffects {
		require.True(t, methods[name], "stockEffects names %s, which is not a method of Store", name)
	}
}
