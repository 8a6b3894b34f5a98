package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline/api"
)

// openAPI is the contract of the whole HTTP API (package api's document),
// read once.
var openAPI = api.OpenAPI()

// handleOpenAPI is GET /openapi.json.
func handleOpenAPI(c *gin.Context) {
	writeRaw(c, http.StatusOK, openAPI)
}
