package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/flashline/flashline"
)

// AdyenItem is what Adyen's HMAC signature of a standard notification item
// covers, in the order it is signed: the item's fields joined by ':' (an
// absent field is empty), the amount's value in minor units.
type AdyenItem struct {
	PSPReference        string
	OriginalReference   string
	MerchantAccountCode string
	MerchantReference   string
	Value               int64
	Currency            string
	EventCode           string
	Success             string // "true" or "false", as Adyen sends it
}

// signingString is the item's fields joined by ':', as Adyen signs them.
func (it AdyenItem) signingString() string {
	return strings.Join([]string{
		it.PSPReference, it.OriginalReference, it.MerchantAccountCode, it.MerchantReference,
		strconv.FormatInt(it.Value, 10), it.Currency, it.EventCode, it.Success,
	}, ":")
}

// AdyenVerifier checks the hmacSignature of Adyen's notification items with
// one of its HMAC keys (the hex keys of the webhook in Adyen's Customer
// Area; two while they are rotated).
type AdyenVerifier struct {
	keys [][]byte
}

// NewAdyenVerifier returns a verifier for hexKeys (at least one; each the
// hex the Customer Area shows, an even number of hex digits).
func NewAdyenVerifier(hexKeys ...string) (*AdyenVerifier, error) {
	if len(hexKeys) == 0 {
		return nil, errors.New("webhook: an Adyen HMAC key is required")
	}
	v := &AdyenVerifier{}
	for _, k := range hexKeys {
		b, err := hex.DecodeString(k)
		if err != nil || len(b) < 16 {
			return nil, errors.New("webhook: an Adyen HMAC key is the hex the Customer Area shows (32+ hex digits)")
		}
		v.keys = append(v.keys, b)
	}
	return v, nil
}

// String never shows the keys.
func (v *AdyenVerifier) String() string { return "webhook.AdyenVerifier" }

// Verify checks that signature (the item's additionalData.hmacSignature,
// base64) is the HMAC-SHA256 of it under one of the keys. It returns
// flashline.ErrSignatureInvalid otherwise. Adyen's signature has no
// timestamp: a replayed item is harmless because its event id is applied
// once.
func (v *AdyenVerifier) Verify(it AdyenItem, signature string) error {
	got, err := base64.StdEncoding.DecodeString(signature)
	if err != nil || len(got) != sha256.Size {
		return flashline.ErrSignatureInvalid
	}
	data := it.signingString()
	match := false
	for _, k := range v.keys {
		// Every key is tried, in constant time each.
		if hmac.Equal(got, adyenMAC(k, data)) {
			match = true
		}
	}
	if !match {
		return flashline.ErrSignatureInvalid
	}
	return nil
}

func adyenMAC(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// SignAdyen is the hmacSignature of it under hexKey, as Adyen computes it
// (tests and tools play Adyen with it).
func SignAdyen(it AdyenItem, hexKey string) (string, error) {
	k, err := hex.DecodeString(hexKey)
	if err != nil {
		return "", errors.New("webhook: the Adyen HMAC key must be hex")
	}
	return base64.StdEncoding.EncodeToString(adyenMAC(k, it.signingString())), nil
}
