package api

import _ "embed"

// openAPI is the contract of the whole HTTP API: every route, body, answer,
// error code, header and security scheme, as an OpenAPI 3.1 document.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the API (a copy).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }
