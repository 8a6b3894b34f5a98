package waitpage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitroom/waitpage"
)

// TestLoadLook: a store's look is read and checked: an https logo, known
// colour roles in hex, background, panel and text together, a font-family
// list that cannot end its CSS declaration; anything else is refused with
// the reason.
func TestLoadLook(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, body string) string {
		t.Helper()
		f := filepath.Join(t.TempDir(), "look.json")
		require.NoError(t, os.WriteFile(f, []byte(body), 0o644))
		return f
	}
	l, err := waitpage.LoadLook(write(t, `{"logoUrl":"https://shop.example/logo.svg","logoAlt":"Komorebi",
		"colors":{"accent":"#b4441f","accentText":"#fff","background":"#fbf7f2","panel":"#ffffff","text":"#2b2118"},
		"font":"Georgia, \"DejaVu Serif\", serif"}`))
	require.NoError(t, err)
	require.Equal(t, "https://shop.example/logo.svg", l.LogoURL)
	l, err = waitpage.LoadLook("")
	require.NoError(t, err)
	require.Zero(t, l)

	for _, c := range []struct{ name, body, want string }{
		{"HTTPLogo", `{"logoUrl":"http://shop.example/logo.png"}`, "https URL"},
		{"DataLogo", `{"logoUrl":"data:image/png;base64,AAAA"}`, "https URL"},
		{"QuotedLogo", `{"logoUrl":"https://shop.example/a\")b.png"}`, "no spaces, quotes"},
		{"LongLogo", `{"logoUrl":"https://shop.example/` + strings.Repeat("a", 1024) + `"}`, "longer than 1024"},
		{"MarkupAlt", `{"logoAlt":"<b>Shop</b>"}`, "never HTML"},
		{"Role", `{"colors":{"link":"#000"}}`, `"link" is not one of`},
		{"NotHex", `{"colors":{"accent":"red; background: url(x)"}}`, "is not #rgb"},
		{"Alone", `{"colors":{"background":"#000"}}`, "go together"},
		{"FontEscape", `{"font":"Georgia; } body { background: red"}`, "font-family list"},
		{"FontQuote", `{"font":"\"Georgia, serif"}`, "quotes paired"},
		{"Unknown", `{"logo":"https://shop.example/logo.png"}`, "unknown field"},
		{"NotJSON", `logo = x`, "not a look"},
		{"Huge", `{"logoAlt":"` + strings.Repeat("x", 17<<10) + `"}`, "larger than 16 KiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := waitpage.LoadLook(write(t, c.body))
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "look.json", "the error names the file")
		})
	}
}
