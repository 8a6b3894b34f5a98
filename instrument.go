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
	s = strings.TrimSpace(norm.NFKC.String(strings.Map(cherokeeFold, cases.Fold().String(norm.NFKC.String(s)))))
	switch {
	case s == "":
		return "", Invalid("paymentInstrument must not be blank")
	case len(s) > MaxInstrumentLen:
		return "", Invalid("paymentInstrument must be at most 255 bytes")
	}
	return s, nil
}

// cherokeeFold gives a Cherokee letter the case Unicode's case folding
// gives it, the capital (CaseFolding.txt: U+AB70-ABBF to U+13A0-13EF,
// U+13F8-13FD to U+13F0-13F5). golang.org/x/text's cases.Fold maps the
// capitals to the small letters and the small ones back, so a fingerprint
// folded twice would not be one folded once ("Ꮟ", found by
// FuzzNormalizeInstrument).
func cherokeeFold(r rune) rune {
	switch {
	case r >= 0xAB70 && r <= 0xABBF:
		return r - 0xAB70 + 0x13A0
	case r >= 0x13F8 && r <= 0x13FD:
		return r - 0x13F8 + 0x13F0
	}
	return r
}
