package waitpage_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitroom/waitpage"
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

// register adds the page's routes to r, as handlers' routes list them
// (handlers/routes_shop.go, waitpageRoutes).
func register(r gin.IRoutes) {
	r.GET("/sales/:saleId/wait", waitpage.HandlePage)
	r.HEAD("/sales/:saleId/wait", waitpage.HandlePage)
	r.GET(waitpage.AssetPrefix+":version/:file", waitpage.HandleAsset)
	r.HEAD(waitpage.AssetPrefix+":version/:file", waitpage.HandleAsset)
	r.GET(waitpage.EmbedPath, waitpage.HandleEmbed)
	r.HEAD(waitpage.EmbedPath, waitpage.HandleEmbed)
	r.GET("/favicon.ico", waitpage.HandleFavicon)
}

func TestServesPageAndAssets(t *testing.T) {
	t.Parallel()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	register(r)

	// The icon every browser asks for: none, not a 404.
	icon, _ := get(t, r, "/favicon.ico")
	require.Equal(t, http.StatusNoContent, icon.StatusCode)
	require.Contains(t, icon.Header.Get("Cache-Control"), "max-age=")

	resp, page := get(t, r, "/sales/s_123/wait")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, waitpage.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "worker-src 'self'")
	require.NotContains(t, resp.Header.Get("Content-Security-Policy"), "unsafe-inline")
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "img-src 'self' https:;", "the product's picture")
	// Served, the page calls its own origin and reads the sale from its
	// address: the export's meta tags are empty, and no policy meta tag.
	require.Contains(t, page, `<meta name="flashline-api" content="">`)
	require.Contains(t, page, `<meta name="flashline-sale" content="">`)
	require.NotContains(t, page, "http-equiv")
	require.NotContains(t, page, "{{")

	t.Run("NoInlineScriptOrStyle", func(t *testing.T) {
		require.NotRegexp(t, `<script(\s[^>]*)?>\s*[^<\s]`, page, "inline script")
		require.NotRegexp(t, `(?i)\son[a-z]+\s*=`, page, "inline event handler")
		require.NotRegexp(t, `(?i)<style|\sstyle\s*=`, page, "inline style")
	})
	t.Run("NoOtherOrigin", func(t *testing.T) {
		require.NotRegexp(t, `(?i)(src|href)\s*=\s*"(https?:)?//`, page)
	})

	// The page references every file in static/ but itself, once: the style
	// sheet, the entry module wait.js, the modules it imports (preloaded)
	// and the proof-of-work worker.
	entries, err := os.ReadDir("static")
	require.NoError(t, err)
	// embed.js (the shop's script) loads two files the page does not.
	embedOnly := []string{"embed-main.js", "embed.css"}
	var files []string
	for _, e := range entries {
		if e.Name() != "wait.html" && !slices.Contains(embedOnly, e.Name()) {
			files = append(files, e.Name())
		}
	}
	// And the generated files: the two modules i18n.js imports (English,
	// and the list of languages; the others are imported once chosen), and
	// the store's look (look.css, look.js).
	files = append(files, "i18n-en.js", "i18n-list.js", "look.css", "look.js")
	refs := regexp.MustCompile(`(?:src|href|data-worker)="(/waitpage/[^"/]+/)([^"/]+)"`).FindAllStringSubmatch(page, -1)
	var referenced []string
	for _, m := range refs {
		require.Equal(t, refs[0][1], m[1], "one asset version for the whole page")
		referenced = append(referenced, m[2])
	}
	require.ElementsMatch(t, files, referenced, "the page's references vs the files in static/")
	assetDir := refs[0][1]
	require.Contains(t, page, `<script type="module" src="`+assetDir+`wait.js"></script>`)
	require.Contains(t, page, `data-worker="`+assetDir+`pow-worker.js"`)

	want := map[string]string{
		".js":  "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8",
	}
	bodies := map[string]string{}
	for _, name := range append(slices.Clone(referenced), embedOnly...) {
		url := assetDir + name
		t.Run(name, func(t *testing.T) {
			resp, body := get(t, r, url)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, want[path.Ext(name)], resp.Header.Get("Content-Type"))
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
			require.Equal(t, waitpage.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			require.NotEmpty(t, body)
			require.NotRegexp(t, `(?i)https?://`, body, "no other origin")
			bodies[name] = body

			// Another version of the asset is served, but not cached.
			other := strings.Replace(url, "/waitpage/", "/waitpage/0000", 1)
			resp, _ = get(t, r, other)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		})
	}

	// The modules import one another only by relative path, each imported
	// module is an asset, and the page preloads exactly the imported ones.
	t.Run("Modules", func(t *testing.T) {
		importRE := regexp.MustCompile(`(?m)^import\b[^;]*?"([^"]*)";`)
		imported := map[string]bool{}
		for name, body := range bodies {
			if path.Ext(name) != ".js" {
				continue
			}
			for _, m := range importRE.FindAllStringSubmatch(body, -1) {
				require.True(t, strings.HasPrefix(m[1], "./"), "%s imports %q: only ./ paths", name, m[1])
				dep := strings.TrimPrefix(m[1], "./")
				require.Contains(t, bodies, dep, "%s imports %s, which is not served", name, dep)
				imported[dep] = true
			}
		}
		require.Contains(t, imported, "line.js", "wait.js's imports were found")
		var preloaded []string
		for _, m := range regexp.MustCompile(`<link rel="modulepreload" href="`+regexp.QuoteMeta(assetDir)+`([^"]+)">`).FindAllStringSubmatch(page, -1) {
			preloaded = append(preloaded, m[1])
		}
		require.ElementsMatch(t, slices.Collect(maps.Keys(imported)), preloaded, "modules imported vs preloaded")
		require.NotContains(t, imported, "wait.js", "the entry module is not imported")
		require.NotContains(t, imported, "pow-worker.js", "the worker is a classic script, not a module")
	})

	// The shop's script: current (revalidated), readable from any origin
	// (as the modules it imports are), every placeholder filled, the page's
	// own markup in it, and the modules it loads served.
	t.Run("Embed", func(t *testing.T) {
		resp, script := get(t, r, waitpage.EmbedPath)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		require.NotContains(t, script, "{{")
		require.Contains(t, script, `\u003csection id=\"state-reserved\"`, "wait.html's markup, escaped for a script")
		m := regexp.MustCompile(`"(/waitpage/[0-9a-f]+)"`).FindStringSubmatch(script)
		require.NotNil(t, m, "the assets' versioned path")
		require.Contains(t, page, m[1]+"/wait.js", "the same version as the page")
		for _, name := range []string{"embed-main.js", "embed.css", "wait.css", "flow.js"} {
			resp, _ := get(t, r, m[1]+"/"+name)
			require.Equal(t, http.StatusOK, resp.StatusCode, name)
			require.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"), name)
		}
	})

	// Each language is a module of the assets, the catalogue as it is
	// (JSON, <, > and & escaped), and the list names them all.
	t.Run("Languages", func(t *testing.T) {
		resp, list := get(t, r, assetDir+"i18n-list.js")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, list, `export const languages = ["ar","de","en","es","fr","it","ja","ko","nl","pl","pt-BR","zh-CN"];`)
		require.Contains(t, list, `export const preferred = "";`)
		for _, tag := range waitpage.Languages() {
			resp, body := get(t, r, assetDir+"i18n-"+tag+".js")
			require.Equal(t, http.StatusOK, resp.StatusCode, tag)
			require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"), tag)
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"), tag)
			require.True(t, strings.HasPrefix(body, "export default {"), tag)
			require.NotContains(t, body, "<", tag)
		}
		_, ja := get(t, r, assetDir+"i18n-ja.js")
		require.Contains(t, ja, `"waiting.title":"列に並んでいます"`)
		resp, _ = get(t, r, assetDir+"i18n-xx.js")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "a language it does not speak")
	})

	t.Run("UnknownAsset", func(t *testing.T) {
		resp, _ := get(t, r, "/waitpage/x/secret.go")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
}
