package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestPageExport: flashline page export writes the page and says what it
// wrote; it refuses what it cannot do with a clear error, writing nothing.
func TestPageExport(t *testing.T) {
	t.Parallel()
	saleID := flashline.NewID(flashline.SaleIDPrefix)
	dir := t.TempDir()
	out, _, err := runCLI(t, "", "page", "export", "--sale", saleID, "--out", dir, "--edge", "https://edge.example/")
	require.NoError(t, err)
	require.Contains(t, out, "wrote "+dir+"/index.html\n")
	require.Contains(t, out, "wrote "+dir+"/waitpage/")
	require.Contains(t, out, "the page calls https://edge.example for sale "+saleID)
	_, err = os.Stat(filepath.Join(dir, "index.html"))
	require.NoError(t, err)

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"NotEmpty", []string{"--sale", saleID, "--out", dir, "--edge", "https://edge.example"}, "not empty"},
		{"NoSale", []string{"--out", t.TempDir(), "--edge", "https://edge.example"}, "required"},
		{"NoEdge", []string{"--sale", saleID, "--out", t.TempDir()}, "required"},
		{"BadEdge", []string{"--sale", saleID, "--out", t.TempDir(), "--edge", "edge.example"}, "http or https"},
		{"BadSale", []string{"--sale", "sale_x", "--out", t.TempDir(), "--edge", "https://edge.example"}, "not a sale id"},
		{"MissingDir", []string{"--sale", saleID, "--out", filepath.Join(t.TempDir(), "no"), "--edge", "https://edge.example"}, "does not exist"},
		{"Extra", []string{"--sale", saleID, "--out", t.TempDir(), "--edge", "https://edge.example", "more"}, "unexpected argument"},
		{"BadTranslations", []string{"--sale", saleID, "--out", t.TempDir(), "--edge", "https://edge.example", "--page-translations", badTranslations(t)}, "de.json: \"soldOut.title\": contains < or >"},
		{"NoTranslations", []string{"--sale", saleID, "--out", t.TempDir(), "--edge", "https://edge.example", "--page-translations", filepath.Join(t.TempDir(), "no")}, "--page-translations"},
		{"BadLanguage", []string{"--sale", saleID, "--out", t.TempDir(), "--edge", "https://edge.example", "--page-language", "sv"}, `default language "sv" is not one it speaks`},
	} {
		_, _, err := runCLI(t, "", append([]string{"page", "export"}, tt.args...)...)
		require.ErrorContains(t, err, tt.want, tt.name)
	}
	_, _, err = runCLI(t, "", "page", "import")
	require.ErrorContains(t, err, "unknown subcommand")

	t.Run("Check", func(t *testing.T) {
		t.Parallel()
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/sales/"+saleID+"/policy" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"policy":"arrival_order","description":"d","title":"Trail runner"}`))
				return
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"not found"}}`))
		}))
		t.Cleanup(api.Close)
		out, stderr, err := runCLI(t, "", "page", "export", "--sale", saleID, "--out", t.TempDir(), "--edge", api.URL, "--check")
		require.NoError(t, err)
		require.Contains(t, out, "sale "+saleID+": Trail runner")
		require.Contains(t, stderr, "--edge is http")
		other := flashline.NewID(flashline.SaleIDPrefix)
		empty := t.TempDir()
		_, _, err = runCLI(t, "", "page", "export", "--sale", other, "--out", empty, "--edge", api.URL, "--check")
		require.ErrorContains(t, err, "404 not_found")
		entries, err := os.ReadDir(empty)
		require.NoError(t, err)
		require.Empty(t, entries, "nothing written for a sale the API does not know")
	})
}

// badTranslations is a directory of the store's words with a German file
// that carries markup.
func badTranslations(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "de.json"), []byte(`{"soldOut.title": "<img src=x>"}`), 0o644))
	return dir
}

// TestServeRefusesBadTranslations: serve checks the store's words and
// look before anything else starts, and says which file and why.
func TestServeRefusesBadTranslations(t *testing.T) {
	t.Parallel()
	_, _, err := runCLI(t, "", "serve", "--page-translations", badTranslations(t))
	require.ErrorContains(t, err, "de.json: \"soldOut.title\": contains < or >: messages are plain text, never HTML")
	_, _, err = runCLI(t, "", "serve", "--role", "edge", "--page-language", "tlh")
	require.ErrorContains(t, err, `default language "tlh" is not one it speaks`)
	look := filepath.Join(t.TempDir(), "look.json")
	require.NoError(t, os.WriteFile(look, []byte(`{"logoUrl":"http://shop.example/logo.png"}`), 0o644))
	_, _, err = runCLI(t, "", "serve", "--page-look", look)
	require.ErrorContains(t, err, "logoUrl: an https URL")
}
