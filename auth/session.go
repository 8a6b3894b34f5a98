package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Admin sessions let a browser use the admin's pages (River's job UI), which
// cannot send a bearer header: after the admin token is given once, a
// cookie holds "expiry.mac", the MAC keyed by the admin token itself, so
// changing the token ends every session and nothing is stored.

// AdminSessionTTL is how long an admin session lasts.
const AdminSessionTTL = 12 * time.Hour

// maxSessionLen bounds a session cookie's value before any work is done.
const maxSessionLen = 128

// AdminSession returns a session value that expires AdminSessionTTL after
// now.
func (v *Verifier) AdminSession(now time.Time) string {
	exp := strconv.FormatInt(now.Add(AdminSessionTTL).Unix(), 10)
	return exp + "." + v.sessionMAC(exp)
}

// IsAdminSession reports whether value is an admin session that has not
// expired at now.
func (v *Verifier) IsAdminSession(value string, now time.Time) bool {
	if len(value) > maxSessionLen {
		return false
	}
	exp, mac, ok := strings.Cut(value, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= unix || unix > now.Add(AdminSessionTTL).Unix() {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(v.sessionMAC(exp)))
}

func (v *Verifier) sessionMAC(exp string) string {
	m := hmac.New(sha256.New, v.adminHash[:])
	m.Write([]byte("flashline admin session\n" + exp))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
