package waitpage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Look is the store's look of the page, one per deployment (serve
// --page-look FILE, a JSON object of these fields, each optional): its
// logo above the sale, its colours and its fonts. The store's words for the
// headline, the rules or the sold-out message are its translations
// (--page-translations). The look becomes two assets, look.css (custom
// properties wait.css and embed.css read) and look.js (the logo), so the
// Content-Security-Policy is unchanged: no inline style, and the logo is an
// https image as the product's picture is.
type Look struct {
	// LogoURL is an https image shown above the sale (not on the buy
	// button: the shop's page is the shop's).
	LogoURL string `json:"logoUrl,omitempty"`
	// LogoAlt is the logo's text for screen readers (the store's name).
	LogoAlt string `json:"logoAlt,omitempty"`
	// Colors are #rgb, #rgba, #rrggbb or #rrggbbaa, by role (lookColors).
	// background, panel and text go together: a page whose background is
	// the store's but whose text is dark mode's would be unreadable.
	Colors map[string]string `json:"colors,omitempty"`
	// Font is a font-family list ("Avenir Next", system-ui, sans-serif):
	// fonts the shopper's device has (the page loads none).
	Font string `json:"font,omitempty"`
}

// lookColors are the colours a look may set, and the custom property each
// sets (the ones a shop already sets on the buy button: integration.md).
var lookColors = map[string]string{
	"accent":     "--flashline-accent",
	"accentText": "--flashline-accent-text",
	"background": "--flashline-background",
	"panel":      "--flashline-panel-background",
	"text":       "--flashline-text",
	"border":     "--flashline-border",
}

const (
	maxLookBytes = 16 << 10
	maxLogoURL   = 1024
	maxLogoAlt   = 200
	maxFont      = 200
)

var (
	hexColor = regexp.MustCompile(`^#([0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$`)
	// fontList is font names, quoted or not, and commas: nothing that ends
	// a CSS declaration or rule (; { } \) or escapes.
	fontList = regexp.MustCompile(`^[A-Za-z0-9 ,'"-]+$`)
)

// LoadLook reads and checks the look in file ("": none).
func LoadLook(file string) (Look, error) {
	if file == "" {
		return Look{}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return Look{}, fmt.Errorf("look: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLookBytes+1))
	if err != nil {
		return Look{}, fmt.Errorf("look: %s: %w", file, err)
	}
	if len(b) > maxLookBytes {
		return Look{}, fmt.Errorf("look: %s: larger than %d KiB", file, maxLookBytes>>10)
	}
	var l Look
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Look{}, fmt.Errorf("look: %s: not a look (logoUrl, logoAlt, colors, font): %w", file, err)
	}
	if dec.More() {
		return Look{}, fmt.Errorf("look: %s: more than one JSON value", file)
	}
	if err := l.check(); err != nil {
		return Look{}, fmt.Errorf("look: %s: %w", file, err)
	}
	return l, nil
}

func (l Look) check() error {
	if l.LogoURL != "" {
		u, err := url.Parse(l.LogoURL)
		switch {
		case len(l.LogoURL) > maxLogoURL:
			return fmt.Errorf("logoUrl: longer than %d bytes", maxLogoURL)
		case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
			return errors.New("logoUrl: an https URL with a host and no user name (the page's images are https only)")
		case strings.ContainsAny(l.LogoURL, " \"'<>\\()`"):
			return errors.New("logoUrl: no spaces, quotes, angle brackets, backslashes or parentheses")
		}
	}
	if l.LogoAlt != "" {
		if err := plainText(l.LogoAlt); err != nil {
			return fmt.Errorf("logoAlt: %w", err)
		}
		if utf8.RuneCountInString(l.LogoAlt) > maxLogoAlt {
			return fmt.Errorf("logoAlt: longer than %d characters", maxLogoAlt)
		}
	}
	for _, role := range slices.Sorted(maps.Keys(l.Colors)) {
		if _, ok := lookColors[role]; !ok {
			return fmt.Errorf("colors: %q is not one of %s", role, strings.Join(slices.Sorted(maps.Keys(lookColors)), ", "))
		}
		if !hexColor.MatchString(l.Colors[role]) {
			return fmt.Errorf("colors: %s: %q is not #rgb, #rgba, #rrggbb or #rrggbbaa", role, l.Colors[role])
		}
	}
	n := 0
	for _, role := range []string{"background", "panel", "text"} {
		if _, ok := l.Colors[role]; ok {
			n++
		}
	}
	if n != 0 && n != 3 {
		return errors.New("colors: background, panel and text go together (all three or none): the page's dark mode fills in the others")
	}
	if l.Font != "" {
		switch {
		case len(l.Font) > maxFont:
			return fmt.Errorf("font: longer than %d bytes", maxFont)
		case !fontList.MatchString(l.Font) || strings.Count(l.Font, `"`)%2 != 0 || strings.Count(l.Font, "'")%2 != 0:
			return errors.New(`font: a font-family list, names and commas ("Avenir Next", system-ui, sans-serif), quotes paired`)
		}
	}
	return nil
}

// css is look.css: the look's custom properties, on the page's root and
// the buy button's host (a shop's own properties on the button's element
// win over these: the outer page's declarations win over :host's).
func (l Look) css() string {
	var b strings.Builder
	b.WriteString("/* The store's look (serve --page-look): custom properties wait.css and embed.css read. */\n")
	var decls []string
	for _, role := range slices.Sorted(maps.Keys(l.Colors)) {
		decls = append(decls, lookColors[role]+": "+l.Colors[role]+";")
	}
	if l.Font != "" {
		decls = append(decls, "--flashline-font-family: "+l.Font+";")
	}
	if len(decls) > 0 {
		b.WriteString(":root, :host {\n  " + strings.Join(decls, "\n  ") + "\n}\n")
	}
	return b.String()
}

// js is look.js: the logo, for the page's script.
func (l Look) js() (string, error) {
	j, err := json.Marshal(map[string]string{"logoUrl": l.LogoURL, "logoAlt": l.LogoAlt})
	if err != nil {
		return "", err
	}
	return "// The store's logo (serve --page-look).\nexport const look = " + string(j) + ";\n", nil
}
