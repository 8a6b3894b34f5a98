package roomtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/flashline/flashline/internal/memo"
)

// Limits on the keys that sign waiting-room tokens.
const (
	// MinSecretLen is the shortest key secret ParseKeyring accepts, in bytes.
	MinSecretLen = 32
	// MaxKeyIDLen is the longest key id (a token's "kid" header).
	MaxKeyIDLen = 16
)

// Keyring holds the keys that sign and verify waiting-room tokens. It signs
// with its first key and verifies with the key a token names in its "kid"
// header, so keys can be rotated: add the new key first, keep the old one
// until the tokens it signed have expired. A Keyring is safe for concurrent
// use and never changes once made; make one with ParseKeyring or
// DeriveKeyring.
type Keyring struct {
	keys []key // keys[0] signs
	// now is the clock ticket expiry is judged by; nil means time.Now.
	// Only tests set it.
	now func() time.Time
	// tickets remembers the tickets that verified, until they expire: a
	// waiter presents the same ticket on every status poll, and verifying
	// it (base64, JSON, HMAC) was most of what a poll cost. Shared by the
	// copies WithClock makes (same keys); each lookup judges expiry by its
	// own keyring's clock.
	tickets *memo.Tokens[Ticket]
}

type key struct {
	id     string
	secret []byte
	// header is the base64url JOSE header of the tokens this key signs:
	// {"alg":"HS256","kid":id,"typ":"JWT"}.
	header string
	// macs are HMAC-SHA256s keyed with secret (*keyMAC), reset before
	// each signature: a new one hashes the key's pads first, which on an
	// edge signing a crowd's tickets was a third of a signature's work.
	macs *sync.Pool
}

// keyMAC is a key's HMAC-SHA256 and room for its sum, which on the
// signer's stack went to the heap (hash.Hash's Sum is an interface call).
type keyMAC struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

func newKey(id string, secret []byte) key {
	return key{id: id, secret: secret, header: b64.EncodeToString(marshal(jwtHeader{Alg: algHS256, Kid: id, Typ: "JWT"})),
		macs: &sync.Pool{New: func() any { return &keyMAC{mac: hmac.New(sha256.New, secret)} }}}
}

// ParseKeyring parses "kid:secret[,kid:secret...]". A kid is 1-16 characters
// of [A-Za-z0-9_-]; a secret is everything after the kid's colon (it may
// contain colons but no comma), used as bytes as given, at least MinSecretLen (32) bytes.
// Whitespace around entries is trimmed. Errors name the entry and never quote
// a secret.
func ParseKeyring(spec string) (*Keyring, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New(`waitroom: keyring is empty (want "kid:secret[,kid:secret...]")`)
	}
	k := Keyring{tickets: memo.New[Ticket](0)}
	for i, entry := range strings.Split(spec, ",") {
		n := i + 1
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("waitroom: keyring entry %d is empty", n)
		}
		kid, secret, ok := strings.Cut(entry, ":")
		if !ok {
			// The entry is not quoted: it may be a secret missing its kid.
			return nil, fmt.Errorf(`waitroom: keyring entry %d is not "kid:secret"`, n)
		}
		if !validKeyID(kid) {
			return nil, fmt.Errorf("waitroom: keyring entry %d: key id must be 1-%d characters of [A-Za-z0-9_-]", n, MaxKeyIDLen)
		}
		if len(secret) < MinSecretLen {
			return nil, fmt.Errorf("waitroom: keyring entry %d (key %q): secret is %d bytes, want at least %d", n, kid, len(secret), MinSecretLen)
		}
		if _, dup := k.lookup(kid); dup {
			return nil, fmt.Errorf("waitroom: keyring entry %d: key id %q appears twice", n, kid)
		}
		k.keys = append(k.keys, newKey(kid, []byte(secret)))
	}
	return &k, nil
}

// DeriveKeyring returns a one-key keyring (kid "d1") whose key is
// HMAC-SHA256(secret, "flashline waitroom keys v1"), for setups that configure
// no waiting-room keys: secret is the service's JWT secret. Every instance
// with the same secret derives the same key, and the key reveals nothing
// about the secret.
func DeriveKeyring(secret string) *Keyring {
	m := hmac.New(sha256.New, []byte(secret))
	io.WriteString(m, "flashline waitroom keys v1")
	return &Keyring{keys: []key{newKey("d1", m.Sum(nil))}, tickets: memo.New[Ticket](0)}
}

// String lists the key ids, signing key first, and never a secret, so a
// Keyring that reaches a log or an error message leaks nothing.
func (k *Keyring) String() string {
	ids := make([]string, len(k.keys))
	for i, key := range k.keys {
		ids[i] = key.id
	}
	return "roomtoken.Keyring(" + strings.Join(ids, ",") + ")"
}

// GoString is String, for %#v.
func (k *Keyring) GoString() string { return k.String() }

// Uses reports whether secret is one of the keyring's secrets (in constant
// time): a waiting-room key that is also the JWT secret would let a ticket
// pass for a customer token, both being HS256 JWTs.
func (k *Keyring) Uses(secret string) bool {
	found := 0
	for _, key := range k.keys {
		found |= subtle.ConstantTimeCompare(key.secret, []byte(secret))
	}
	return found == 1
}

func (k *Keyring) lookup(kid string) (key, bool) {
	for _, key := range k.keys {
		if key.id == kid {
			return key, true
		}
	}
	return key{}, false
}

// WithClock returns a copy of k that judges ticket expiry by now (nil:
// time.Now): for serve's clock-skew test hook and tests.
func (k *Keyring) WithClock(now func() time.Time) *Keyring {
	c := *k
	c.now = now
	return &c
}

func (k *Keyring) clock() time.Time {
	if k.now != nil {
		return k.now()
	}
	return time.Now()
}

// validAlphabet reports whether s is made of [A-Za-z0-9_-] only: the
// base64url alphabet, which JSON never escapes.
func validAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isBase64URL(s[i]) {
			return false
		}
	}
	return true
}

func isBase64URL(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func validKeyID(kid string) bool {
	return len(kid) > 0 && len(kid) <= MaxKeyIDLen && validAlphabet(kid)
}
