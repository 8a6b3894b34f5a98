package flashline

import (
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// MaxInstrumentLen bounds a payment-instrument fingerprint, in bytes.
const MaxInstrumentLen = 255

// NormalizeInstrument returns the form of a payment-instrument fingerprint
// under which a sale counts units (perInstrumentLimit): trimmed, NFKC
// normalised and case-folded, so that "CARD-1", " card-1" and the full-width
// "ＣＡＲＤ－１" are one instrument. A fingerprint with control or format
// characters (NUL, zero-width spaces and joiners, direction marks), which
// would make one instrument count as several, is refused, as is one that is
// empty after trimming or longer than MaxInstrumentLen bytes. "" stays ""
// (no instrument given).
//
// The fingerprint should come from the payment provider (the token or
// fingerprint it returns for a card), never be typed by the shopper: the
// rule limits what one instrument may hold only as well as the fingerprint
// names the instrument.
func NormalizeInstrument(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if !ValidText(s) {
		return "", Invalid("paymentInstrument must not contain control or format characters")
	}
	// NFKC first, so that compatibility forms fold like their plain
	// letters, and again after folding, which may denormalise; trimmed
	// last, as NFKC may turn a character into a space and a combining mark
	// ("˙" is " ̇").
	s = strings.TrimSpace(norm.NFKC.String(cases.Fold().String(norm.NFKC.String(s))))
	switch {
	case s == "":
		return "", Invalid("paymentInstrument must not be blank")
	case len(s) > MaxInstrumentLen:
		return "", Invalid("paymentInstrument must be at most 255 bytes")
	}
	return s, nil
}
