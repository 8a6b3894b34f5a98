package handlers

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline/api"
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

type docsAsset struct {
	body        []byte
	contentType string
	// gzipped is the body compressed, made on its first request (the bundle
	// goes from 1.7 MB to about 0.5 MB over the wire).
	gzipped func() []byte
}

var (
	docsAssets  = map[string]docsAsset{}
	docsVersion string // content hash of the assets: part of their URLs
	docsHTML    []byte // docs.html with the versioned asset path filled in
)

func init() {
	entries, err := apiDocsFiles.ReadDir("apidocs")
	if err != nil {
		panic("handlers: docs: " + err.Error())
	}
	h := sha256.New()
	for _, e := range entries { // sorted by name: the version is stable
		name := e.Name()
		if name == docsPage {
			continue
		}
		contentType, ok := docsTypes[path.Ext(name)]
		if !ok {
			panic("handlers: docs: apidocs/" + name + ": no Content-Type for " + path.Ext(name))
		}
		b, err := apiDocsFiles.ReadFile("apidocs/" + name)
		if err != nil {
			panic("handlers: docs: " + err.Error())
		}
		docsAssets[name] = docsAsset{body: b, contentType: contentType, gzipped: sync.OnceValue(func() []byte { return gzipBytes(b) })}
		h.Write([]byte(name))
		h.Write(b)
	}
	docsVersion = hex.EncodeToString(h.Sum(nil))[:12]
	page, err := apiDocsFiles.ReadFile("apidocs/" + docsPage)
	if err != nil {
		panic("handlers: docs: " + err.Error())
	}
	// Relative to /docs: the assets under docs/<version>/, the document at
	// openapi.json, so that the page also works under a path prefix.
	docsHTML = bytes.ReplaceAll(page, []byte("{{ASSETS}}"), []byte(strings.TrimPrefix(DocsPrefix, "/")+docsVersion))
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b) // writing to a bytes.Buffer does not fail
	_ = zw.Close()
	return buf.Bytes()
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

// handleDocsAsset serves Swagger UI, the page's own script and style, and
// the licences. The URL carries the content hash of all of them, so the
// current version is cached for a year; another version (a page from an
// instance running other code, during a rolling deploy) gets this
// instance's file, uncached. A client that takes gzip gets it compressed.
func handleDocsAsset(c *gin.Context) {
	a, ok := docsAssets[c.Param("file")]
	if !ok {
		c.JSON(http.StatusNotFound, api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "not found"}})
		return
	}
	h := c.Writer.Header()
	docsHeaders(h)
	if c.Param("version") == docsVersion {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("Vary", "Accept-Encoding")
	body := a.body
	if acceptsGzip(c.Request.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = a.gzipped()
	}
	c.Data(http.StatusOK, a.contentType, body)
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip (and does
// not refuse it with q=0).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
