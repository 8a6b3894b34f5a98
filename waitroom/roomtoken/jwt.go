package roomtoken

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"
)

// Waiting-room tokens are JWTs (RFC 7519) in compact JWS form, HS256 only:
//
//	base64url(header) "." base64url(claims) "." base64url(HMAC-SHA256(key, everything before the second dot))
//
// The header is {"alg":"HS256","kid":KEY ID,"typ":"JWT"}: the kid names the
// keyring key that signed the token. The claims are one compact JSON object,
// and the audience tells the two kinds apart: "flashline-ticket" (ticket.go)
// and "flashline-admission" (admission.go). Both carry "sub" (the customer
// id) and a required "exp", so an edge worker or CDN can verify a token with
// any JWT library, or a few lines of standard library: look the key up by
// kid, check HS256, the HMAC, aud and exp.
//
// Verification is github.com/golang-jwt/jwt/v5's (its parser, with the
// algorithm allowlisted before any signature check), and signing computes
// its HS256 method's HMAC with a MAC kept per key (key.sign); this file adds what the parser leaves open: the size bound, one
// spelling per token (only the base64url alphabet, strict base64, the exact
// header), strict claims (no unknown or duplicate claims, exactly one JSON
// object, the right types) and the kind. Tokens are encoded here rather than
// with jwt.Token.SignedString because encoding/json.Marshal escapes <, > and
// & as \u003c..., which would let an id of MaxIDLen bytes grow sixfold and
// break the MaxTokenLen bound; the claims are written in a fixed order, so
// each token has exactly one spelling.

// Token errors. Parse and Check wrap them with what was wrong; match them with
// errors.Is. All of them mean 403 admission_invalid (or a fresh ticket) to a
// client.
var (
	ErrMalformed    = errors.New("malformed token")
	ErrBadSignature = errors.New("bad token signature")
	ErrUnknownKey   = errors.New("token signed with an unknown key")
	ErrWrongKind    = errors.New("wrong kind of token")
)

// Limits on tokens.
const (
	// MaxTokenLen is the longest token Parse looks at; it is checked before
	// any decoding. Every ticket and admission that passes Parse's checks signs
	// to a token within it (see MaxIDLen): the longest, an admission with a
	// 16-character kid, an admission id of 128 characters, a sale and
	// customer id of 128 bytes that JSON escapes to twice that and a won
	// variant's SKU of 64 characters, is 1170 bytes.
	MaxTokenLen = 1280
	// MaxIDLen is the longest sale, customer or admission id a token may
	// carry, in bytes. It is counted in bytes, not characters, so that the
	// longest valid ticket or admission is known to fit in MaxTokenLen.
	MaxIDLen = 128
)

// The audiences ("aud") of the two kinds of token. The audience is covered by
// the signature, so a ticket can never be presented as an admission token or
// the other way round.
const (
	ticketAudience    = "flashline-ticket"
	admissionAudience = "flashline-admission"
)

// algHS256 is the only signing algorithm made or accepted.
const algHS256 = "HS256"

// sigLen is the length of an HS256 signature before encoding, and sigB64Len
// after.
const (
	sigLen    = 32
	sigB64Len = (sigLen*8 + 5) / 6
)

// b64 is the encoding of a token's segments: base64url without padding, as
// JWS has it. Strict refuses encodings whose unused trailing bits are not
// zero, so each segment has exactly one spelling and a token cannot be
// altered without failing to parse.
var b64 = base64.RawURLEncoding.Strict()

// Bounds on the times a token may carry: years 2000 to 2200.
var (
	minUnix = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxUnix = time.Date(2201, 1, 1, 0, 0, 0, 0, time.UTC).Unix() - 1
)

// jwtHeader is the JOSE header of every token, in this order.
type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// parser verifies tokens: HS256 only, refused before the key is even looked
// up (no "none", no other HMAC, no asymmetric algorithm: a public key can
// never be mistaken for an HMAC secret), strict base64. The claims are
// checked by open and the kinds' parsers, not by the jwt validator: an
// admission's expiry is Admission.Check's to judge, with the caller's clock.
var parser = jwt.NewParser(
	jwt.WithValidMethods([]string{algHS256}),
	jwt.WithStrictDecoding(),
	jwt.WithoutClaimsValidation(),
)

// marshal encodes a header or claims as compact JSON. HTML escaping is off: it
// would make an id with '<' up to six times longer, where the id bounds assume
// at most twice (for '"', '\\', U+2028 and U+2029, the only characters of a
// valid id that JSON escapes).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Headers and claims are structs of strings, integers and booleans.
		panic("waitroom: encode token: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// sign returns claims as a JWT signed by the keyring's signing key.
func (k *Keyring) sign(claims any) string {
	return k.keys[0].sign(marshal(claims))
}

// sign returns header "." base64url(payload) "." base64url(HS256 signature):
// the HMAC-SHA256 of everything before the second dot, as golang-jwt's HS256
// method computes it (TestJWTLibraryVerifies), with a MAC of the key's pool.
func (key key) sign(payload []byte) string {
	b := make([]byte, 0, len(key.header)+b64.EncodedLen(len(payload))+sigB64Len+2)
	b = append(b, key.header...)
	b = append(b, '.')
	b = b64.AppendEncode(b, payload)
	m := key.macs.Get().(*keyMAC)
	m.mac.Reset()
	m.mac.Write(b)
	sig := m.mac.Sum(m.sum[:0])
	b = append(b, '.')
	b = b64.AppendEncode(b, sig)
	key.macs.Put(m)
	// b is not written again: the token is a view of it, not a copy.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// open verifies a token of the kind aud names and returns its claims: size,
// alphabet and segments first, then (in the jwt parser) the algorithm, the
// header and key its kid names, and the signature, then the kind. The jwt
// parser decodes the header and the claims before it checks the signature (it
// needs alg and kid from the header): MaxTokenLen bounds that work, the claims
// are decoded strictly (see wireClaims.UnmarshalJSON), and nothing in them is
// acted on before the signature has been checked. The kinds' parsers then
// check which claims are there and what they hold.
func (k *Keyring) open(aud, token string) (*wireClaims, error) {
	if len(token) > MaxTokenLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxTokenLen)
	}
	// Only the base64url alphabet and the dots: base64 decoding skips \r and
	// \n, which would otherwise give one token several spellings.
	for i := 0; i < len(token); i++ {
		if c := token[i]; c != '.' && !isBase64URL(c) {
			return nil, fmt.Errorf("%w: unexpected character at byte %d", ErrMalformed, i)
		}
	}
	_, rest, ok1 := strings.Cut(token, ".")
	_, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") {
		return nil, fmt.Errorf("%w: want 3 dot-separated segments", ErrMalformed)
	}
	if len(sig) != sigB64Len {
		return nil, fmt.Errorf("%w: signature is not %d characters", ErrMalformed, sigB64Len)
	}
	var c wireClaims
	t, err := parser.ParseWithClaims(token, &c, k.keyfunc)
	if err != nil {
		return nil, parseError(t, err)
	}
	switch {
	case c.Audience == nil:
		return nil, missing("aud")
	case *c.Audience == aud:
		return &c, nil
	case *c.Audience == ticketAudience || *c.Audience == admissionAudience:
		return nil, fmt.Errorf("%w: %s, want %s", ErrWrongKind, kindName(*c.Audience), kindName(aud))
	}
	return nil, fmt.Errorf("%w: unknown audience", ErrMalformed)
}

// keyfunc checks a token's header, once the parser has checked its algorithm,
// and returns the secret of the key its kid names. The header must be the one
// that key writes, byte for byte: no other parameter ("crit", "jku", ...), no
// other spelling.
func (k *Keyring) keyfunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if !validKeyID(kid) {
		return nil, &refusal{fmt.Errorf("%w: bad key id", ErrMalformed)}
	}
	key, ok := k.lookup(kid)
	if !ok {
		return nil, &refusal{fmt.Errorf("%w: key id %q", ErrUnknownKey, kid)}
	}
	if header, _, _ := strings.Cut(t.Raw, "."); header != key.header {
		return nil, &refusal{fmt.Errorf(`%w: header must be exactly {"alg":"HS256","kid":%q,"typ":"JWT"}`, ErrMalformed, kid)}
	}
	return key.secret, nil
}

// refusal carries an error of this package's own checks (keyfunc, claims
// decoding) through the jwt parser's wrapping, so that parseError can give it
// back as it was.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// parseError turns an error of the jwt parser into one of this package's:
// a token that fails to verify wraps exactly one of ErrMalformed,
// ErrUnknownKey and ErrBadSignature.
func parseError(t *jwt.Token, err error) error {
	var r *refusal
	switch {
	case errors.As(err, &r):
		return r.err
	case t != nil && t.Method != nil && t.Method.Alg() != algHS256:
		// Refused by WithValidMethods, before any key was looked up.
		return fmt.Errorf("%w: algorithm %q, want %s", ErrMalformed, t.Method.Alg(), algHS256)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		kid, _ := t.Header["kid"].(string)
		return fmt.Errorf("%w (key id %q)", ErrBadSignature, kid)
	}
	// Base64, JSON of the header, an algorithm that is missing or unknown.
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}

func kindName(aud string) string {
	if aud == ticketAudience {
		return "a ticket"
	}
	return "an admission token"
}

// wireClaims are the claims of either kind of token, as decoded: pointers, so
// that a missing (or null) claim can be told from a zero one.
type wireClaims struct {
	Audience  *string // aud
	Subject   *string // sub: the customer id
	ID        *string // jti: the admission id
	IssuedAt  *int64  // iat: a ticket's arrival time
	ExpiresAt *int64  // exp
	Sale      *string // sale: the sale id
	Position  *int64  // pos
	PreOpen   *bool   // preopen
	Draw      *uint64 // draw
	Variant   *string // variant: a lottery admission's won variant
}

// claimNames are the claims either kind may carry.
var claimNames = [...]string{"aud", "sub", "jti", "iat", "exp", "sale", "pos", "preopen", "draw", "variant"}

// field returns where claim i of claimNames is decoded to, and whether it is
// present.
func (c *wireClaims) field(i int) (dst any, present bool) {
	switch claimNames[i] {
	case "aud":
		return &c.Audience, c.Audience != nil
	case "sub":
		return &c.Subject, c.Subject != nil
	case "jti":
		return &c.ID, c.ID != nil
	case "iat":
		return &c.IssuedAt, c.IssuedAt != nil
	case "exp":
		return &c.ExpiresAt, c.ExpiresAt != nil
	case "sale":
		return &c.Sale, c.Sale != nil
	case "pos":
		return &c.Position, c.Position != nil
	case "preopen":
		return &c.PreOpen, c.PreOpen != nil
	case "draw":
		return &c.Draw, c.Draw != nil
	case "variant":
		return &c.Variant, c.Variant != nil
	}
	panic("waitroom: unknown claim " + claimNames[i])
}

// UnmarshalJSON decodes claims strictly: one JSON object (the jwt parser's
// json.Unmarshal refuses anything after it), only the claims of claimNames,
// each at most once, each of its type (integers as integers: no exponent, no
// fraction, no overflow). A null claim counts as missing.
func (c *wireClaims) UnmarshalJSON(b []byte) error {
	*c = wireClaims{}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return &refusal{fmt.Errorf("%w: claims are not a JSON object", ErrMalformed)}
	}
	var seen [len(claimNames)]bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return &refusal{fmt.Errorf("%w: claims: %v", ErrMalformed, err)}
		}
		name, _ := t.(string)
		i := 0
		for i < len(claimNames) && claimNames[i] != name {
			i++
		}
		if i == len(claimNames) {
			return &refusal{fmt.Errorf("%w: claims: unknown claim %q", ErrMalformed, name)}
		}
		if seen[i] {
			return &refusal{fmt.Errorf("%w: claims: claim %q appears twice", ErrMalformed, name)}
		}
		seen[i] = true
		dst, _ := c.field(i)
		if err := dec.Decode(dst); err != nil {
			return &refusal{fmt.Errorf("%w: claims: claim %q: %v", ErrMalformed, name, err)}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return &refusal{fmt.Errorf("%w: claims: object not closed", ErrMalformed)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &refusal{fmt.Errorf("%w: claims: data after the object", ErrMalformed)}
	}
	return nil
}

// exactly checks that the claims are the named ones, every one present and no
// other: a claim of the other kind is refused even when its audience is right.
func (c *wireClaims) exactly(names ...string) error {
	for i, name := range claimNames {
		wanted := false
		for _, n := range names {
			wanted = wanted || n == name
		}
		if _, present := c.field(i); present && !wanted {
			return fmt.Errorf("%w: claims: %q does not belong in %s", ErrMalformed, name, kindName(*c.Audience))
		}
	}
	for _, name := range names {
		i := 0
		for claimNames[i] != name {
			i++
		}
		if _, present := c.field(i); !present {
			return missing(name)
		}
	}
	return nil
}

func missing(claim string) error {
	return fmt.Errorf("%w: claims: %q missing", ErrMalformed, claim)
}

// The jwt.Claims interface, which the parser asks for. Its validator is off
// (see parser); these serve anyone who hands the claims to a jwt.Validator.

func (c *wireClaims) GetExpirationTime() (*jwt.NumericDate, error) {
	return numericDate(c.ExpiresAt), nil
}
func (c *wireClaims) GetIssuedAt() (*jwt.NumericDate, error)  { return numericDate(c.IssuedAt), nil }
func (c *wireClaims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }
func (c *wireClaims) GetIssuer() (string, error)              { return "", nil }

func (c *wireClaims) GetSubject() (string, error) {
	if c.Subject == nil {
		return "", nil
	}
	return *c.Subject, nil
}

func (c *wireClaims) GetAudience() (jwt.ClaimStrings, error) {
	if c.Audience == nil {
		return nil, nil
	}
	return jwt.ClaimStrings{*c.Audience}, nil
}

func numericDate(unix *int64) *jwt.NumericDate {
	if unix == nil {
		return nil
	}
	return jwt.NewNumericDate(time.Unix(*unix, 0))
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
