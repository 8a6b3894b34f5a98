package webhook_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/webhook"
)

// TestVerifierSecrets: a verifier with two secrets (the receiving side
// rotating them) takes a signature made with either, and only those.
func TestVerifierSecrets(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const old, next = "whsec_old_0123456789abcdef0123456789", "whsec_new_0123456789abcdef0123456789"
	v := webhook.NewVerifier(old, next).WithClock(at(now))
	require.NoError(t, v.Verify(webhook.Sign(now, body, old), body))
	require.NoError(t, v.Verify(webhook.Sign(now, body, next), body))
	require.ErrorIs(t, v.Verify(webhook.Sign(now, body, secret), body), flashline.ErrSignatureInvalid)
	require.True(t, v.Uses(old) && v.Uses(next) && !v.Uses(secret))

	require.Equal(t, []string{old, next}, webhook.SplitSecrets(" "+old+" ,, "+next+","))
	require.Empty(t, webhook.SplitSecrets(""))

	strict := v.WithTolerance(time.Minute)
	require.ErrorIs(t, strict.Verify(webhook.Sign(now.Add(-2*time.Minute), body, old), body), flashline.ErrSignatureExpired)
}

// TestAdyenSignature: the HMAC of a notification item over its fields
// joined by ':' in Adyen's order, keyed by the hex key, base64 — checked
// against a signature computed by hand from the documented algorithm
// (openssl: printf %s 'psp_1::FlashlineShop:res_x:2500:EUR:AUTHORISATION:true'
// | openssl dgst -sha256 -mac HMAC -macopt hexkey:<key> -binary | base64).
func TestAdyenSignature(t *testing.T) {
	const key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	it := webhook.AdyenItem{
		PSPReference: "psp_1", MerchantAccountCode: "FlashlineShop", MerchantReference: "res_x",
		Value: 2500, Currency: "EUR", EventCode: "AUTHORISATION", Success: "true",
	}
	sig, err := webhook.SignAdyen(it, key)
	require.NoError(t, err)
	require.Equal(t, adyenByHand, sig)

	v, err := webhook.NewAdyenVerifier("00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF", key)
	require.NoError(t, err)
	require.NoError(t, v.Verify(it, sig))

	for name, change := range map[string]func(*webhook.AdyenItem){
		"Amount":    func(i *webhook.AdyenItem) { i.Value++ },
		"Success":   func(i *webhook.AdyenItem) { i.Success = "false" },
		"Reference": func(i *webhook.AdyenItem) { i.MerchantReference = "res_y" },
		"Event":     func(i *webhook.AdyenItem) { i.EventCode = "REFUND" },
		"Original":  func(i *webhook.AdyenItem) { i.OriginalReference = "psp_0" },
	} {
		changed := it
		change(&changed)
		require.ErrorIs(t, v.Verify(changed, sig), flashline.ErrSignatureInvalid, name)
	}
	require.ErrorIs(t, v.Verify(it, "not base64!"), flashline.ErrSignatureInvalid)
	require.ErrorIs(t, v.Verify(it, ""), flashline.ErrSignatureInvalid)

	_, err = webhook.NewAdyenVerifier("not hex")
	require.Error(t, err)
	_, err = webhook.NewAdyenVerifier()
	require.Error(t, err)
}

const adyenByHand = "4HNS+eykCGOnSzhiBhixYVYq/y40NRL4RllmFZd+iF8="
