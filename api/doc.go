// Package api holds the HTTP contract: `openapi.json` and the JSON shapes of
// its answers.
//
// It is the HTTP contract: the OpenAPI 3.1 document (openapi.json,
// served at /openapi.json) and the JSON shapes of the answers (types.go),
// one set for both sides. The server (package handlers) fills them; the
// contract's client (internal/client) decodes into them; the generated
// client (internal/apiclient) is generated from the document. The handlers'
// tests check every request and answer they exchange against the document
// (internal/testkit/contract), so neither can drift from the server.
package api
