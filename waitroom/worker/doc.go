// Package worker holds the waiting room as a Cloudflare Worker (JavaScript, run here on workerd) and its conformance test.
//
// The Worker itself is JavaScript, in src/ (docs/edge.md says what it
// answers and how it is deployed); this package is its test, which runs it
// on workerd (installed from npm by `make workerd`) in front of a real
// origin and makes the checks the Go edge's tests make.
package worker
