// Package waitpage serves the waiting-room page: one HTML document at
// GET /sales/{saleId}/wait and its script, worker and style sheet under
// /waitpage/. The files are plain HTML, JavaScript and CSS embedded in the
// binary; there is no build step and nothing is loaded from another origin.
//
// The page needs no authentication to be served: it reads the customer's
// token from the URL fragment (or localStorage) and calls the API with it.
package waitpage

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"
)

//go:embed static
var static embed.FS

// ContentSecurityPolicy is sent with the page and its assets: everything from
// this origin only, no inline script or style, no frames, no plugins.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; worker-src 'self'; " +
	"style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// AssetPrefix is the path under which the assets are served.
const AssetPrefix = "/waitpage/"

type asset struct {
	body        []byte
	contentType string
}

var (
	assets  = map[string]asset{}
	version string // content hash of all assets: part of their URLs
	page    []byte // wait.html with the versioned asset URLs filled in
)

func init() {
	types := map[string]string{
		".js":  "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8",
	}
	h := sha256.New()
	for _, name := range []string{"wait.js", "pow-worker.js", "wait.css"} {
		b, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			panic("waitpage: " + err.Error())
		}
		assets[name] = asset{body: b, contentType: types[path.Ext(name)]}
		h.Write([]byte(name))
		h.Write(b)
	}
	version = hex.EncodeToString(h.Sum(nil))[:12]
	html, err := fs.ReadFile(static, "static/wait.html")
	if err != nil {
		panic("waitpage: " + err.Error())
	}
	page = []byte(strings.ReplaceAll(string(html), "{{ASSETS}}", AssetPrefix+version))
}

// Register adds the page and its assets to r.
func Register(r gin.IRoutes) {
	r.GET("/sales/:saleId/wait", handlePage)
	r.HEAD("/sales/:saleId/wait", handlePage)
	r.GET(AssetPrefix+":version/:file", handleAsset)
	r.HEAD(AssetPrefix+":version/:file", handleAsset)
}

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	// The customer's token may be in the fragment; fragments are never sent
	// as a referrer, and no-referrer keeps the sale id in the path private too.
	h.Set("Referrer-Policy", "no-referrer")
}

// handlePage serves the HTML. It is revalidated on every load (it names the
// current asset version); the sale id is read from the path by the script.
func handlePage(c *gin.Context) {
	h := c.Writer.Header()
	securityHeaders(h)
	h.Set("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", page)
}

// handleAsset serves a script or style sheet. The URL carries the content
// hash, so the current version is cached for a year; a request naming
// another version (a page from an instance running other code, during a
// rolling deploy) still gets this instance's file, but uncached.
func handleAsset(c *gin.Context) {
	a, ok := assets[c.Param("file")]
	if !ok {
		c.JSON(http.StatusNotFound, gin.H{"error": gin.H{"code": "not_found", "message": "not found"}})
		return
	}
	h := c.Writer.Header()
	securityHeaders(h)
	if c.Param("version") == version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	c.Data(http.StatusOK, a.contentType, a.body)
}
