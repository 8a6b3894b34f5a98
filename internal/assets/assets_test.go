package assets_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/assets"
)

var types = map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

func testFS() fstest.MapFS {
	return fstest.MapFS{
		"dir/page.html": {Data: []byte("<html>")},
		"dir/app.js":    {Data: []byte("console.log(1)")},
		"dir/app.css":   {Data: []byte("body{}")},
		"dir/sub/x.js":  {Data: []byte("nested")},
	}
}

func get(t *testing.T, h http.Handler, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestReadDir(t *testing.T) {
	t.Parallel()
	files, err := assets.ReadDir(testFS(), "dir", types, "page.html")
	require.NoError(t, err)
	require.Equal(t, map[string]assets.File{
		"app.js":  {Body: []byte("console.log(1)"), ContentType: types[".js"]},
		"app.css": {Body: []byte("body{}"), ContentType: types[".css"]},
	}, files, "the skipped file and the directory are not assets")

	t.Run("UnknownExtension", func(t *testing.T) {
		_, err := assets.ReadDir(testFS(), "dir", map[string]string{".js": types[".js"]}, "page.html")
		require.ErrorContains(t, err, "dir/app.css: no Content-Type")
	})
}

func TestVersioned(t *testing.T) {
	t.Parallel()
	files, err := assets.ReadDir(testFS(), "dir", types, "page.html")
	require.NoError(t, err)
	set := assets.New(files, assets.Options{
		Policy: assets.Versioned,
		Header: http.Header{"X-Content-Type-Options": {"nosniff"}},
		Gzip:   true,
	})
	require.Len(t, set.Version(), 12)
	require.Equal(t, set.Version(), assets.New(files, assets.Options{Policy: assets.Revalidated}).Version(), "the version is the files' alone")
	files["app.js"] = assets.File{Body: []byte("changed"), ContentType: types[".js"]}
	require.NotEqual(t, set.Version(), assets.New(files, assets.Options{Policy: assets.Versioned}).Version())

	r := gin.New()
	r.GET("/a/:version/:file", set.Serve)

	t.Run("CurrentVersionImmutable", func(t *testing.T) {
		resp := get(t, r, "/a/"+set.Version()+"/app.js", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.Equal(t, "Accept-Encoding", resp.Header.Get("Vary"))
		require.Equal(t, types[".js"], resp.Header.Get("Content-Type"))
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "console.log(1)", string(body), "the file as it was when the set was made")
	})
	t.Run("OtherVersionNoCache", func(t *testing.T) {
		resp := get(t, r, "/a/000000000000/app.css", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	})
	t.Run("Gzip", func(t *testing.T) {
		resp := get(t, r, "/a/"+set.Version()+"/app.js", http.Header{"Accept-Encoding": {"br, gzip"}})
		require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
		zr, err := gzip.NewReader(resp.Body)
		require.NoError(t, err)
		body, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Equal(t, "console.log(1)", string(body))

		refused := get(t, r, "/a/"+set.Version()+"/app.js", http.Header{"Accept-Encoding": {"gzip;q=0"}})
		require.Empty(t, refused.Header.Get("Content-Encoding"))
	})
	t.Run("NotFound", func(t *testing.T) {
		resp := get(t, r, "/a/"+set.Version()+"/page.html", nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Empty(t, resp.Header.Get("X-Content-Type-Options"), "only a file gets the set's headers")
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.JSONEq(t, `{"error":{"code":"not_found","message":"not found"}}`, string(body))
	})
}

func TestRevalidated(t *testing.T) {
	t.Parallel()
	files, err := assets.ReadDir(testFS(), "dir", types, "page.html")
	require.NoError(t, err)
	set := assets.New(files, assets.Options{
		Policy:   assets.Revalidated,
		NotFound: func(c *gin.Context) { c.String(http.StatusTeapot, "mine") },
	})
	r := gin.New()
	r.GET("/a/:file", set.Serve)

	resp := get(t, r, "/a/app.css", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	require.Empty(t, resp.Header.Get("Vary"), "no gzip asked for")
	require.Equal(t, types[".css"], resp.Header.Get("Content-Type"))

	resp = get(t, r, "/a/nothing.js", nil)
	require.Equal(t, http.StatusTeapot, resp.StatusCode, "the caller's answer to a name not in the set")
}

func TestNewWithoutPolicyPanics(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { assets.New(nil, assets.Options{}) })
}
