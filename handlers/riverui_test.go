package handlers_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
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
			req.Header.Set("Cookie", "flashline_admin="+cookie)
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
	require.Equal(t, "flashline_admin", c.Name)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/admin/", c.Path)
	require.Equal(t, 12*3600, c.MaxAge)

	rec = do(http.MethodGet, "/admin/riverui/jobs", c.Value, "", "Accept", "text/html")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "river ui", rec.Body.String())
	// The metrics want the token; a change to a sale made with the cookie
	// wants the console's header too (a page of a sibling host sends none).
	require.Equal(t, http.StatusUnauthorized, do(http.MethodGet, "/metrics", c.Value, "").Code)
	require.Equal(t, http.StatusForbidden, do(http.MethodPost, "/admin/sales/sale_01J00000000000000000000000/pause", c.Value, "").Code)
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
