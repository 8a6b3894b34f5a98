package handlers

import (
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/auth"
)

// The admin's browser sign-in, for the console (console.go) and River's job
// UI: a browser cannot send the admin token as a bearer header, so it gives
// it once to POST /admin/login and holds an HTTP-only, SameSite=Strict
// session cookie scoped to /admin/, which the admin routes accept as well as
// the bearer token (/metrics excepted). A change made with the cookie (any
// method but GET) on the console's routes must also carry the header
// X-Flashline-Console, which a page of another origin cannot send without a
// CORS preflight the admin routes never answer: SameSite keeps other sites'
// requests from carrying the cookie, the header keeps a page on a sibling
// host of the same site from doing so.

const sessionCookie = "flashline_admin"

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

// handleLogout is POST /admin/logout.
func handleLogout(c *gin.Context) {
	setSession(c, "", -1)
	c.Redirect(http.StatusSeeOther, "/admin/login")
}

func setSession(c *gin.Context, value string, maxAge int) {
	secure := c.Request.TLS != nil || c.GetHeader("X-Forwarded-Proto") == "https"
	http.SetCookie(c.Writer, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/admin/", MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	})
}

// consoleHeader is the header a signed-in browser's changes carry.
const consoleHeader = "X-Flashline-Console"

// adminOrSession lets in the admin's bearer token or a signed-in browser;
// a browser that is not signed in is sent to the sign-in page. With
// needHeader, a change (not GET or HEAD) made with the cookie must carry
// consoleHeader (River's UI, which sends no such header, has it off).
func adminOrSession(v *auth.Verifier, now func() time.Time, bearer gin.HandlerFunc, needHeader bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if cookie, err := c.Cookie(sessionCookie); err == nil && c.GetHeader("Authorization") == "" && v.IsAdminSession(cookie, now()) {
			get := c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead
			if needHeader && !get && c.GetHeader(consoleHeader) == "" {
				writeError(c, nil, flashline.ErrForbidden)
				return
			}
			c.Set(actorKey, flashline.Actor{Admin: true})
			c.Next()
			return
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
