package flashline

import (
	"unicode"
	"unicode/utf8"
)

// ValidText reports whether s may be stored and shown as text: valid UTF-8
// without control characters (NUL, which PostgreSQL refuses in text, and
// every other C0 and C1 code, DEL) and without format characters (Unicode
// category Cf: zero-width spaces and joiners, direction marks, the byte-order
// mark), which make two strings that look the same compare different. Every
// string a client controls that reaches the database is checked with it
// first, so that a hostile byte is a 400, never a failed statement.
func ValidText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// ValidTextBytes is ValidText of b.
func ValidTextBytes(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
		b = b[n:]
	}
	return true
}
