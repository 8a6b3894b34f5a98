package waitpage

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flashline/flashline"
)

// The page as static files (flashline page export), for a CDN or any web
// server in front of the API: when the API cannot answer, the page still
// loads and says "come back shortly" (and tries again by itself) instead of
// failing to load. The files are the page (index.html) and its assets under
// waitpage/<version>/, referenced by relative URLs so that the directory can
// be served under any path; the page calls the API at the base URL given
// (which answers cross-origin requests, handlers.CORS) for the sale given,
// both named in meta tags. A static host sends no Content-Security-Policy
// header, so the page carries its policy in a meta tag: the one served pages
// get, with connect-src allowing the API's origin (frame-ancestors cannot
// be set by a meta tag; set it as a header where the host allows).

// ExportEmbed is the exported buy button's script (embed.js): a shop's page
// includes it from the static host as it would from the API.
const ExportEmbed = "embed.js"

// ExportPage is the exported page's file name: what a web server serves for
// the directory.
const ExportPage = "index.html"

// ExportPolicy is the Content-Security-Policy of a page exported to call
// the API at origin (scheme://host[:port]).
func ExportPolicy(origin string) string {
	return "default-src 'self'; script-src 'self'; worker-src 'self'; " +
		"style-src 'self'; img-src 'self' https:; connect-src 'self' " + origin + "; object-src 'none'; " +
		"base-uri 'none'; form-action 'self'"
}

// APIBase checks the API's base URL an exported page is to call and returns
// it without a trailing slash, with its origin: an absolute http or https
// URL with a host, and no user name or password, query or fragment (a path
// is kept: an API served under a prefix).
func APIBase(raw string) (base, origin string, err error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%q is not a URL: %w", raw, err)
	case u.Scheme != "https" && u.Scheme != "http":
		return "", "", fmt.Errorf("%q: the API's URL must be http or https", raw)
	case u.Host == "" || u.Hostname() == "":
		return "", "", fmt.Errorf("%q: the API's URL must name a host", raw)
	case u.User != nil:
		return "", "", fmt.Errorf("%q: the API's URL must not carry a user name or password", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", "", fmt.Errorf("%q: the API's URL must have no query or fragment", raw)
	case strings.ContainsAny(raw, " \"'<>\\;"):
		return "", "", fmt.Errorf("%q: the API's URL must not contain spaces, quotes, angle brackets, backslashes or semicolons", raw)
	}
	origin = u.Scheme + "://" + u.Host
	return strings.TrimRight(origin+u.EscapedPath(), "/"), origin, nil
}

// Export writes the page for saleID, calling the API at apiBase, into dir,
// which must exist and be empty unless force (then the files are
// overwritten; nothing else in dir is touched). It returns the files
// written, relative to dir.
func Export(dir, saleID, apiBase string, force bool) ([]string, error) {
	if !flashline.ValidID(flashline.SaleIDPrefix, saleID) {
		return nil, fmt.Errorf("%q is not a sale id (sale_ and 26 characters, as 'flashline sale create' prints)", saleID)
	}
	base, origin, err := APIBase(apiBase)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist: create it first", dir)
	case err != nil:
		return nil, err
	case !info.IsDir():
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(entries) > 0 && !force {
		return nil, fmt.Errorf("%s is not empty (--force overwrites the page's files in it)", dir)
	}
	b := current.Load()
	assetDir := "waitpage/" + b.version
	files := map[string][]byte{
		ExportPage: []byte(render(assetDir, ExportPolicy(origin), base, saleID)),
		// The shop's script, calling the API at base: the static host's
		// embed.js, beside its waitpage/ (its CORS is the host's to set).
		ExportEmbed: []byte(renderEmbed(b.version, base)),
	}
	for name, a := range b.assets {
		files[assetDir+"/"+name] = a.Body
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(assetDir)), 0o755); err != nil {
		return nil, err
	}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), files[name], 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}
