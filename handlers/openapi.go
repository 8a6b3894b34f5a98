package handlers

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPI is the contract of the whole HTTP API: every route, body, answer,
// error code, header and security scheme, as an OpenAPI 3.1 document. The
// handlers' tests check every request and answer they exchange against it
// (internal/contract), so it cannot drift from the server.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the API (a copy).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// handleOpenAPI is GET /openapi.json.
func handleOpenAPI(c *gin.Context) {
	writeRaw(c, http.StatusOK, openAPI)
}
