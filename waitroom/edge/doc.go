// Package edge holds an edge's side of the waiting room: the pull, its
// leases, its sale cache's source.
//
// It is the edge's side of the waiting room at the edge: a Client
// of the origins (instances with the database) that an instance without one
// (flashline serve --role edge) builds its sale cache and its waiting room
// on. What passes between them is signed and verified by package roomtoken;
// the origin's side is waitroom's (origin.go) and the HTTP routes are
// handlers' (edge.go).
package edge
