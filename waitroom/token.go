package waitroom

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Token errors. Parse and Check wrap them with what was wrong; match them with
// errors.Is. All of them mean 403 admission_invalid (or a fresh ticket) to a
// client.
var (
	ErrMalformed              = errors.New("malformed token")
	ErrBadSignature           = errors.New("bad token signature")
	ErrUnknownKey             = errors.New("token signed with an unknown key")
	ErrWrongKind              = errors.New("wrong kind of token")
	ErrAdmissionExpired       = errors.New("admission token expired")
	ErrAdmissionOtherSale     = errors.New("admission token is for another sale")
	ErrAdmissionOtherCustomer = errors.New("admission token is for another customer")
)

// Limits on tokens and on the keys that sign them.
const (
	// MaxTokenLen is the longest token Parse looks at; it is checked before
	// any decoding. Every ticket and admission that passes Parse's checks signs
	// to a token within it (see MaxIDLen).
	MaxTokenLen = 1024
	// MaxIDLen is the longest sale, customer or admission id a token may
	// carry, in bytes. It is counted in bytes, not characters, so that the
	// longest valid ticket or admission is known to fit in MaxTokenLen.
	MaxIDLen = 128
	// MinSecretLen is the shortest key secret ParseKeyring accepts, in bytes.
	MinSecretLen = 32
	// MaxKeyIDLen is the longest key id.
	MaxKeyIDLen = 16
)

// Token kinds: the first field of a token, covered by its MAC, so a ticket can
// never be presented as an admission token or the other way round.
const (
	kindTicket    = "t1"
	kindAdmission = "a1"
)

// sigLen is the length of a token's MAC (HMAC-SHA256) before encoding.
const sigLen = sha256.Size

// b64 is the encoding of a token's payload and MAC. Strict refuses encodings
// whose unused trailing bits are not zero, so each payload and MAC has exactly
// one spelling and a token cannot be altered without failing to parse.
var b64 = base64.RawURLEncoding.Strict()

// Bounds on the times a token may carry: years 2000 to 2200.
var (
	minUnix = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxUnix = time.Date(2201, 1, 1, 0, 0, 0, 0, time.UTC).Unix() - 1
)

// Keyring holds the keys that sign and verify waiting-room tokens. It signs
// with its first key and verifies with any of them, so keys can be rotated:
// add the new key first, keep the old one until the tokens it signed have
// expired. A Keyring is safe for concurrent use and never changes once made;
// make one with ParseKeyring or DeriveKeyring.
type Keyring struct {
	keys []key // keys[0] signs
}

type key struct {
	id     string
	secret []byte
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
	var k Keyring
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
		k.keys = append(k.keys, key{id: kid, secret: []byte(secret)})
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
	return &Keyring{keys: []key{{id: "d1", secret: m.Sum(nil)}}}
}

// String lists the key ids, signing key first, and never a secret, so a
// Keyring that reaches a log or an error message leaks nothing.
func (k *Keyring) String() string {
	ids := make([]string, len(k.keys))
	for i, key := range k.keys {
		ids[i] = key.id
	}
	return "waitroom.Keyring(" + strings.Join(ids, ",") + ")"
}

// GoString is String, for %#v.
func (k *Keyring) GoString() string { return k.String() }

func (k *Keyring) lookup(kid string) (key, bool) {
	for _, key := range k.keys {
		if key.id == kid {
			return key, true
		}
	}
	return key{}, false
}

func (key key) mac(msg []byte) []byte {
	m := hmac.New(sha256.New, key.secret)
	m.Write(msg)
	return m.Sum(make([]byte, 0, sigLen))
}

// sign returns kind "." kid "." base64url(payload) "." base64url(MAC), the MAC
// taken with the signing key over everything before its dot.
func (k *Keyring) sign(kind string, payload []byte) string {
	key := k.keys[0]
	b := make([]byte, 0, len(kind)+len(key.id)+b64.EncodedLen(len(payload))+b64.EncodedLen(sigLen)+3)
	b = append(b, kind...)
	b = append(b, '.')
	b = append(b, key.id...)
	b = append(b, '.')
	b = b64.AppendEncode(b, payload)
	mac := key.mac(b)
	b = append(b, '.')
	b = b64.AppendEncode(b, mac)
	return string(b)
}

// open checks a token's size, format, kind, key and MAC, in that order, and
// returns its payload, not yet decoded: nothing an attacker wrote is decoded
// before the MAC has been checked.
func (k *Keyring) open(kind, token string) ([]byte, error) {
	if len(token) > MaxTokenLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxTokenLen)
	}
	// Only the base64url alphabet and the dots: base64 decoding skips \r and
	// \n, which would otherwise give one token several spellings.
	for i := 0; i < len(token); i++ {
		if !isTokenByte(token[i]) {
			return nil, fmt.Errorf("%w: unexpected character at byte %d", ErrMalformed, i)
		}
	}
	gotKind, rest, ok1 := strings.Cut(token, ".")
	kid, rest, ok2 := strings.Cut(rest, ".")
	payloadB64, sigB64, ok3 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ok3 || strings.Contains(sigB64, ".") {
		return nil, fmt.Errorf("%w: want 4 dot-separated fields", ErrMalformed)
	}
	if gotKind != kind {
		if gotKind == kindTicket || gotKind == kindAdmission {
			return nil, fmt.Errorf("%w: %s, want %s", ErrWrongKind, kindName(gotKind), kindName(kind))
		}
		return nil, fmt.Errorf("%w: unknown kind", ErrMalformed)
	}
	if !validKeyID(kid) {
		return nil, fmt.Errorf("%w: bad key id", ErrMalformed)
	}
	key, ok := k.lookup(kid)
	if !ok {
		return nil, fmt.Errorf("%w: key id %q", ErrUnknownKey, kid)
	}
	if len(sigB64) != b64.EncodedLen(sigLen) {
		return nil, fmt.Errorf("%w: signature is not %d characters", ErrMalformed, b64.EncodedLen(sigLen))
	}
	sig, err := b64.DecodeString(sigB64)
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	signed := token[:len(token)-len(sigB64)-1]
	if !hmac.Equal(sig, key.mac([]byte(signed))) {
		return nil, fmt.Errorf("%w (key id %q)", ErrBadSignature, kid)
	}
	payload, err := b64.DecodeString(payloadB64)
	if err != nil {
		// Only a signer bug gets here: we sign canonical base64.
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	return payload, nil
}

func kindName(kind string) string {
	if kind == kindTicket {
		return "a ticket"
	}
	return "an admission token"
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// validAlphabet reports whether s is made of [A-Za-z0-9_-] only.
func validAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || !isTokenByte(c) {
			return false
		}
	}
	return true
}

func validKeyID(kid string) bool {
	return len(kid) > 0 && len(kid) <= MaxKeyIDLen && validAlphabet(kid)
}

// marshal encodes a payload as compact JSON. HTML escaping is off: it would
// make an id with '<' up to six times longer, where the id bounds assume at
// most twice (for '"', '\\', U+2028 and U+2029, the only characters of a valid
// id that JSON escapes).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Payloads are structs of strings, integers and booleans.
		panic("waitroom: encode payload: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// unmarshal decodes a payload strictly: one JSON object, no unknown fields,
// nothing after it. Fields are pointers so the caller can tell a missing field
// from a zero one.
func unmarshal(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: payload: data after the object", ErrMalformed)
	}
	return nil
}

func missing(field string) error {
	return fmt.Errorf("%w: payload: field %q missing", ErrMalformed, field)
}

// checkID checks an id carried in a token: 1-MaxIDLen bytes of valid UTF-8
// without control characters.
func checkID(what, id string) error {
	if len(id) == 0 || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %s must be 1-%d bytes", ErrMalformed, what, MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrMalformed, what)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s has a control character", ErrMalformed, what)
		}
	}
	return nil
}

func checkTime(what string, unix int64) error {
	if unix < minUnix || unix > maxUnix {
		return fmt.Errorf("%w: %s is outside the years 2000-2200", ErrMalformed, what)
	}
	return nil
}

// Ticket is a place in a sale's waiting room. It is held by the customer as a
// signed token, not stored: the token is the only record of it.
type Ticket struct {
	SaleID     string
	CustomerID string
	ArrivedAt  time.Time // kept to the second
	Position   int64     // arrival number among this sale's tickets (1-based)
	PreOpen    bool      // taken before the sale opened: ordered by Draw, not Position, under randomized_at_open
	Draw       uint64    // the customer's fixed draw for this sale (see Draw)
}

// ticketWire is a ticket's payload. Every field is written (no omitempty):
// the parser requires them all.
type ticketWire struct {
	SaleID     string `json:"s"`
	CustomerID string `json:"c"`
	ArrivedAt  int64  `json:"t"` // unix seconds
	Position   int64  `json:"p"`
	PreOpen    bool   `json:"o"`
	Draw       uint64 `json:"d"`
}

func ticketPayload(t Ticket) []byte {
	return marshal(ticketWire{
		SaleID:     t.SaleID,
		CustomerID: t.CustomerID,
		ArrivedAt:  t.ArrivedAt.Unix(),
		Position:   t.Position,
		PreOpen:    t.PreOpen,
		Draw:       t.Draw,
	})
}

// SignTicket returns t as a ticket token. ArrivedAt is kept to the second.
// The caller passes a ticket that ParseTicket would accept (ids of 1-128
// bytes of UTF-8 without control characters, Position at least 1, ArrivedAt
// in the years 2000-2200); the token of any other is refused when parsed.
func (k *Keyring) SignTicket(t Ticket) string {
	return k.sign(kindTicket, ticketPayload(t))
}

// ParseTicket verifies a ticket token's signature and format and returns the
// ticket; it never touches a database. Whether the ticket belongs to the
// caller and to the sale asked about is for the caller to check.
func (k *Keyring) ParseTicket(token string) (Ticket, error) {
	t, err := k.parseTicket(token)
	if err != nil {
		return Ticket{}, fmt.Errorf("parse ticket: %w", err)
	}
	return t, nil
}

func (k *Keyring) parseTicket(token string) (Ticket, error) {
	payload, err := k.open(kindTicket, token)
	if err != nil {
		return Ticket{}, err
	}
	var w struct {
		SaleID     *string `json:"s"`
		CustomerID *string `json:"c"`
		ArrivedAt  *int64  `json:"t"`
		Position   *int64  `json:"p"`
		PreOpen    *bool   `json:"o"`
		Draw       *uint64 `json:"d"`
	}
	if err := unmarshal(payload, &w); err != nil {
		return Ticket{}, err
	}
	switch {
	case w.SaleID == nil:
		return Ticket{}, missing("s")
	case w.CustomerID == nil:
		return Ticket{}, missing("c")
	case w.ArrivedAt == nil:
		return Ticket{}, missing("t")
	case w.Position == nil:
		return Ticket{}, missing("p")
	case w.PreOpen == nil:
		return Ticket{}, missing("o")
	case w.Draw == nil:
		return Ticket{}, missing("d")
	}
	if err := checkID("sale id", *w.SaleID); err != nil {
		return Ticket{}, err
	}
	if err := checkID("customer id", *w.CustomerID); err != nil {
		return Ticket{}, err
	}
	if err := checkTime("arrival time", *w.ArrivedAt); err != nil {
		return Ticket{}, err
	}
	if *w.Position < 1 {
		return Ticket{}, fmt.Errorf("%w: position must be at least 1", ErrMalformed)
	}
	return Ticket{
		SaleID:     *w.SaleID,
		CustomerID: *w.CustomerID,
		ArrivedAt:  time.Unix(*w.ArrivedAt, 0).UTC(),
		Position:   *w.Position,
		PreOpen:    *w.PreOpen,
		Draw:       *w.Draw,
	}, nil
}

// AdmissionID is the admission id for a ticket: base64url of the first 16
// bytes of SHA-256 over the ticket's signed payload. The same ticket always
// yields the same id, whichever instance issues the admission and whichever
// key signed the ticket, so the database's unique index on the id makes one
// ticket good for one reservation.
func AdmissionID(t Ticket) string {
	sum := sha256.Sum256(ticketPayload(t))
	return b64.EncodeToString(sum[:16])
}

// Draw is the customer's fixed place in a sale's pre-open shuffle: the first 8
// bytes of SHA-256(seed || saleID || 0x00 || customerID) as a big-endian
// uint64. seed is the sale's random secret, stored with the sale: without it
// nobody can compute a draw ahead of time, and asking again gives the same
// draw.
func Draw(seed []byte, saleID, customerID string) uint64 {
	h := sha256.New()
	h.Write(seed)
	io.WriteString(h, saleID)
	h.Write([]byte{0})
	io.WriteString(h, customerID)
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// Admission lets one customer make one reservation in one sale before it
// expires. It is held as a signed token; its single use is enforced by the
// database, where ID is stored with the reservation under a unique index.
type Admission struct {
	ID         string // the single-use id stored with the reservation: 1-128 characters of [A-Za-z0-9_-] (AdmissionID makes 22)
	SaleID     string
	CustomerID string
	ExpiresAt  time.Time // kept to the second
}

type admissionWire struct {
	ID         string `json:"i"`
	SaleID     string `json:"s"`
	CustomerID string `json:"c"`
	ExpiresAt  int64  `json:"e"` // unix seconds
}

// SignAdmission returns a as an admission token. ExpiresAt is kept to the
// second. The caller passes an admission that ParseAdmission would accept;
// the token of any other is refused when parsed.
func (k *Keyring) SignAdmission(a Admission) string {
	return k.sign(kindAdmission, marshal(admissionWire{
		ID:         a.ID,
		SaleID:     a.SaleID,
		CustomerID: a.CustomerID,
		ExpiresAt:  a.ExpiresAt.Unix(),
	}))
}

// ParseAdmission verifies an admission token's signature and format and
// returns the admission. It checks neither expiry nor binding (see Check) nor
// single use (the database does).
func (k *Keyring) ParseAdmission(token string) (Admission, error) {
	a, err := k.parseAdmission(token)
	if err != nil {
		return Admission{}, fmt.Errorf("parse admission: %w", err)
	}
	return a, nil
}

func (k *Keyring) parseAdmission(token string) (Admission, error) {
	payload, err := k.open(kindAdmission, token)
	if err != nil {
		return Admission{}, err
	}
	var w struct {
		ID         *string `json:"i"`
		SaleID     *string `json:"s"`
		CustomerID *string `json:"c"`
		ExpiresAt  *int64  `json:"e"`
	}
	if err := unmarshal(payload, &w); err != nil {
		return Admission{}, err
	}
	switch {
	case w.ID == nil:
		return Admission{}, missing("i")
	case w.SaleID == nil:
		return Admission{}, missing("s")
	case w.CustomerID == nil:
		return Admission{}, missing("c")
	case w.ExpiresAt == nil:
		return Admission{}, missing("e")
	}
	// The admission id is limited to the base64url alphabet, which JSON never
	// escapes: with two ids that may double in size when escaped, the longest
	// admission still fits in MaxTokenLen.
	if len(*w.ID) == 0 || len(*w.ID) > MaxIDLen || !validAlphabet(*w.ID) {
		return Admission{}, fmt.Errorf("%w: admission id must be 1-%d characters of [A-Za-z0-9_-]", ErrMalformed, MaxIDLen)
	}
	if err := checkID("sale id", *w.SaleID); err != nil {
		return Admission{}, err
	}
	if err := checkID("customer id", *w.CustomerID); err != nil {
		return Admission{}, err
	}
	if err := checkTime("expiry", *w.ExpiresAt); err != nil {
		return Admission{}, err
	}
	return Admission{
		ID:         *w.ID,
		SaleID:     *w.SaleID,
		CustomerID: *w.CustomerID,
		ExpiresAt:  time.Unix(*w.ExpiresAt, 0).UTC(),
	}, nil
}

// Check reports whether the admission lets customerID reserve in saleID at
// now: ErrAdmissionOtherSale, ErrAdmissionOtherCustomer or
// ErrAdmissionExpired, checked in that order, or nil. The token expires at
// ExpiresAt: at that instant it is no longer good.
func (a Admission) Check(saleID, customerID string, now time.Time) error {
	switch {
	case a.SaleID != saleID:
		return fmt.Errorf("check admission %s: %w: token is for sale %q", a.ID, ErrAdmissionOtherSale, a.SaleID)
	case a.CustomerID != customerID:
		// The customer ids are left out: errors reach logs.
		return fmt.Errorf("check admission %s: %w", a.ID, ErrAdmissionOtherCustomer)
	case !now.Before(a.ExpiresAt):
		return fmt.Errorf("check admission %s: %w at %s", a.ID, ErrAdmissionExpired, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}
