package testbrowser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Names are the binaries looked for on PATH, in order (the Makefile's
// CHROMIUM_NAMES).
var Names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Path is the first of Names on PATH, or "".
func Path() string {
	for _, name := range Names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Start starts a headless Chromium with a window of width x height and one
// tab, runs first in it, and returns the tab's context; both end with the
// test. The first action starts the browser, which lives as long as the
// context of that action: it must be the tab's own, not one with a timeout,
// so a watchdog bounds the start (60 s) instead.
func Start(t testing.TB, width, height int, first ...chromedp.Action[chromedp.Void]) context.Context {
	t.Helper()
	path := Path()
	if path == "" {
		t.Fatal("testbrowser: no Chromium on PATH (chromium, chromium-browser, google-chrome): run 'make chromium', which installs Debian's chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(width, height), chromedp.DisableGPU)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses its sandbox as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	watchdog := time.AfterFunc(60*time.Second, cancel)
	err := chromedp.Do(ctx, first...)
	if !watchdog.Stop() {
		t.Fatalf("testbrowser: Chromium did not start within 60 s: %v", err)
	}
	if err != nil {
		t.Fatalf("testbrowser: start Chromium: %v", err)
	}
	return ctx
}
