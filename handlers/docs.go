package handlers

import (
	"bytes"
	"embed"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline/internal/assets"
)

// The API reference, GET /docs: the OpenAPI document (openapi.json) rendered
// in the browser by Swagger UI 5.35.0 (swagger-ui-dist, Apache-2.0), which is
// embedded here with its licence (apidocs/README.md says how to update it).
// The page and its assets come from this instance only: no script, style,
// font or request goes to another origin, and the Content-Security-Policy
// says so.
//
//go:embed apidocs/docs.html apidocs/docs.js apidocs/docs.css
//go:embed apidocs/swagger-ui-bundle.js apidocs/swagger-ui.css
//go:embed apidocs/LICENSE apidocs/NOTICE apidocs/swagger-ui-bundle.js.LICENSE.txt
var apiDocsFiles embed.FS

// DocsContentSecurityPolicy is sent with the reference page and its assets:
// scripts, styles and requests from this origin only (Swagger UI needs no
// inline script or style: its styles are set through the DOM), images from
// this origin and data: URLs (the style sheet's icons), nothing framed or
// framing.
const DocsContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// DocsPrefix is the path under which the reference page's assets are served,
// followed by their version.
const DocsPrefix = "/docs/"

// docsPage is the name of the HTML document among apiDocsFiles; every other
// file is an asset.
const docsPage = "docs.html"

var docsTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".txt": "text/plain; charset=utf-8",
	"":     "text/plain; charset=utf-8", // LICENSE, NOTICE
}

var (
	// docsAssets are Swagger UI, the page's own script and style, and the
	// licences. Their URLs carry the content hash of all of them, so the
	// current version is cached for a year; another version (a page from
	// an instance running other code, during a rolling deploy) gets this
	// instance's file, uncached. A client that takes gzip gets it
	// compressed (the bundle goes from 1.7 MB to about 0.5 MB over the
	// wire).
	docsAssets *assets.Set
	docsHTML   []byte // docs.html with the versioned asset path filled in
)

func init() {
	files, err := assets.ReadDir(apiDocsFiles, "apidocs", docsTypes, docsPage)
	if err != nil {
		panic("handlers: docs: " + err.Error())
	}
	h := http.Header{}
	docsHeaders(h)
	docsAssets = assets.New(files, assets.Options{Policy: assets.Versioned, Header: h, Gzip: true})
	page, err := apiDocsFiles.ReadFile("apidocs/" + docsPage)
	if err != nil {
		panic("handlers: docs: " + err.Error())
	}
	// Relative to /docs: the assets under docs/<version>/, the document at
	// openapi.json, so that the page also works under a path prefix.
	docsHTML = bytes.ReplaceAll(page, []byte("{{ASSETS}}"), []byte(strings.TrimPrefix(DocsPrefix, "/")+docsAssets.Version()))
}

func docsHeaders(h http.Header) {
	h.Set("Content-Security-Policy", DocsContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// handleDocsPage serves the HTML, revalidated on every load: it names the
// current version of the assets.
func handleDocsPage(c *gin.Context) {
	h := c.Writer.Header()
	docsHeaders(h)
	h.Set("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", docsHTML)
}

// handleDocsAsset serves the page's assets (docsAssets).
func handleDocsAsset(c *gin.Context) { docsAssets.Serve(c) }
