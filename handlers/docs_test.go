package handlers_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
)

// docsServer serves the API with nothing behind it but what /docs and
// /openapi.json need (neither reads the store), every exchange checked
// against the document.
func docsServer(t *testing.T) *httptest.Server {
	t.Helper()
	verifier, err := auth.NewVerifier(jwtSecret, adminToken)
	require.NoError(t, err)
	limiter, err := loadshed.New(loadshed.Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(routes(t, handlers.Deps{
		Verifier: verifier, Limiter: limiter, Logger: testLogger(t), Registry: prometheus.NewRegistry(),
		Ready: func(context.Context) error { return nil },
	}))
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path, taking gzip only when asked to (the client would
// otherwise ask for it and undo it out of sight).
func get(t *testing.T, srv *httptest.Server, path string, gzipped bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	if gzipped {
		req.Header.Set("Accept-Encoding", "gzip")
	} else {
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// attrURL is every src and href attribute of an HTML document.
var attrURL = regexp.MustCompile(`(?i)\s(?:src|href)="([^"]*)"`)

// TestDocs: GET /docs is the API reference page, and everything it loads is
// this instance's: Swagger UI embedded in the binary, its script and style,
// and /openapi.json.
func TestDocs(t *testing.T) {
	t.Parallel()
	srv := docsServer(t)

	resp, body := get(t, srv, "/docs", false)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, handlers.DocsContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	csp := resp.Header.Get("Content-Security-Policy")
	require.NotContains(t, csp, "unsafe-inline")
	require.NotContains(t, csp, "unsafe-eval")
	require.Contains(t, csp, "default-src 'none'")
	html := string(body)
	require.NotContains(t, html, "<style", "no inline style (the CSP forbids it)")
	require.NotRegexp(t, `<script>|<script [^>]*>[^<]`, html, "no inline script (the CSP forbids it)")

	var assets []string
	for _, m := range attrURL.FindAllStringSubmatch(html, -1) {
		ref := m[1]
		if ref == "data:," {
			continue // no favicon: the browser asks for none
		}
		// Same origin only: relative references, no scheme, no //host.
		require.NotContains(t, ref, ":", "%q names a scheme", ref)
		require.False(t, strings.HasPrefix(ref, "//"), "%q names a host", ref)
		if strings.HasPrefix(ref, "docs/") {
			assets = append(assets, ref)
		}
	}
	require.Contains(t, html, `data-spec="openapi.json"`, "the page renders /openapi.json")
	require.Contains(t, html, `href="openapi.json"`)
	var bundle string
	for _, a := range assets {
		if strings.HasSuffix(a, "/swagger-ui-bundle.js") {
			bundle = a
		}
	}
	require.NotEmpty(t, bundle, "the page loads the embedded Swagger UI: %v", assets)
	require.Len(t, assets, 4, "Swagger UI's script and style, the page's own: %v", assets)

	wantType := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	for _, a := range assets {
		t.Run(a[strings.LastIndex(a, "/")+1:], func(t *testing.T) {
			resp, plain := get(t, srv, "/"+a, false)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, wantType[a[strings.LastIndex(a, "."):]], resp.Header.Get("Content-Type"))
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
			require.Equal(t, handlers.DocsContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
			require.Equal(t, "Accept-Encoding", resp.Header.Get("Vary"))
			require.Empty(t, resp.Header.Get("Content-Encoding"))
			require.NotEmpty(t, plain)

			resp, compressed := get(t, srv, "/"+a, true)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
			zr, err := gzip.NewReader(bytes.NewReader(compressed))
			require.NoError(t, err)
			unzipped, err := io.ReadAll(zr)
			require.NoError(t, err)
			require.Equal(t, plain, unzipped)
		})
	}

	t.Run("LicenceServed", func(t *testing.T) {
		version := strings.Split(bundle, "/")[1]
		for _, f := range []string{"LICENSE", "NOTICE", "swagger-ui-bundle.js.LICENSE.txt"} {
			resp, body := get(t, srv, "/docs/"+version+"/"+f, false)
			require.Equal(t, http.StatusOK, resp.StatusCode, f)
			require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"), f)
			require.NotEmpty(t, body, f)
		}
		_, license := get(t, srv, "/docs/"+version+"/LICENSE", false)
		require.Contains(t, string(license), "Apache License")
	})

	t.Run("OtherVersionNotCached", func(t *testing.T) {
		resp, _ := get(t, srv, "/docs/0123456789ab/docs.js", false)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	})

	t.Run("UnknownFileNotFound", func(t *testing.T) {
		resp, _ := get(t, srv, "/docs/0123456789ab/index.html", false)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		resp, _ = get(t, srv, "/docs/", false)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
}
