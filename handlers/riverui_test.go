package handlers_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/postgres"
)

// TestRiverUIIsAdminOnly: River's UI has no auth of its own; the router puts
// it behind the admin token.
func TestRiverUIIsAdminOnly(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier("ui-secret", "ui-admin")
	require.NoError(t, err)
	lim, err := loadshed.New(loadshed.Options{})
	require.NoError(t, err)
	h := routes(t, handlers.Deps{
		Verifier: v, Limiter: lim, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Ready:   func(context.Context) error { return nil },
		RiverUI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("river ui")) }),
	})
	customer, err := auth.Mint("ui-secret", "alice", time.Hour, time.Time{})
	require.NoError(t, err)
	for _, tt := range []struct {
		name, token string
		status      int
	}{
		{"NoToken", "", http.StatusUnauthorized},
		{"Customer", customer, http.StatusForbidden},
		{"Admin", "ui-admin", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/admin/riverui/jobs", nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
		})
	}
}

// TestAdminSignIn: a browser signs in once with the admin token and holds
// an HTTP-only, SameSite=Strict cookie that opens River's UI and the admin
// routes (the console's), not /metrics; a change made with it on the
// console's routes must carry X-Flashline-Console.
func TestAdminSignIn(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier("ui-secret", "ui-admin-token")
	require.NoError(t, err)
	lim, err := loadshed.New(loadshed.Options{})
	require.NoError(t, err)
	h := routes(t, handlers.Deps{
		Verifier: v, Limiter: lim, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Ready:   func(context.Context) error { return nil },
		RiverUI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("river ui")) }),
	})
	do := func(method, path, cookie, body string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if cookie != "" {
			req.Header.Set("Cookie", "__Host-flashline_admin="+cookie)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	// A browser that is not signed in is sent to the sign-in page; an API
	// client is told 401.
	rec := do(http.MethodGet, "/admin/riverui/", "", "", "Accept", "text/html,application/xhtml+xml")
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/admin/login", rec.Header().Get("Location"))
	require.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/admin/riverui/api/jobs", "", "").Code)
	rec = do(http.MethodGet, "/admin/login", "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `<form method="post" action="/admin/login">`)

	rec = do(http.MethodPost, "/admin/login", "", "token=wrong")
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Empty(t, rec.Result().Cookies())

	rec = do(http.MethodPost, "/admin/login", "", "token=ui-admin-token")
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, "/admin/", rec.Header().Get("Location"))
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	// Served to example.com (not a loopback host): a __Host- cookie,
	// Secure, for the whole host.
	require.Equal(t, "__Host-flashline_admin", c.Name)
	require.True(t, c.HttpOnly)
	require.True(t, c.Secure)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/", c.Path)
	require.Equal(t, 12*3600, c.MaxAge)

	rec = do(http.MethodGet, "/admin/riverui/jobs", c.Value, "", "Accept", "text/html")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "river ui", rec.Body.String())
	// The metrics want the token; a change to a sale made with the cookie
	// wants the console's header too (a page of a sibling host sends none).
	require.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/metrics", c.Value, "").Code)
	require.Equal(t, http.StatusForbidden, do(http.MethodPost, "/admin/sales/sale_01J00000000000000000000000/pause", c.Value, "").Code)
	require.Equal(t, http.StatusForbidden, do(http.MethodPost, "/admin/sales/sale_01J00000000000000000000000/pause", c.Value, "", "Sec-Fetch-Site", "same-origin").Code)
	// A tampered or foreign cookie is no session.
	require.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/admin/riverui/api/jobs", c.Value+"x", "").Code)
	other, err := auth.NewVerifier("ui-secret", "another-admin-token")
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/admin/riverui/api/jobs", other.AdminSession(time.Now()), "").Code)
	require.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/admin/riverui/api/jobs", v.AdminSession(time.Now().Add(-13*time.Hour)), "").Code)

	rec = do(http.MethodPost, "/admin/logout", c.Value, "")
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Equal(t, -1, rec.Result().Cookies()[0].MaxAge)
}

// TestAdminCookieIsSameOriginAndEndsAtLogout: a change made with the admin's
// cookie, River UI's included, is let in only from a page of this origin
// (Sec-Fetch-Site: same-origin, or an Origin naming this host): a sibling
// host's page (same-site, text/plain, as issue 44 sent it) is refused.
// Every admin page refuses to be framed. Signing out ends the session on
// the server: a copy of the cookie is refused after. On a loopback host
// over plain HTTP the cookie is the development one (not Secure); over
// HTTPS, HSTS.
func TestAdminCookieIsSameOriginAndEndsAtLogout(t *testing.T) {
	t.Parallel()
	var cancelled atomic.Int64
	s := startServer(t, nil, func(d *handlers.Deps) {
		d.Sessions = d.Store.(*postgres.Store)
		d.Console = d.Store.(*postgres.Store)
		d.RiverUI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				cancelled.Add(1)
			}
			_, _ = w.Write([]byte("river ui"))
		})
	})
	login := s.serve(t, http.MethodPost, "/admin/login", "", "token="+adminToken, "Content-Type", "application/x-www-form-urlencoded")
	require.Equal(t, http.StatusSeeOther, login.Status)
	cookie := http.Header(login.Header).Get("Set-Cookie")
	require.True(t, strings.HasPrefix(cookie, "__Host-flashline_admin="), cookie)
	require.Contains(t, cookie, "Secure")
	cookie, _, _ = strings.Cut(cookie, ";")
	cancel := "/admin/riverui/api/jobs/cancel"
	body := `{"ids":["1"]}`

	for _, refused := range [][]string{
		{"Content-Type", "text/plain", "Sec-Fetch-Site", "same-site", "Origin", "https://shop.example.com"},
		{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"},
		{"Content-Type", "application/json", "Origin", "https://shop.example.com"},
		{"Content-Type", "application/json"}, // no word of where it comes from
		{"Content-Type", "application/json", "Origin", "null"},
	} {
		r := s.serve(t, http.MethodPost, cancel, "", body, append([]string{"Cookie", cookie}, refused...)...)
		require.Equal(t, http.StatusForbidden, r.Status, "%v", refused)
	}
	require.Zero(t, cancelled.Load())
	for _, allowed := range [][]string{
		{"Sec-Fetch-Site", "same-origin", "Origin", "http://example.com"},
		{"Origin", "http://example.com"}, // a browser without Fetch metadata
	} {
		r := s.serve(t, http.MethodPost, cancel, "", body, append([]string{"Cookie", cookie, "Content-Type", "application/json"}, allowed...)...)
		require.Equal(t, http.StatusOK, r.Status, "%v", allowed)
	}
	require.EqualValues(t, 2, cancelled.Load())
	// The bearer token is no cookie: no origin asked.
	require.Equal(t, http.StatusOK, s.serve(t, http.MethodPost, cancel, adminAuth, body).Status)

	// No admin page may be framed: River's, the console's, the sign-in.
	for _, path := range []string{"/admin/riverui/", "/admin/", "/admin/login"} {
		r := s.serve(t, http.MethodGet, path, "", "", "Cookie", cookie, "Accept", "text/html")
		require.Contains(t, r.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		require.Equal(t, "DENY", r.Header.Get("X-Frame-Options"), path)
		require.Empty(t, r.Header.Get("Strict-Transport-Security"), "plain HTTP: no HSTS")
	}
	r := s.serve(t, http.MethodGet, "/admin/riverui/", "", "", "Cookie", cookie, "X-Forwarded-Proto", "https")
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, r.Header.Get("Strict-Transport-Security"), "max-age=")

	// Signing out ends the session: the cookie kept by anyone is refused.
	require.Equal(t, http.StatusOK, s.serve(t, http.MethodGet, "/admin/riverui/", "", "", "Cookie", cookie).Status)
	out := s.serve(t, http.MethodPost, "/admin/logout", "", "", "Cookie", cookie)
	require.Equal(t, http.StatusSeeOther, out.Status)
	require.Equal(t, http.StatusUnauthorized, s.serve(t, http.MethodGet, "/admin/riverui/api/jobs", "", "", "Cookie", cookie).Status)
	require.Equal(t, http.StatusSeeOther, s.serve(t, http.MethodGet, "/admin/", "", "", "Cookie", cookie, "Accept", "text/html").Status)
	r = s.serve(t, http.MethodPost, cancel, "", body, "Cookie", cookie, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.EqualValues(t, 3, cancelled.Load(), "two changes from this origin and the bearer's")
}

// TestAdminCookieOnLoopback: served to a loopback host over plain HTTP
// (development), the cookie cannot be Secure, so it is not __Host- either;
// over HTTPS it is.
func TestAdminCookieOnLoopback(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier("ui-secret", "ui-admin-token")
	require.NoError(t, err)
	lim, err := loadshed.New(loadshed.Options{})
	require.NoError(t, err)
	h := routes(t, handlers.Deps{
		Verifier: v, Limiter: lim, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Ready: func(context.Context) error { return nil },
	})
	for host, want := range map[string]string{
		"127.0.0.1:8080": "flashline_admin", "localhost:8080": "flashline_admin", "[::1]:8080": "flashline_admin",
		"shop.example.com": "__Host-flashline_admin", "10.0.0.5:8080": "__Host-flashline_admin",
	} {
		req := httptest.NewRequest(http.MethodPost, "/admin/login", strings.NewReader("token=ui-admin-token"))
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		c := rec.Result().Cookies()
		require.Len(t, c, 1, host)
		require.Equal(t, want, c[0].Name, host)
		require.Equal(t, want != "flashline_admin", c[0].Secure, host)
	}
}
