// Package stack holds the store put together: cache, gate, and the database
// adapter it is given.
//
// It puts the store together: the sale cache in front of the
// Redis gate in front of the database adapter, as the one flashline.Store
// the HTTP layer uses, and the parts the rest of an instance needs of it.
//
//	handlers → salecache (flashline.Refusals on its facts) → gate (Redis) → postgres (the authority)
//
// The adapter is given to New as the interfaces it must satisfy (DB):
// cmd/flashline makes it (postgres.NewStore) and passes it, so this package
// does not import postgres.
//
// Each wrapper overrides the Store methods it must see (salecache.Sees,
// gate.Sees: by their effect on stock, flashline.StockEffectOf) and passes
// the rest through; this package's test fails when a method that changes
// stock would pass a wrapper unseen.
package stack
