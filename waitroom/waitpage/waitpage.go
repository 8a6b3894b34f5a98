package waitpage

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline/internal/assets"
)

//go:embed static
var static embed.FS

// embedLoader is embed.js, the shop's script tag's (GET /embed.js): a
// classic script with placeholders, not an asset (it names the version).
//
//go:embed embed/embed.js
var embedLoader string

// ContentSecurityPolicy is sent with the page and its assets: everything from
// this origin only, but the product's picture (any https image: the sale's
// imageUrl); no inline script or style, no frames, no plugins.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; worker-src 'self'; " +
	"style-src 'self'; img-src 'self' https:; connect-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// AssetPrefix is the path under which the assets are served.
const AssetPrefix = "/waitpage/"

// built is the page as this process serves and exports it: the files of
// static/, the languages' catalogues and the store's look (Configure), with
// the version their contents make.
type built struct {
	assets    map[string]assets.File
	served    *assets.Set // the assets as HandleAsset serves them
	version   string      // content hash of all assets: part of their URLs
	page      []byte      // wait.html as served: the versioned asset URLs filled in
	script    []byte      // embed.js as served
	languages []string    // the catalogues' tags
}

var (
	template string // wait.html as written, with its placeholders
	markup   string // wait.html's <main id="app">…</main>, which embed.js puts in the shop's page
	// current is what is served; Configure replaces it before serving.
	current atomic.Pointer[built]
)

// pageFile is the HTML document in static/; every other file there is an
// asset.
const pageFile = "wait.html"

// assetTypes are the Content-Types of the assets, by extension: modules and
// workers need a JavaScript MIME type (and nosniff makes browsers check it).
var assetTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
}

func init() {
	doc, err := fs.ReadFile(static, "static/"+pageFile)
	if err != nil {
		panic("waitpage: " + err.Error())
	}
	template = string(doc)
	start, end := strings.Index(template, `<main id="app"`), strings.Index(template, "</main>")
	if start < 0 || end < start {
		panic("waitpage: " + pageFile + " has no <main id=\"app\">")
	}
	markup = template[start : end+len("</main>")]
	b, err := build(BuiltinCatalogues(), "", Look{})
	if err != nil {
		panic("waitpage: " + err.Error())
	}
	current.Store(b)
}

// Options are how a deployment dresses the page: the store's translations
// and default language, and its look.
type Options struct {
	// Translations is a directory of the store's catalogues laid over the
	// built-in ones ("": none; LoadTranslations).
	Translations string
	// Language is the language the page speaks to a browser that asks for
	// none it has, before English ("": none).
	Language string
	// Look is a file of the store's look ("": Flashline's; LoadLook).
	Look string
}

// Configure reads and checks o's files and makes the page with them. Call
// it before serving or exporting.
func Configure(o Options) error {
	cs, err := LoadTranslations(o.Translations)
	if err != nil {
		return err
	}
	look, err := LoadLook(o.Look)
	if err != nil {
		return err
	}
	b, err := build(cs, o.Language, look)
	if err != nil {
		return err
	}
	current.Store(b)
	return nil
}

// Languages are the tags of the languages the page speaks, sorted.
func Languages() []string { return slices.Clone(current.Load().languages) }

// build makes the assets: static/'s files, a module per language
// (i18n-<tag>.js, its catalogue), the list of languages with the default
// (i18n-list.js), and the store's look (look.css, look.js).
func build(cs Catalogues, lang string, look Look) (*built, error) {
	if lang != "" {
		if _, ok := cs[lang]; !ok {
			return nil, fmt.Errorf("the page's default language %q is not one it speaks (%s)", lang, strings.Join(cs.Languages(), ", "))
		}
	}
	files, err := assets.ReadDir(static, "static", assetTypes, pageFile)
	if err != nil {
		return nil, err
	}
	b := &built{assets: files, languages: cs.Languages()}
	js := assetTypes[".js"]
	for tag, c := range cs {
		// JSON is a JavaScript expression; json.Marshal escapes <, > and
		// & (and U+2028, U+2029), so the module is the catalogue and
		// nothing else.
		j, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		b.assets["i18n-"+tag+".js"] = assets.File{Body: []byte("export default " + string(j) + ";\n"), ContentType: js}
	}
	list, err := json.Marshal(b.languages)
	if err != nil {
		return nil, err
	}
	pref, err := json.Marshal(lang)
	if err != nil {
		return nil, err
	}
	b.assets[listModule] = assets.File{
		Body:        []byte("// The languages the page speaks, and the deployment's default (--page-language).\nexport const languages = " + string(list) + ";\nexport const preferred = " + string(pref) + ";\n"),
		ContentType: js,
	}
	lookJS, err := look.js()
	if err != nil {
		return nil, err
	}
	b.assets["look.js"] = assets.File{Body: []byte(lookJS), ContentType: js}
	b.assets["look.css"] = assets.File{Body: []byte(look.css()), ContentType: assetTypes[".css"]}
	b.served = assets.New(b.assets, assets.Options{Policy: assets.Versioned, Header: assetHeaders})
	b.version = b.served.Version()
	b.page = []byte(render(AssetPrefix+b.version, "", "", ""))
	b.script = []byte(renderEmbed(b.version, ""))
	return b, nil
}

// listModule is the generated module naming the languages.
const listModule = "i18n-list.js"

// renderEmbed fills embed.js's placeholders: where the assets are (under
// its own URL's directory, as served and as exported), the page's markup
// (its asset URLs made absolute by the script, which knows where it came
// from), and the API's base URL ("": where the script came from; an
// exported one names the API's).
func renderEmbed(version, apiBase string) string {
	m, err := json.Marshal(strings.ReplaceAll(markup, "{{ASSETS}}", "@@ASSETS@@"))
	if err != nil {
		panic("waitpage: " + err.Error())
	}
	api, err := json.Marshal(apiBase)
	if err != nil {
		panic("waitpage: " + err.Error())
	}
	return strings.NewReplacer(
		"{{ASSETS}}", "/waitpage/"+version,
		"{{MARKUP}}", string(m),
		"{{API}}", string(api),
	).Replace(embedLoader)
}

// render fills wait.html's placeholders: where the assets are, the
// Content-Security-Policy as a meta tag (an exported page's: a static host
// sends no header), and the API's base URL and the sale's id (an exported
// page's: served, the page talks to its own origin and reads the sale from
// its address). Every value is escaped for a double-quoted attribute.
func render(assets, csp, apiBase, saleID string) string {
	if csp != "" {
		csp = `<meta http-equiv="Content-Security-Policy" content="` + attr(csp) + "\">\n"
	}
	return strings.NewReplacer(
		"{{ASSETS}}", attr(assets),
		"{{CSP}}", csp,
		"{{API}}", attr(apiBase),
		"{{SALE}}", attr(saleID),
	).Replace(template)
}

var attrEscaper = strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;")

// attr escapes s for a double-quoted HTML attribute.
func attr(s string) string { return attrEscaper.Replace(s) }

// HandleFavicon answers GET /favicon.ico, the icon every browser asks each
// origin for (the waiting page's, the console's): none, said at once and
// kept for a day, rather than a 404 in the page's console on every visit.
func HandleFavicon(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=86400")
	c.Status(http.StatusNoContent)
}

// EmbedPath is the shop's script: <script src="https://flashline…/embed.js"
// data-sale="…">, the buy button on the shop's own page.
const EmbedPath = "/embed.js"

// HandleEmbed serves embed.js (GET and HEAD EmbedPath). It is revalidated on every load (it names
// the current asset version), and readable from any origin: a shop's page
// loads it, and the modules it imports, from another origin (module
// scripts are fetched with CORS). They are public files: nothing in them
// is anyone's.
func HandleEmbed(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/javascript; charset=utf-8", current.Load().script)
}

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	// The customer's token may be in the fragment; fragments are never sent
	// as a referrer, and no-referrer keeps the sale id in the path private too.
	h.Set("Referrer-Policy", "no-referrer")
}

// HandlePage serves the HTML (GET and HEAD /sales/{saleId}/wait). It is revalidated on every load (it names the
// current asset version); the sale id is read from the path by the script.
func HandlePage(c *gin.Context) {
	h := c.Writer.Header()
	securityHeaders(h)
	h.Set("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", current.Load().page)
}

// assetHeaders are the assets' headers: the page's, and any origin may
// read them (a shop's page, embed.js, imports the modules from another
// origin).
var assetHeaders = func() http.Header {
	h := http.Header{}
	securityHeaders(h)
	h.Set("Access-Control-Allow-Origin", "*")
	return h
}()

// HandleAsset serves a script or style sheet (GET and HEAD
// AssetPrefix{version}/{file}). The URL carries the content
// hash of all assets, so the current version is cached for a year; the
// modules' relative imports resolve under the same versioned path. A request
// naming another version (a page from an instance running other code, during
// a rolling deploy) still gets this instance's file, but uncached: such a
// page may load files of two versions, as its HTML and script could before
// the script was split; the next load, after the deploy, is whole again.
func HandleAsset(c *gin.Context) { current.Load().served.Serve(c) }
