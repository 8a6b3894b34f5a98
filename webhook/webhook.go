package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/flashline/flashline"
)

// Header is the signature's header.
const Header = "Flashline-Signature"

// DefaultTolerance is how far an event's timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// Bounds on what a header may hold: a real one has t and one or two v1.
const (
	maxHeaderLen = 1024
	maxItems     = 16
)

// StripeHeader is the header Stripe signs its webhooks with: the same
// scheme, the endpoint's signing secret ("whsec_...") as the key.
const StripeHeader = "Stripe-Signature"

// Verifier checks signatures made with one of its secrets: one, or two
// while the receiving side rotates them (the old and the new, until every
// sender signs with the new).
type Verifier struct {
	secrets   [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// NewVerifier returns a Verifier for secrets (at least one) with
// DefaultTolerance.
func NewVerifier(secret string, more ...string) *Verifier {
	v := &Verifier{secrets: [][]byte{[]byte(secret)}, tolerance: DefaultTolerance, now: time.Now}
	for _, s := range more {
		v.secrets = append(v.secrets, []byte(s))
	}
	return v
}

// SplitSecrets reads a configured list of secrets, "secret[,secret...]":
// the comma separates them (Stripe's "whsec_..." secrets hold none), spaces
// around each are dropped, empty items are skipped.
func SplitSecrets(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// WithTolerance returns a copy of v that accepts timestamps within d of now.
func (v *Verifier) WithTolerance(d time.Duration) *Verifier {
	c := *v
	c.tolerance = d
	return &c
}

// WithClock returns a copy of v that reads the time from now (tests).
func (v *Verifier) WithClock(now func() time.Time) *Verifier {
	c := *v
	c.now = now
	return &c
}

// Uses reports whether secret is one of the verifier's secrets (in
// constant time): a payment secret must be a secret of its own.
func (v *Verifier) Uses(secret string) bool {
	used := false
	for _, s := range v.secrets {
		if hmac.Equal(s, []byte(secret)) {
			used = true
		}
	}
	return used
}

// String never shows the secret.
func (v *Verifier) String() string { return "webhook.Verifier" }

// Verify checks that header signs body with the verifier's secret and that
// its timestamp is within the tolerance of now. It returns
// flashline.ErrSignatureInvalid (missing, malformed or no matching v1) or
// flashline.ErrSignatureExpired (authentic but too old, or from the future).
func (v *Verifier) Verify(header string, body []byte) error {
	t, sigs, ok := parse(header)
	if !ok {
		return flashline.ErrSignatureInvalid
	}
	match := false
	for _, secret := range v.secrets {
		want := mac(secret, t, body)
		for _, s := range sigs {
			// hmac.Equal is constant time for equal lengths; every v1 is
			// compared with every secret's, so the time taken does not say
			// which matched.
			if hmac.Equal(s, want) {
				match = true
			}
		}
	}
	if !match {
		return flashline.ErrSignatureInvalid
	}
	if d := v.now().Sub(time.Unix(t, 0)); d > v.tolerance || d < -v.tolerance {
		return flashline.ErrSignatureExpired
	}
	return nil
}

// parse reads "t=<digits>,v1=<64 hex>[,v1=...]"; items of other schemes
// (v0=...) are skipped. ok is false unless there is exactly one t and at
// least one well-formed v1.
func parse(header string) (t int64, sigs [][]byte, ok bool) {
	if header == "" || len(header) > maxHeaderLen {
		return 0, nil, false
	}
	items := strings.Split(header, ",")
	if len(items) > maxItems {
		return 0, nil, false
	}
	seenT := false
	for _, item := range items {
		k, val, found := strings.Cut(strings.TrimSpace(item), "=")
		if !found {
			return 0, nil, false
		}
		switch k {
		case "t":
			if seenT || val == "" || len(val) > 12 || strings.TrimLeft(val, "0123456789") != "" {
				return 0, nil, false
			}
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return 0, nil, false
			}
			t, seenT = n, true
		case "v1":
			// The form the scheme writes, and Stripe sends: lowercase hex.
			// One form only, so that a header is accepted as it was signed.
			b, err := hex.DecodeString(val)
			if err != nil || len(b) != sha256.Size || strings.ToLower(val) != val {
				return 0, nil, false
			}
			sigs = append(sigs, b)
		}
	}
	return t, sigs, seenT && len(sigs) > 0
}

func mac(secret []byte, t int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, strconv.FormatInt(t, 10))
	io.WriteString(m, ".")
	m.Write(body)
	return m.Sum(nil)
}

// Sign is the header value that signs body at time at with each of secrets
// (one v1 per secret, in order), as the payment side sends it.
func Sign(at time.Time, body []byte, secrets ...string) string {
	t := at.Unix()
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(t, 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac([]byte(s), t, body)))
	}
	return b.String()
}

// DevSecret is the development secret `serve --demo` uses when no payment
// secret is configured: HMAC-SHA256(jwtSecret, "flashline payment webhook
// v1"), hex. Every instance with the same JWT secret derives the same one,
// and it reveals nothing about the JWT secret.
func DevSecret(jwtSecret string) string {
	m := hmac.New(sha256.New, []byte(jwtSecret))
	io.WriteString(m, "flashline payment webhook v1")
	return hex.EncodeToString(m.Sum(nil))
}
