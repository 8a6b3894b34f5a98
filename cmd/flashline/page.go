package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/flashline/flashline/waitroom/waitpage"
)

const pageUsage = `usage: flashline page export --sale SALE_ID --out DIR --edge URL [--force] [--check]
  write the waiting-room page of the sale as static files into DIR (which must
  exist, and be empty unless --force), for a CDN or any web server: index.html
  and its scripts and style sheet under waitpage/<version>/, with relative
  links. The page calls the API at URL (an edge or any flashline serve; it
  answers cross-origin requests), reads the sale's title, picture and opening
  time from it live, and when it cannot answer says "come back shortly" and
  tries again by itself. Customers open DIR's URL with #token=<their JWT>, as
  the served page. --check first asks URL for the sale's policy and refuses
  to export a sale it does not know. --page-translations, --page-language and
  --page-look are serve's: the store's words, the default language, its look.
`

// runPage is `flashline page export`.
func runPage(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprint(stderr, pageUsage)
		if len(args) == 0 {
			return errors.New("page: a subcommand is required (export)")
		}
		return fmt.Errorf("page: unknown subcommand %q", args[0])
	}
	e := newFlags("page export", getenv, stderr)
	e.FS.Usage = func() { fmt.Fprint(stderr, pageUsage); e.FS.PrintDefaults() }
	var saleID, out, edge string
	var force, check bool
	e.FS.StringVar(&saleID, "sale", "", "the sale whose page is exported (required)")
	e.FS.StringVar(&out, "out", "", "the directory the files are written to (required; must exist)")
	e.String(&edge, "edge", "FLASHLINE_EDGE_URL", "", "the API's base URL the page calls, http(s)://host[:port][/prefix] (required)")
	e.FS.BoolVar(&force, "force", false, "write into a directory that is not empty (the page's files are overwritten)")
	e.FS.BoolVar(&check, "check", false, "check first that the API at --edge knows the sale")
	var translations, language, look string
	e.pageFlags(&translations, &language, &look)
	if err := e.FS.Parse(args[1:]); err != nil {
		return err
	}
	switch {
	case e.FS.NArg() != 0:
		return fmt.Errorf("page export: unexpected argument %q", e.FS.Arg(0))
	case saleID == "" || out == "" || edge == "":
		fmt.Fprint(stderr, pageUsage)
		return errors.New("page export: --sale, --out and --edge are required")
	}
	base, _, err := waitpage.APIBase(edge)
	if err != nil {
		return fmt.Errorf("page export: --edge %w", err)
	}
	if strings.HasPrefix(base, "http://") {
		fmt.Fprintln(stderr, "flashline: note: --edge is http: a page served over https cannot call it (browsers block mixed content), and tokens travel in clear")
	}
	if check {
		title, err := checkSale(ctx, base, saleID)
		if err != nil {
			return fmt.Errorf("page export: --check: %w", err)
		}
		fmt.Fprintf(stdout, "sale %s: %s\n", saleID, title)
	}
	if err := waitpage.Configure(waitpage.Options{Translations: translations, Language: language, Look: look}); err != nil {
		return fmt.Errorf("page export: --page-translations, --page-language, --page-look: %w", err)
	}
	files, err := waitpage.Export(out, saleID, base, force)
	if err != nil {
		return fmt.Errorf("page export: %w", err)
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "wrote %s/%s\n", strings.TrimRight(out, "/"), f)
	}
	fmt.Fprintf(stdout, "the page calls %s for sale %s; open %s with #token=<customer JWT>\n", base, saleID, waitpage.ExportPage)
	return nil
}

// pageFlags are the waiting page's languages and look, serve's and page
// export's: a directory of the store's catalogues (<tag>.json, laid over
// the built-in ones), the language the page speaks to a browser that asks
// for none it has, and a file of the store's look.
func (e env) pageFlags(translations, language, look *string) {
	e.String(translations, "page-translations", "FLASHLINE_PAGE_TRANSLATIONS", "", "a directory of the waiting page's words, <tag>.json (de.json, pt-BR.json): a built-in language's file changes the messages it names, another language's adds it (every message); read and checked at start (docs/waiting-room.md)")
	e.String(look, "page-look", "FLASHLINE_PAGE_LOOK", "", "a JSON file of the store's look of the waiting page: logoUrl (https), logoAlt, colors (accent, accentText, background, panel, text, border: #rrggbb), font (a font-family list); checked at start (docs/waiting-room.md)")
	e.String(language, "page-language", "FLASHLINE_PAGE_LANGUAGE", "", "the language the waiting page speaks when the browser asks for none it has (before English): one of the built-in tags (en de fr es it pt-BR nl pl ja ko zh-CN ar) or --page-translations'")
}

// checkSale asks the API for the sale's policy and returns its title.
func checkSale(ctx context.Context, base, saleID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sales/"+saleID+"/policy", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	var v struct {
		Policy string `json:"policy"`
		Title  string `json:"title"`
		Error  struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &v)
	switch {
	case resp.StatusCode == http.StatusOK && v.Title != "":
		return v.Title, nil
	case resp.StatusCode == http.StatusOK:
		return "(" + v.Policy + ")", nil
	case v.Error.Code != "":
		return "", fmt.Errorf("%s answered %d %s for sale %s", base, resp.StatusCode, v.Error.Code, saleID)
	}
	return "", fmt.Errorf("%s answered %d for sale %s", base, resp.StatusCode, saleID)
}
