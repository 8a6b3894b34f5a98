package waitpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// messageOf is key's text in i18n/<tag>.json as written.
func messageOf(t *testing.T, tag, key string) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(readCatalogue(t, tag)[key], &s), "i18n/%s.json %s", tag, key)
	return s
}

// TestPageLanguages: the waiting page in the shopper's language, in
// Chromium against a real `flashline serve` started with a store's
// translations (--page-translations: one German word changed), a default
// language (--page-language ja) and the store's look (--page-look: its
// colours, font and logo, checked in every language). The language comes from ?lang=
// (en, ar, pl, and de-AT, which is German), else from the browser's
// languages (Accept-Language ko), else from the deployment's default (a
// browser asking for Swedish gets Japanese). Each time the page's texts are
// the catalogue's, <html> carries lang and dir, the opening time is written
// by Intl.DateTimeFormat in that language, a count's words take the form
// Intl.PluralRules picks, nothing overflows and nothing
// breaks the Content-Security-Policy; in Arabic the layout mirrors (dir
// rtl, a right-to-left computed direction, the figures from the right).
// FLASHLINE_PAGE_SCREENSHOTS=dir also writes waiting-<tag>.png there (the
// pictures of docs/waiting-room.md: docs/img), but Polish's.
func TestPageLanguages(t *testing.T) {
	if testing.Short() {
		t.Skip("drives headless Chromium against a flashline serve process: not in -short")
	}
	b := newBrowser(t) // first: without a browser, fail before a server is built
	dir := t.TempDir()
	const germanTitle = "Sie stehen an (Wort des Shops)"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "de.json"), []byte(`{"waiting.title": "`+germanTitle+`"}`), 0o644))
	// The store's look: its colours, fonts and logo (which cannot load
	// here: no https server the browser trusts; the page still names it).
	look := filepath.Join(t.TempDir(), "look.json")
	require.NoError(t, os.WriteFile(look, []byte(`{"logoUrl":"https://shop.example/komorebi.svg","logoAlt":"Komorebi",
		"colors":{"accent":"#b4441f","accentText":"#ffffff","background":"#fbf7f2","panel":"#ffffff","text":"#2b2118"},
		"font":"Georgia, \"DejaVu Serif\", serif"}`), 0o644))
	srv := testserver.Start(t, testdb.New(t), "--page-translations", dir, "--page-language", "ja", "--page-look", look)
	c := testserver.NewClient()
	opensAt := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	saleID := c.CreateSale(t, srv.URL, fmt.Sprintf(`{"sku":"sku_lang","title":"Komorebi sneakers","initialStock":50,"perCustomerLimit":1,`+
		`"reservationTtlSeconds":600,"opensAt":%q,"admission":"waiting_room","fairness":"randomized_at_open"}`, opensAt))
	// A few shoppers ahead, so that the place is a number worth writing.
	for i := range 3 {
		r, err := c.Do(context.Background(), "GET", srv.URL+"/sales/"+saleID+"/ticket", testserver.Token(t, fmt.Sprintf("ahead-%d", i)), "")
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Body)
	}
	waitURL := srv.URL + "/sales/" + saleID + "/wait"
	userAgent := ""

	// acceptLanguage makes the browser ask for langs (navigator.languages
	// and Accept-Language).
	acceptLanguage := func(langs string) {
		t.Helper()
		b.do("accept "+langs, 10*time.Second, func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: userAgent, AcceptLanguage: langs})
			return chromedp.Void{}, err
		})
	}
	// check opens the page at url and checks it speaks tag, direction dir.
	check := func(url, tag, dir string) {
		t.Helper()
		// The page before may keep its status stream open until the server
		// sees it closed, which on a busy machine took long enough that the
		// fourth language's page was answered 429 while each stream held one
		// of the customer's four requests in flight. A stream now holds one
		// only until its first answer (handlers' TestStreamsPerCustomer):
		// the pages open one after the other with nothing waited for.
		b.do("open "+url, 30*time.Second, chromedp.Navigate(url))
		b.waitState(30*time.Second, "waiting")
		got := eval[[]string](b, `[document.documentElement.lang, document.documentElement.dir, document.getElementById("app").lang, document.getElementById("app").dir, getComputedStyle(document.getElementById("app")).direction]`)
		if want := []string{tag, dir, tag, dir, dir}; strings.Join(got, " ") != strings.Join(want, " ") {
			b.fail("%s: (html lang, html dir, main lang, main dir, computed direction) = %v, want %v", url, got, want)
		}
		text := func(js string) string { t.Helper(); return strings.TrimSpace(eval[string](b, js)) }
		wantTitle := messageOf(t, tag, "waiting.title")
		if tag == "de" {
			wantTitle = germanTitle
		}
		for js, want := range map[string]string{
			`document.querySelector("#state-waiting h2").textContent`: wantTitle,
			`document.querySelector("#state-waiting dt").textContent`: messageOf(t, tag, "waiting.position"),
			`document.querySelector("#policy-box h2").textContent`:    messageOf(t, tag, "policy.title"),
			`document.querySelector(".kicker").textContent`:           messageOf(t, tag, "header.kicker"),
			`document.getElementById("product-title").textContent`:    "Komorebi sneakers",
			`document.title`: strings.ReplaceAll(messageOf(t, tag, "page.titleWithProduct"), "{title}", "Komorebi sneakers"),
		} {
			if got := text(js); got != want {
				b.fail("%s: %s is %q, want %q", url, js, got, want)
			}
		}
		// The opening time, by Intl in the page's language; the place, a
		// number in its digits.
		if got, want := text(`document.getElementById("opens-at").textContent`),
			text(`new Intl.DateTimeFormat(document.documentElement.lang, {weekday: "long", day: "numeric", month: "long", year: "numeric", hour: "numeric", minute: "2-digit", timeZoneName: "long"}).format(new Date(document.getElementById("opens-at").dateTime))`); got != want || got == "" {
			b.fail("%s: the opening reads %q, want %q", url, got, want)
		}
		if p := text(`document.getElementById("position").textContent`); p == "" || p == "—" {
			b.fail("%s: no place shown", url)
		}
		// The figures, place then wait, from the start of the line: from
		// the left, or from the right in a right-to-left language.
		lefts := eval[[]float64](b, `Array.from(document.querySelectorAll("#state-waiting .figures > div")).map(function (d) { return d.getBoundingClientRect().left; })`)
		if len(lefts) != 2 || (dir == "ltr") != (lefts[0] < lefts[1]) {
			b.fail("%s: the figures' left edges are %v, in a %s page", url, lefts, dir)
		}
		// A count's words: the form Intl.PluralRules picks for the
		// language, the number written by Intl.NumberFormat (Polish: 2
		// próby, 5 prób; Arabic: its six forms).
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		counts, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`import(document.querySelector('script[type="module"]').src.replace(/wait\.js$/, "i18n.js")).then(function (m) {
			var lang = document.documentElement.lang;
			return [0, 1, 2, 3, 5, 11, 22, 100, 1234567].map(function (n) {
				return [new Intl.PluralRules(lang).select(n), new Intl.NumberFormat(lang).format(n), m.t("challenge.tries", {n: n})];
			});
		})`, chromedp.EvalAwaitPromise))
		cancel()
		if err != nil {
			b.fail("%s: the page's plural forms: %v", url, err)
		}
		require.Len(t, counts, 9, "%s: the page's plural forms", url)
		t.Logf("%s: %q", tag, counts)
		var forms map[string]string
		require.NoError(t, json.Unmarshal(readCatalogue(t, tag)["challenge.tries"], &forms))
		for _, c := range counts {
			form, ok := forms[c[0]]
			if !ok {
				form = forms["other"]
			}
			if want := strings.ReplaceAll(form, "{n}", c[1]); c[2] != want {
				b.fail("%s: %s (%s) tries reads %q, want %q", url, c[1], c[0], c[2], want)
			}
		}
		// The store's look, in every language.
		style := eval[[]string](b, `[getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color, getComputedStyle(document.getElementById("pay")).backgroundColor, getComputedStyle(document.body).fontFamily, document.getElementById("store-logo").getAttribute("src"), document.getElementById("store-logo").alt]`)
		if want := []string{"rgb(251, 247, 242)", "rgb(43, 33, 24)", "rgb(180, 68, 31)", `Georgia, "DejaVu Serif", serif`, "https://shop.example/komorebi.svg", "Komorebi"}; strings.Join(style, "|") != strings.Join(want, "|") {
			b.fail("%s: the store's look: (background, text, Pay, font, logo, its text) = %q, want %q", url, style, want)
		}
		b.noHorizontalScroll(tag)
		name := "waiting-" + tag + ".png"
		b.screenshot(name)
		if out := os.Getenv("FLASHLINE_PAGE_SCREENSHOTS"); out != "" && tag != "pl" {
			png, err := os.ReadFile(filepath.Join(screenshotDir, name))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(out, name), png, 0o644))
		}
	}

	// English, asked for: the link's token taken, in English.
	b.do("open the page", 30*time.Second, chromedp.Navigate(waitURL+"?lang=en#token="+testserver.Token(t, "polyglot")))
	b.adoptLinkToken()
	userAgent = eval[string](b, `navigator.userAgent`)
	acceptLanguage("sv-SE,sv")
	check(waitURL+"?lang=en", "en", "ltr")
	check(waitURL+"?lang=ar", "ar", "rtl")
	check(waitURL+"?lang=de-AT", "de", "ltr")
	check(waitURL+"?lang=pl", "pl", "ltr")
	// No ?lang=: the browser's languages, then the deployment's default.
	check(waitURL, "ja", "ltr")
	acceptLanguage("ko-KR,ko;q=0.9,en;q=0.5")
	if got := eval[string](b, `navigator.languages.join(",")`); !strings.HasPrefix(got, "ko") {
		t.Logf("navigator.languages is %q", got)
	}
	check(waitURL, "ko", "ltr")

	// The buy button on a shop's page (another origin) that asks for
	// Arabic (data-lang): its shadow root speaks it, right to left; the
	// shop's own page keeps its language, direction and title.
	quotedJWT, err := json.Marshal(testserver.Token(t, "shopper-ar"))
	require.NoError(t, err)
	html := strings.NewReplacer("{{JWT}}", string(quotedJWT), "{{FLASHLINE}}", srv.URL, "{{SALE}}", saleID,
		`data-target="#drop"`, `data-target="#drop" data-lang="ar"`).Replace(shopPage)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	}))
	t.Cleanup(shop.Close)
	b.do("open the shop's page", 30*time.Second, chromedp.Navigate(shop.URL+"/products/komorebi"))
	deadline := time.Now().Add(30 * time.Second)
	for eval[string](b, "("+in(`root.getElementById("app").dataset.state`)+`) || ""`) != "waiting" {
		if time.Now().After(deadline) {
			b.fail("the button is not waiting in line")
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := eval[[]string](b, in(`[root.getElementById("app").lang, root.getElementById("app").dir, getComputedStyle(root.getElementById("app")).direction, root.querySelector("#state-waiting h2").textContent, document.documentElement.lang, document.documentElement.dir, document.title]`))
	want := []string{"ar", "rtl", "rtl", messageOf(t, "ar", "waiting.title"), "en", "", "Trail shop"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		b.fail("the button: (lang, dir, direction, title; the shop's lang, dir, title) = %q, want %q", got, want)
	}

	if bad := b.policyViolations(); len(bad) > 0 {
		t.Errorf("waitpage: the page threw or broke its Content-Security-Policy:\n%s", strings.Join(bad, "\n"))
	}
}
