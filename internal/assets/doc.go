// Package assets holds embedded files served under a path prefix, each set with its one cache policy.
//
// The API reference's Swagger UI (handlers/docs.go), the console's scripts
// and styles (handlers/console.go) and the waiting-room page's modules
// (waitroom/waitpage) are each a Set: the files, their Content-Types, the
// headers every answer carries and how long a browser may keep them.
package assets
