package waitpage_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitpage"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	resp := rec.Result()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestServesPageAndAssets(t *testing.T) {
	t.Parallel()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	waitpage.Register(r)

	resp, page := get(t, r, "/sales/s_123/wait")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, waitpage.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "worker-src 'self'")
	require.NotContains(t, resp.Header.Get("Content-Security-Policy"), "unsafe-inline")
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))

	t.Run("NoInlineScriptOrStyle", func(t *testing.T) {
		require.NotRegexp(t, `<script(\s[^>]*)?>\s*[^<\s]`, page, "inline script")
		require.NotRegexp(t, `(?i)\son[a-z]+\s*=`, page, "inline event handler")
		require.NotRegexp(t, `(?i)<style|\sstyle\s*=`, page, "inline style")
	})
	t.Run("NoOtherOrigin", func(t *testing.T) {
		require.NotRegexp(t, `(?i)(src|href)\s*=\s*"(https?:)?//`, page)
	})

	refs := regexp.MustCompile(`(?:src|href|data-worker)="(/waitpage/[^"]+)"`).FindAllStringSubmatch(page, -1)
	require.Len(t, refs, 3, "wait.css, wait.js and pow-worker.js")
	want := map[string]string{
		"wait.js":       "text/javascript; charset=utf-8",
		"pow-worker.js": "text/javascript; charset=utf-8",
		"wait.css":      "text/css; charset=utf-8",
	}
	for _, m := range refs {
		url := m[1]
		name := url[strings.LastIndex(url, "/")+1:]
		t.Run(name, func(t *testing.T) {
			resp, body := get(t, r, url)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, want[name], resp.Header.Get("Content-Type"))
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
			require.Equal(t, waitpage.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
			require.NotEmpty(t, body)
			require.NotRegexp(t, `(?i)https?://`, body, "no other origin")

			// Another version of the asset is served, but not cached.
			other := strings.Replace(url, "/waitpage/", "/waitpage/0000", 1)
			resp, _ = get(t, r, other)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		})
	}

	t.Run("UnknownAsset", func(t *testing.T) {
		resp, _ := get(t, r, "/waitpage/x/secret.go")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
}
