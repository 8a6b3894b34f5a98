package handlers

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
)

// The admin's browser sign-in, for the console (console.go) and River's job
// UI: a browser cannot send the admin token as a bearer header, so it gives
// it once to POST /admin/login and holds an HTTP-only, SameSite=Strict
// session cookie, which the admin routes accept as well as the bearer token
// (/metrics excepted). The cookie is __Host-flashline_admin, Secure, for
// every host but a loopback one served over plain HTTP (development), where
// a browser would not keep a Secure cookie: a sibling host cannot set or
// shadow a __Host- cookie, and the admin token's session never crosses a
// network in clear. A change made with the cookie (any method but GET or
// HEAD) must come from a page of this origin (sameOrigin: Sec-Fetch-Site,
// else Origin), River's UI included: SameSite keeps other sites' requests
// from carrying the cookie, but a page on a sibling host of the same site
// sends it. The console's changes also carry X-Flashline-Console. Signing
// out ends the session on the server (AdminSessions): a copy of the cookie
// is refused from then on.

const (
	sessionCookie = "__Host-flashline_admin"
	// devSessionCookie is the cookie's name on a loopback host served over
	// plain HTTP, where it cannot be Secure (so not __Host-).
	devSessionCookie = "flashline_admin"
)

// AdminSessions records the admin sessions signed out (*postgres.Store).
type AdminSessions interface {
	EndAdminSession(ctx context.Context, id string, expires time.Time) error
	AdminSessionEnded(ctx context.Context, id string) (bool, error)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Flashline admin sign-in</title>
<style>body{font:16px system-ui,sans-serif;max-width:28em;margin:4em auto;padding:0 1em}
input,button{font:inherit;padding:.4em;width:100%;box-sizing:border-box;margin:.3em 0}
.err{color:#a00}</style></head>
<body><h1>Flashline admin</h1>
{{if .}}<p class="err">{{.}}</p>{{end}}
<form method="post" action="/admin/login">
<label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button>
</form>
<p>Signs this browser in to the console (<code>/admin/</code>) and the job UI (<code>/admin/riverui/</code>) for 12 hours.</p>
</body></html>
`))

func renderLogin(c *gin.Context, status int, message string) {
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Status(status)
	_ = loginPage.Execute(c.Writer, message)
}

// handleLoginPage is GET /admin/login.
func handleLoginPage(c *gin.Context) { renderLogin(c, http.StatusOK, "") }

// handleLogin is POST /admin/login: the admin token in a form field.
func handleLogin(v *auth.Verifier, now func() time.Time) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, 4<<10)
		if !v.IsAdmin(c.PostForm("token")) {
			renderLogin(c, http.StatusUnauthorized, "That is not the admin token.")
			return
		}
		setSession(c, v.AdminSession(now()), int(auth.AdminSessionTTL/time.Second))
		c.Redirect(http.StatusSeeOther, "/admin/")
	}
}

// handleLogout is POST /admin/logout: the cookie's session is ended on the
// server (sessions nil: only the browser's copy goes, tests only). It needs
// no same-origin proof: ending a session grants nothing.
func handleLogout(v *auth.Verifier, sessions AdminSessions, now func() time.Time, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if value, err := c.Cookie(cookieName(c.Request)); err == nil && sessions != nil {
			if s, ok := v.AdminSessionOf(value, now()); ok {
				if err := sessions.EndAdminSession(c.Request.Context(), s.ID, s.Expires); err != nil {
					writeError(c, logger, errors.Join(flashline.ErrOverloaded, err))
					return
				}
			}
		}
		setSession(c, "", -1)
		c.Redirect(http.StatusSeeOther, "/admin/login")
	}
}

func setSession(c *gin.Context, value string, maxAge int) {
	name := cookieName(c.Request)
	http.SetCookie(c.Writer, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: name == sessionCookie, SameSite: http.SameSiteStrictMode,
	})
}

// cookieName is the session cookie's name for the request: __Host- (and
// Secure) unless the host is a loopback one served over plain HTTP.
func cookieName(r *http.Request) string {
	if r.TLS == nil && r.Header.Get("X-Forwarded-Proto") != "https" && loopbackHost(r.Host) {
		return devSessionCookie
	}
	return sessionCookie
}

// loopbackHost reports whether host (with or without a port) names this
// machine: localhost or a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// sameOrigin reports whether the browser says the request comes from a page
// of this origin: Sec-Fetch-Site: same-origin, or (a browser that sends no
// Fetch metadata) an Origin whose host is the request's.
func sameOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// consoleHeader is the header a signed-in browser's changes carry.
const consoleHeader = "X-Flashline-Console"

// adminOrSession lets in the admin's bearer token or a signed-in browser;
// a browser that is not signed in is sent to the sign-in page. A change
// (not GET or HEAD) made with the cookie must come from this origin and,
// with needHeader, carry consoleHeader (River's UI, which sends no such
// header, has it off).
func adminOrSession(v *auth.Verifier, sessions AdminSessions, now func() time.Time, bearer gin.HandlerFunc, needHeader bool, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.GetHeader("Authorization") == "" {
			signedIn, err := hasSession(c, v, sessions, now())
			if err != nil {
				writeError(c, logger, errors.Join(flashline.ErrOverloaded, err))
				return
			}
			if signedIn {
				get := c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead
				if !get && (!sameOrigin(c.Request) || needHeader && c.GetHeader(consoleHeader) == "") {
					writeError(c, nil, flashline.ErrForbidden)
					return
				}
				c.Set(actorKey, flashline.Actor{Admin: true})
				c.Next()
				return
			}
		}
		if c.GetHeader("Authorization") == "" && c.Request.Method == http.MethodGet &&
			strings.Contains(c.GetHeader("Accept"), "text/html") {
			c.Redirect(http.StatusSeeOther, "/admin/login")
			c.Abort()
			return
		}
		bearer(c)
	}
}

// hasSession reports whether the request carries a live admin session that
// was not signed out.
func hasSession(c *gin.Context, v *auth.Verifier, sessions AdminSessions, now time.Time) (bool, error) {
	value, err := c.Cookie(cookieName(c.Request))
	if err != nil {
		return false, nil
	}
	s, ok := v.AdminSessionOf(value, now)
	if !ok {
		return false, nil
	}
	if sessions == nil {
		return true, nil
	}
	ended, err := sessions.AdminSessionEnded(c.Request.Context(), s.ID)
	return err == nil && !ended, err
}

// adminHeaders keeps every admin page out of frames (clickjacking), and
// tells a browser that reached the service over HTTPS to keep to it.
func adminHeaders(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, "/admin") {
		c.Header("Content-Security-Policy", "frame-ancestors 'none'")
		c.Header("X-Frame-Options", "DENY")
	}
	if c.Request.TLS != nil || c.GetHeader("X-Forwarded-Proto") == "https" {
		c.Header("Strict-Transport-Security", "max-age=31536000")
	}
	c.Next()
}
