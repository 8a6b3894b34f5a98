package waitpage_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/waitroom/waitpage"
)

// builtinLanguages are the languages the page must speak (issue 50).
var builtinLanguages = []string{"ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt-BR", "zh-CN"}

// readCatalogue reads i18n/<tag>.json as it is written.
func readCatalogue(t *testing.T, tag string) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("i18n", tag+".json"))
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m), "i18n/%s.json", tag)
	return m
}

// TestCataloguesComplete: every built-in language has exactly English's
// keys (none missing: the page would show English there; none unknown: a
// typo, or a key the page no longer uses), and passes the checks a
// store's file does (BuiltinCatalogues panics otherwise).
func TestCataloguesComplete(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("i18n", "*.json"))
	require.NoError(t, err)
	var tags []string
	for _, f := range files {
		tags = append(tags, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	require.Subset(t, tags, builtinLanguages)
	require.ElementsMatch(t, tags, waitpage.BuiltinCatalogues().Languages())
	en := readCatalogue(t, "en")
	for _, tag := range tags {
		c := readCatalogue(t, tag)
		var missing, unknown []string
		for k := range en {
			if _, ok := c[k]; !ok {
				missing = append(missing, k)
			}
		}
		for k := range c {
			if _, ok := en[k]; !ok {
				unknown = append(unknown, k)
			}
		}
		slices.Sort(missing)
		slices.Sort(unknown)
		require.Empty(t, missing, "i18n/%s.json lacks keys English has", tag)
		require.Empty(t, unknown, "i18n/%s.json has keys English has not", tag)
	}
	// Arabic is written right to left; the others built in left to right.
	require.JSONEq(t, `"rtl"`, string(readCatalogue(t, "ar")["language.dir"]))
}

// TestCataloguesUsed: every key the page's markup and scripts name is in
// English's catalogue, and every key English has is named somewhere (the
// plural forms and the language's own name and direction aside).
func TestCataloguesUsed(t *testing.T) {
	t.Parallel()
	en := readCatalogue(t, "en")
	used := map[string]bool{"language.name": true, "language.dir": true}
	keyRE := regexp.MustCompile(`(?:data-i18n="|\bt\(|\bfill\([^,]+,\s*|")([a-zA-Z]+\.[a-zA-Z0-9]+)"`)
	files, err := filepath.Glob(filepath.Join("static", "*"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range keyRE.FindAllStringSubmatch(string(b), -1) {
			if _, ok := en[m[1]]; ok {
				used[m[1]] = true
			}
		}
		for _, m := range regexp.MustCompile(`data-i18n="([^"]+)"|\bt\("([a-zA-Z]+\.[a-zA-Z0-9]+)"`).FindAllStringSubmatch(string(b), -1) {
			key := m[1] + m[2]
			_, ok := en[key]
			require.True(t, ok, "%s names %q, which en.json has not", f, key)
		}
	}
	var unused []string
	for k := range en {
		if !used[k] {
			unused = append(unused, k)
		}
	}
	slices.Sort(unused)
	require.Empty(t, unused, "keys of en.json the page never names")
}

// TestLoadTranslations: a store's directory adds a language (complete) and
// changes words of a built-in one (only those it names); what is not plain
// text, not a known key, too large or badly named is refused with the
// file and the reason.
func TestLoadTranslations(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, files map[string]string) string {
		t.Helper()
		dir := t.TempDir()
		for name, body := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
		}
		return dir
	}
	// Swedish: every key of English, in "Swedish" (English's own words
	// with a prefix keep the placeholders).
	en := readCatalogue(t, "en")
	sv := map[string]any{}
	for k, v := range en {
		var s string
		if json.Unmarshal(v, &s) == nil {
			sv[k] = s
			continue
		}
		var forms map[string]string
		require.NoError(t, json.Unmarshal(v, &forms))
		sv[k] = forms
	}
	sv["language.name"] = "Svenska"
	sv["soldOut.title"] = "Slutsåld"
	svJSON, err := json.Marshal(sv)
	require.NoError(t, err)

	t.Run("AddAndOverride", func(t *testing.T) {
		t.Parallel()
		dir := write(t, map[string]string{
			"sv.json":   string(svJSON),
			"de.json":   `{"soldOut.title": "Alles weg", "header.opensIn": "Los geht's in {left}"}`,
			"README.md": "not a catalogue: ignored",
		})
		cs, err := waitpage.LoadTranslations(dir)
		require.NoError(t, err)
		require.Contains(t, cs.Languages(), "sv")
		require.Contains(t, cs.Languages(), "ja")
		b, err := json.Marshal(cs["de"])
		require.NoError(t, err)
		var de map[string]any
		require.NoError(t, json.Unmarshal(b, &de))
		require.Equal(t, "Alles weg", de["soldOut.title"])
		require.Equal(t, "Los geht's in {left}", de["header.opensIn"])
		require.Equal(t, "Bezahlen", de["reserved.pay"], "a word the store did not name stays")
	})

	bad := []struct{ name, file, body, want string }{
		{"Markup", "de.json", `{"soldOut.title": "<b>Weg</b>"}`, "never HTML"},
		{"UnknownKey", "de.json", `{"soldOut.titel": "Weg"}`, `unknown message "soldOut.titel"`},
		{"LostPlaceholder", "de.json", `{"header.opensIn": "Bald"}`, "{left} is missing"},
		{"OtherPlaceholder", "de.json", `{"header.opensIn": "In {links}"}`, "{links} is not one of its placeholders"},
		{"PluralWithoutOther", "de.json", `{"challenge.tries": {"one": "{n} Versuch"}}`, `without "other"`},
		{"PluralForm", "de.json", `{"challenge.tries": {"single": "x", "other": "{n}"}}`, "not a plural form"},
		{"PluralOfText", "de.json", `{"soldOut.title": {"other": "Weg"}}`, "counts nothing"},
		{"Direction", "de.json", `{"language.dir": "up"}`, "want ltr or rtl"},
		{"Control", "de.json", `{"soldOut.title": "Weg\u0007"}`, "control character"},
		{"Empty", "de.json", `{"soldOut.title": ""}`, "empty"},
		{"Long", "de.json", `{"soldOut.title": "` + strings.Repeat("x", 1001) + `"}`, "longer than 1000"},
		{"Huge", "de.json", `{"soldOut.title": "` + strings.Repeat("x", 70<<10) + `"}`, "larger than 64 KiB"},
		{"NotJSON", "de.json", `soldOut.title = Weg`, "not a JSON object"},
		{"Array", "de.json", `["Weg"]`, "not a JSON object"},
		{"BadName", "german.json", `{}`, "name a file by its language"},
		{"Traversal", "..json", `{}`, "name a file by its language"},
		{"IncompleteNew", "sv.json", `{"soldOut.title": "Slutsåld"}`, "a new language must name every message; missing"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := write(t, map[string]string{c.file: c.body})
			_, err := waitpage.LoadTranslations(dir)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.Contains(t, err.Error(), c.file, "the error names the file")
		})
	}

	t.Run("TooMany", func(t *testing.T) {
		t.Parallel()
		files := map[string]string{}
		for i := range 65 {
			files[string(rune('a'+i/26))+string(rune('a'+i%26))+".json"] = "{}"
		}
		_, err := waitpage.LoadTranslations(write(t, files))
		require.ErrorContains(t, err, "at most 64 languages")
	})
	t.Run("NoDirectory", func(t *testing.T) {
		t.Parallel()
		_, err := waitpage.LoadTranslations(filepath.Join(t.TempDir(), "absent"))
		require.Error(t, err)
	})
}
