package waitpage_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/waitpage"
)

func TestExport(t *testing.T) {
	t.Parallel()
	saleID := flashline.NewID(flashline.SaleIDPrefix)
	dir := t.TempDir()
	files, err := waitpage.Export(dir, saleID, "https://edge.example:8443/api/", false)
	require.NoError(t, err)
	require.Contains(t, files, "index.html")

	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	html := string(page)
	require.Contains(t, html, `<meta name="flashline-api" content="https://edge.example:8443/api">`)
	require.Contains(t, html, `<meta name="flashline-sale" content="`+saleID+`">`)
	csp := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]+)">`).FindStringSubmatch(html)
	require.NotNil(t, csp, "the policy travels in a meta tag")
	require.Equal(t, waitpage.ExportPolicy("https://edge.example:8443"), csp[1])
	require.Contains(t, csp[1], "connect-src 'self' https://edge.example:8443;")
	require.NotContains(t, html, "{{", "a placeholder left")

	// Every asset the page names is written, under a relative path.
	refs := regexp.MustCompile(`(?:src|href|data-worker)="([^"]+)"`).FindAllStringSubmatch(html, -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		require.True(t, strings.HasPrefix(m[1], "waitpage/"), "relative asset URL: %s", m[1])
		require.Contains(t, files, m[1])
		_, err := os.Stat(filepath.Join(dir, m[1]))
		require.NoError(t, err)
	}
	// The page, the assets it names, the buy button (embed.js, calling
	// the same API) with the two assets only it loads, and the languages
	// but English, which the page imports once chosen.
	others := len(waitpage.Languages()) - 1
	require.Len(t, files, len(refs)+4+others, "the page, the assets it names, the button's script and its own two, the languages")
	for _, tag := range waitpage.Languages() {
		require.FileExists(t, filepath.Join(dir, "waitpage", filepath.Base(filepath.Dir(refs[0][1])), "i18n-"+tag+".js"))
	}
	require.Contains(t, files, waitpage.ExportEmbed)
	embed, err := os.ReadFile(filepath.Join(dir, waitpage.ExportEmbed))
	require.NoError(t, err)
	require.Contains(t, string(embed), `d.api || "https://edge.example:8443/api" || base`)
	require.NotContains(t, string(embed), "{{", "a placeholder left")
	for _, name := range []string{"embed-main.js", "embed.css"} {
		require.Contains(t, string(embed), name)
		require.FileExists(t, filepath.Join(dir, "waitpage", filepath.Base(filepath.Dir(refs[0][1])), name))
	}

	t.Run("NotEmpty", func(t *testing.T) {
		_, err := waitpage.Export(dir, saleID, "https://edge.example", false)
		require.ErrorContains(t, err, "not empty")
		_, err = waitpage.Export(dir, saleID, "https://edge2.example", true)
		require.NoError(t, err)
		page, err := os.ReadFile(filepath.Join(dir, "index.html"))
		require.NoError(t, err)
		require.Contains(t, string(page), `content="https://edge2.example"`)
	})
	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct{ name, dir, sale, url, want string }{
			{"NoDir", filepath.Join(t.TempDir(), "nope"), saleID, "https://e.example", "does not exist"},
			{"FileNotDir", writeFile(t), saleID, "https://e.example", "not a directory"},
			{"BadSale", t.TempDir(), "sale_<script>", "https://e.example", "not a sale id"},
			{"NoScheme", t.TempDir(), saleID, "edge.example", "http or https"},
			{"FTP", t.TempDir(), saleID, "ftp://edge.example", "http or https"},
			{"JavaScript", t.TempDir(), saleID, "javascript:alert(1)", "http or https"},
			{"NoHost", t.TempDir(), saleID, "https:///x", "host"},
			{"User", t.TempDir(), saleID, "https://u:p@edge.example", "user name"},
			{"Query", t.TempDir(), saleID, "https://edge.example/?a=1", "query"},
			{"Fragment", t.TempDir(), saleID, "https://edge.example/#x", "fragment"},
			{"Quote", t.TempDir(), saleID, `https://edge.example/"onload=`, "quotes"},
			{"Semicolon", t.TempDir(), saleID, "https://edge.example/;script-src", "semicolons"},
		} {
			_, err := waitpage.Export(tt.dir, tt.sale, tt.url, false)
			require.ErrorContains(t, err, tt.want, tt.name)
		}
	})
}

func writeFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	return p
}
