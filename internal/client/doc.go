// Package client holds the typed client of the HTTP contract.
//
// It is the typed client of Flashline's HTTP contract, the
// OpenAPI document api/openapi.json (served at /openapi.json), for the
// load test, the fault harness and the tests. Its types and calls are checked
// against the document (openapi_test.go), and the tests send its requests
// through internal/testkit/contract, which checks every exchange against it.
//
// An answer of the contract is a value, never a Go error: a 409 sold_out is
// a Response (or Result) whose Status and Code the caller inspects. A Go
// error means there was no answer to inspect: the request could not be sent
// or its answer not read (or, for a typed call, a success answer whose body
// is not the contract's JSON).
//
// Do sends any request, including deliberately malformed ones; the typed
// calls (contract.go) build the contract's requests and decode its answers.
package client
