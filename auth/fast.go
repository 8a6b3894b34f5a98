package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/flashline/flashline"
)

// FastMax is the longest token FastCustomer decides: a customer token is a
// few hundred bytes.
const FastMax = 1024

// Scratch is the room FastCustomer decodes a token into; the caller keeps
// it for as long as it uses the id it was given.
type Scratch struct {
	in, out [FastMax]byte
	sum     [sha256.Size]byte
}

// Buf is room the caller may use once it is done with the id (the front
// door reads a request's body into it).
func (s *Scratch) Buf() []byte { return s.in[:] }

// hs256Header is the header every HS256 token minted by Mint has, and most
// libraries write ({"alg":"HS256","typ":"JWT"}), encoded.
var hs256Header = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// FastCustomer is Customer for the answers that must cost least (a refusal
// at the front door, handlers/frontdoor.go): it decides a token without
// allocating, and ok false means only that it did not decide: the caller
// asks Customer, which accepts or refuses the token as always. It decides
// only what it can judge exactly as Customer would: a token verified
// before (the memo: a provider's token too, once Customer verified it), or,
// when HS256 tokens are accepted with nothing more to check (no issuer,
// audience or age), one with the header Mint writes, a valid HS256
// signature, and claims of the plainest JSON (keys of lower-case ASCII,
// strings without escapes, integers, nothing nested, no key twice), sub
// 1-128 characters of text, exp required and not passed (with the leeway),
// nbf and iat passed if present (with the leeway), all three within ±2^53 s
// (maxFastTime). The id it returns may be a view of s, good only
// until s is used again: to be compared, never kept (strings.Clone it to
// keep it). It never accepts a token Customer refuses, nor names another
// customer (FuzzFastCustomerAgrees).
func (v *Verifier) FastCustomer(token string, s *Scratch, now time.Time) (id string, ok bool) {
	if c, ok := v.verified.Get(token, now); ok {
		return c.ID, true
	}
	if !v.fastHS || len(token) > FastMax {
		return "", false
	}
	head, rest, ok1 := strings.Cut(token, ".")
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || head != hs256Header || strings.IndexByte(sig, '.') >= 0 {
		return "", false
	}
	// The signature, over header.payload (copied first: the hash and the
	// decoder take bytes, and a conversion would allocate).
	signed := copy(s.in[:], token[:len(head)+1+len(payload)])
	h := v.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(s.in[:signed])
	mac := h.Sum(s.sum[:0])
	v.macs.Put(h)
	k := copy(s.in[:], sig)
	n, err := base64.RawURLEncoding.Decode(s.out[:], s.in[:k])
	if err != nil || !hmac.Equal(mac, s.out[:n]) {
		return "", false
	}
	k = copy(s.in[:], payload)
	n, err = base64.RawURLEncoding.Decode(s.out[:], s.in[:k])
	if err != nil {
		return "", false
	}
	c, ok := plainClaims(s.out[:n])
	if !ok || !c.hasExp || !fastTime(c.exp) || !now.Before(time.Unix(c.exp, 0).Add(leeway)) ||
		!fastPassed(c.hasNbf, c.nbf, now) || !fastPassed(c.hasIat, c.iat, now) {
		return "", false
	}
	if r := utf8.RuneCount(c.sub); r == 0 || r > MaxSubjectLen || !flashline.ValidTextBytes(c.sub) {
		return "", false
	}
	// A view, not a copy: the caller compares it and lets it go.
	return unsafe.String(unsafe.SliceData(c.sub), len(c.sub)), true
}

// maxFastTime bounds the exp and nbf FastCustomer judges itself: within it
// (about 285 million years either side of 1970) golang-jwt's reading (the
// number as a float64, then time.Unix) and FastCustomer's (time.Unix of the
// int64) are the same instant. Past it they part: time.Unix overflows for a
// number near the int64 limit (an nbf of 9223371974719179263 came out in the
// past, and FastCustomer accepted what Customer refuses as not valid yet),
// and the float64 rounds. Such a token is left to Customer.
const maxFastTime = 1 << 53

// fastTime says whether FastCustomer may judge the time n (seconds since
// 1970) itself.
func fastTime(n int64) bool { return -maxFastTime <= n && n <= maxFastTime }

// fastPassed says whether an nbf or iat claim (has: present; n: its
// value) lets the token be used at now, as golang-jwt judges it (now +
// leeway not before it), and FastCustomer may judge it.
func fastPassed(has bool, n int64, now time.Time) bool {
	return !has || (fastTime(n) && !now.Add(leeway).Before(time.Unix(n, 0)))
}

type plain struct {
	sub                    []byte
	exp, nbf, iat          int64
	hasExp, hasNbf, hasIat bool
}

// plainClaims reads a JSON object of the plainest kind: keys of lower-case
// ASCII letters, digits and '_' (encoding/json matches a struct's fields
// regardless of case, even Unicode's: "SUB" and "ſub" are "sub" to it),
// strings without escapes, integers, nothing nested, no key twice
// (encoding/json would take the last). The claims' own keys must have
// their types: sub, iss, jti strings; exp, nbf, iat, acct_created
// integers; aud a string. Anything else is not decided (ok false), nor is a
// token with payment_instrument (Customer normalises it, and refuses one it
// cannot count).
func plainClaims(b []byte) (c plain, ok bool) {
	var seen [12][]byte // more keys than that is not plain
	nseen := 0
	haveSub := false
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return c, false
	}
	i = skipSpace(b, i+1)
	for {
		key, j, ok := plainString(b, i)
		if !ok || !plainKey(key) || nseen == len(seen) {
			return c, false
		}
		for _, k := range seen[:nseen] {
			if bytes.Equal(k, key) {
				return c, false
			}
		}
		seen[nseen] = key
		nseen++
		j = skipSpace(b, j)
		if j >= len(b) || b[j] != ':' {
			return c, false
		}
		j = skipSpace(b, j+1)
		if j < len(b) && b[j] == '"' {
			val, k, ok := plainString(b, j)
			if !ok {
				return c, false
			}
			switch string(key) {
			case "sub":
				c.sub, haveSub = val, true
			case "exp", "nbf", "iat", "acct_created", "payment_instrument":
				return c, false
			}
			j = k
		} else {
			n, k, ok := plainInt(b, j)
			if !ok {
				return c, false // true, false, null, a float, an object, an array
			}
			switch string(key) {
			case "sub", "iss", "jti", "aud", "payment_instrument":
				return c, false
			case "exp":
				c.exp, c.hasExp = n, true
			case "nbf":
				c.nbf, c.hasNbf = n, true
			case "iat":
				c.iat, c.hasIat = n, true
			}
			j = k
		}
		j = skipSpace(b, j)
		if j >= len(b) {
			return c, false
		}
		if b[j] == '}' {
			return c, haveSub && skipSpace(b, j+1) == len(b)
		}
		if b[j] != ',' {
			return c, false
		}
		i = skipSpace(b, j+1)
	}
}

func plainKey(k []byte) bool {
	if len(k) == 0 {
		return false
	}
	for _, ch := range k {
		if (ch < 'a' || ch > 'z') && (ch < '0' || ch > '9') && ch != '_' {
			return false
		}
	}
	return true
}

// plainInt reads a JSON integer (no fraction, no exponent, no leading
// zero) that fits an int64, starting at b[i].
func plainInt(b []byte, i int) (n int64, next int, ok bool) {
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		d := int64(b[j] - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, 0, false
		}
		n = n*10 + d
		j++
	}
	if j == start || (b[start] == '0' && j-start > 1) {
		return 0, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	if neg {
		n = -n
	}
	return n, j, true
}

// plainString reads a JSON string of valid UTF-8 without escapes starting
// at b[i] ('"'): its content, and the index after its closing quote.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch ch := b[j]; {
		case ch == '"':
			if !utf8.Valid(b[i+1 : j]) {
				return nil, 0, false
			}
			return b[i+1 : j], j + 1, true
		case ch == '\\' || ch < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// macPool makes the Verifier's HMACs, one per goroutine that needs one at
// a time.
func macPool(secret []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}
}
