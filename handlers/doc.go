// Package handlers holds the HTTP layer: the routes, the front door, the
// console, the API reference, the providers' webhooks, the edge's surface.
//
// It is Flashline's HTTP layer (Gin): Routes (routes.go) builds the
// origin's engine and lists the operations' routes, and each audience's
// routes are listed in a file of its own: routes_shop.go (shoppers' API and
// the waiting-room page), routes_admin.go (the store's admin API and
// console), routes_providers.go (payment providers' webhooks) and
// routes_edge.go (what edges call on an origin, and an edge's own surface).
// The JSON shapes are package api's (views.go fills them), decoding is in
// json.go and the one error table in errors.go.
package handlers
