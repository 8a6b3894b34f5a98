package waitpage

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The page's words, one catalogue per language: i18n/<tag>.json, a flat
// object of message keys to plain text, grouped by the page's part (the
// prefix before the dot: header., waiting., reserved., …; a new part of
// the page adds its group to en.json and every other file). en.json is the
// reference: every key the page uses is in it, and every other language
// has the same keys (TestCataloguesComplete). A value is a string, or, for
// a count, its plural forms by Intl.PluralRules' categories ({"one": …,
// "other": …}; "other" required). {name} is filled in by the page: a value
// (a number, formatted for the language) or one of the page's elements
// (the countdown, the time), so a translation may put it anywhere in the
// sentence but must keep it.
//
// The page (i18n.js) picks the language: ?lang=, the embed's data-lang,
// the browser's languages, the deployment's default (--page-language),
// English. Each catalogue is served as a module of the assets
// (i18n-<tag>.js, under the versioned path: immutable, cached), and the
// list of languages as i18n-list.js. A store adds languages or changes
// words without rebuilding: serve's --page-translations DIR (and page
// export's) reads DIR/<tag>.json at start, checked as the built-in ones are.
// The page sets every text with textContent, never as HTML, and the
// values are checked to be plain text: the Content-Security-Policy does not
// change.

//go:embed i18n/*.json
var builtinCatalogues embed.FS

// Bounds on a store's translations (--page-translations).
const (
	maxCatalogueBytes = 64 << 10 // one language's file
	maxLanguages      = 64       // files in the directory
	maxMessageRunes   = 1000     // one message (a form of a plural one)
)

// reference is the language every other is checked against, and the one
// the page falls back to (the page carries it: i18n-en.js is imported).
const reference = "en"

// pluralForms are Intl.PluralRules' categories.
var pluralForms = []string{"zero", "one", "two", "few", "many", "other"}

// langTag is the subset of BCP 47 a catalogue's file is named by: a
// language, optionally a script and a region (ja, pt-BR, zh-CN, sr-Latn).
var langTag = regexp.MustCompile(`^[a-z]{2,3}(-[A-Z][a-z]{3})?(-([A-Z]{2}|[0-9]{3}))?$`)

var placeholder = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// message is one entry of a catalogue: a text, or plural forms.
type message struct {
	text  string
	forms map[string]string
}

func (m message) MarshalJSON() ([]byte, error) {
	if m.forms != nil {
		return json.Marshal(m.forms)
	}
	return json.Marshal(m.text)
}

func (m *message) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return json.Unmarshal(b, &m.forms)
	}
	return json.Unmarshal(b, &m.text)
}

// Catalogue is one language's messages, by key.
type Catalogue map[string]message

// Catalogues are the languages the page speaks, by tag.
type Catalogues map[string]Catalogue

// BuiltinCatalogues are the languages embedded in the binary, each
// checked against English. It panics on a bad file: they are the
// program's own (TestCataloguesComplete says which).
func BuiltinCatalogues() Catalogues {
	cs, err := readCatalogues(builtinCatalogues, "i18n", nil)
	if err != nil {
		panic("waitpage: " + err.Error())
	}
	return cs
}

// LoadTranslations is the built-in languages with a store's files in dir
// ("": none) laid over them: a file named for a built-in language
// (de.json) replaces the messages it names and keeps the others; a file
// for another language (sv.json) adds it, and must name every message
// English has. Every file is checked: at most 64 KiB, a JSON object of
// keys English has, plain-text values (no markup, no control characters,
// at most 1000 characters) that keep English's {placeholders}.
func LoadTranslations(dir string) (Catalogues, error) {
	cs := BuiltinCatalogues()
	if dir == "" {
		return cs, nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("translations: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("translations: %s is not a directory", dir)
	}
	return readCatalogues(os.DirFS(dir), ".", cs)
}

// readCatalogues reads dir's <tag>.json files of fsys over base (nil: the
// built-in ones themselves, en.json first).
func readCatalogues(fsys fs.FS, dir string, base Catalogues) (Catalogues, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("translations: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && path.Ext(e.Name()) == ".json" {
			names = append(names, e.Name())
		}
	}
	if len(names) > maxLanguages {
		return nil, fmt.Errorf("translations: %d files; at most %d languages", len(names), maxLanguages)
	}
	read := func(name string) (Catalogue, error) {
		f, err := fsys.Open(path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxCatalogueBytes+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxCatalogueBytes {
			return nil, fmt.Errorf("larger than %d KiB", maxCatalogueBytes>>10)
		}
		return parseCatalogue(b)
	}
	out := Catalogues{}
	maps.Copy(out, base)
	if base == nil {
		en, err := read(reference + ".json")
		if err != nil {
			return nil, fmt.Errorf("translations: %s.json: %w", reference, err)
		}
		if err := checkText(en, nil); err != nil {
			return nil, fmt.Errorf("translations: %s.json: %w", reference, err)
		}
		out[reference] = en
	}
	en := out[reference]
	for _, name := range names {
		tag := strings.TrimSuffix(name, ".json")
		if base == nil && tag == reference {
			continue
		}
		if !langTag.MatchString(tag) {
			return nil, fmt.Errorf("translations: %s: name a file by its language, as de.json, pt-BR.json or zh-CN.json", filepath.Join(dir, name))
		}
		c, err := read(name)
		if err == nil {
			err = checkText(c, en)
		}
		if err != nil {
			return nil, fmt.Errorf("translations: %s: %w", filepath.Join(dir, name), err)
		}
		old, known := out[tag]
		if !known {
			if missing := missingKeys(c, en); len(missing) > 0 {
				return nil, fmt.Errorf("translations: %s: a new language must name every message; missing %s", filepath.Join(dir, name), strings.Join(missing, ", "))
			}
			out[tag] = c
			continue
		}
		merged := Catalogue{}
		maps.Copy(merged, old)
		maps.Copy(merged, c)
		out[tag] = merged
	}
	return out, nil
}

func parseCatalogue(b []byte) (Catalogue, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var c Catalogue
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("not a JSON object of messages: %w", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	if c == nil {
		return nil, errors.New("not a JSON object of messages")
	}
	return c, nil
}

// missingKeys are the keys of en that c lacks, sorted.
func missingKeys(c, en Catalogue) []string {
	var missing []string
	for k := range en {
		if _, ok := c[k]; !ok {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	return missing
}

// checkText checks c's messages against en's (nil: c is English itself):
// known keys, plural forms only where English has them, plain text, and
// English's placeholders kept.
func checkText(c, en Catalogue) error {
	for _, k := range slices.Sorted(maps.Keys(c)) {
		m := c[k]
		ref, known := en[k]
		if en != nil && !known {
			return fmt.Errorf("unknown message %q (English has no such key)", k)
		}
		if en == nil {
			ref = m
		}
		texts := map[string]string{"": m.text}
		if m.forms != nil {
			if ref.forms == nil {
				return fmt.Errorf("%q: plural forms for a message that counts nothing", k)
			}
			if _, ok := m.forms["other"]; !ok {
				return fmt.Errorf("%q: plural forms without \"other\"", k)
			}
			texts = m.forms
		}
		want := placeholders(ref)
		for form, s := range texts {
			if form != "" && !slices.Contains(pluralForms, form) {
				return fmt.Errorf("%q: %q is not a plural form (%s)", k, form, strings.Join(pluralForms, ", "))
			}
			if err := plainText(s); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			have := map[string]bool{}
			for _, p := range placeholder.FindAllStringSubmatch(s, -1) {
				if !want[p[1]] {
					return fmt.Errorf("%q: {%s} is not one of its placeholders (%s)", k, p[1], placeholderList(want))
				}
				have[p[1]] = true
			}
			// Every placeholder stays: some are the page's elements. A
			// plural form other than "other" may leave the count out ("a
			// minute").
			for p := range want {
				if !have[p] && (form == "" || form == "other" || p != "n") {
					return fmt.Errorf("%q: {%s} is missing", k, p)
				}
			}
		}
		if k == "language.dir" && m.text != "ltr" && m.text != "rtl" {
			return fmt.Errorf("%q: %q; want ltr or rtl", k, m.text)
		}
	}
	return nil
}

func placeholders(m message) map[string]bool {
	set := map[string]bool{}
	for _, s := range append([]string{m.text}, slices.Collect(maps.Values(m.forms))...) {
		for _, p := range placeholder.FindAllStringSubmatch(s, -1) {
			set[p[1]] = true
		}
	}
	return set
}

func placeholderList(set map[string]bool) string {
	if len(set) == 0 {
		return "it has none"
	}
	var names []string
	for _, p := range slices.Sorted(maps.Keys(set)) {
		names = append(names, "{"+p+"}")
	}
	return strings.Join(names, ", ")
}

// plainText checks that s is text to show as it is: no markup (the page
// never reads a message as HTML, and a message that looks like some is a
// mistake or an attempt), no control characters, bounded.
func plainText(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case utf8.RuneCountInString(s) > maxMessageRunes:
		return fmt.Errorf("longer than %d characters", maxMessageRunes)
	case strings.ContainsAny(s, "<>"):
		return errors.New("contains < or >: messages are plain text, never HTML")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errors.New("contains a control character")
	}
	return nil
}

// Languages are cs's tags, sorted.
func (cs Catalogues) Languages() []string { return slices.Sorted(maps.Keys(cs)) }
