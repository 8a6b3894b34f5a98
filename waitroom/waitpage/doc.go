// Package waitpage holds the waiting-room page and the buy button,
// embedded, and their words in each language.
//
// It serves the waiting-room page: one HTML document at
// GET /sales/{saleId}/wait and, under /waitpage/, every other file in
// static/: the page's scripts (ES modules: wait.js imports the others), the
// proof-of-work worker and the style sheet; and the page's words, a module
// per language made from i18n/ and the store's own (i18n.go). The files are plain HTML,
// JavaScript and CSS embedded in the binary; there is no build step and no
// script or style is loaded from another origin (the product's picture may
// be: any https image).
//
// The page needs no authentication to be served: it reads the customer's
// token from the URL fragment (or localStorage) and calls the API with it.
// Export (export.go) writes the same files for a static host, calling the
// API on another origin.
package waitpage
