package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Admin sessions let a browser use the admin's pages (River's job UI), which
// cannot send a bearer header: after the admin token is given once, a
// cookie holds "expiry.id.mac", the MAC keyed by the admin token itself, so
// changing the token ends every session. The id names the session so that
// signing out ends it on the server (handlers record the ids ended until
// their expiry); nothing is stored for a live session.

// AdminSessionTTL is how long an admin session lasts.
const AdminSessionTTL = 12 * time.Hour

// maxSessionLen bounds a session cookie's value before any work is done.
const maxSessionLen = 128

// Session is an admin session a cookie holds.
type Session struct {
	ID      string
	Expires time.Time
}

// AdminSession returns a new session value that expires AdminSessionTTL
// after now.
func (v *Verifier) AdminSession(now time.Time) string {
	exp := strconv.FormatInt(now.Add(AdminSessionTTL).Unix(), 10)
	id := make([]byte, 16)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	body := exp + "." + base64.RawURLEncoding.EncodeToString(id)
	return body + "." + v.sessionMAC(body)
}

// AdminSessionOf returns the session value names when it is an admin
// session that has not expired at now.
func (v *Verifier) AdminSessionOf(value string, now time.Time) (Session, bool) {
	if len(value) > maxSessionLen {
		return Session{}, false
	}
	i := strings.LastIndexByte(value, '.')
	if i < 0 {
		return Session{}, false
	}
	body, mac := value[:i], value[i+1:]
	exp, id, ok := strings.Cut(body, ".")
	if !ok || id == "" {
		return Session{}, false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= unix || unix > now.Add(AdminSessionTTL).Unix() {
		return Session{}, false
	}
	if !hmac.Equal([]byte(mac), []byte(v.sessionMAC(body))) {
		return Session{}, false
	}
	return Session{ID: id, Expires: time.Unix(unix, 0)}, true
}

// IsAdminSession reports whether value is an admin session that has not
// expired at now (whether it was ended is the handlers' to ask).
func (v *Verifier) IsAdminSession(value string, now time.Time) bool {
	_, ok := v.AdminSessionOf(value, now)
	return ok
}

func (v *Verifier) sessionMAC(body string) string {
	m := hmac.New(sha256.New, v.adminHash[:])
	m.Write([]byte("flashline admin session\n" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
