package webhook_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/webhook"
)

const secret = "whsec-test-0123456789abcdef0123456789"

var body = []byte(`{"id":"evt_1","type":"payment.succeeded","data":{"reservationId":"res_x","paymentReference":"pi_1"}}`)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := webhook.NewVerifier(secret).WithClock(at(now))
	good := webhook.Sign(now, body, secret)
	require.Regexp(t, `^t=1800000000,v1=[0-9a-f]{64}$`, good)

	for _, tc := range []struct {
		name   string
		header string
		body   []byte
		want   error
	}{
		{"Good", good, body, nil},
		{"RotationOldAndNew", webhook.Sign(now, body, "the-old-secret-0123456789abcdef0123", secret), body, nil},
		{"RotationNewFirst", webhook.Sign(now, body, secret, "the-old-secret-0123456789abcdef0123"), body, nil},
		{"FourMinutesOld", webhook.Sign(now.Add(-4*time.Minute), body, secret), body, nil},
		{"ClockAhead", webhook.Sign(now.Add(4*time.Minute), body, secret), body, nil},
		{"Stale", webhook.Sign(now.Add(-6*time.Minute), body, secret), body, flashline.ErrSignatureExpired},
		{"FromTheFuture", webhook.Sign(now.Add(6*time.Minute), body, secret), body, flashline.ErrSignatureExpired},
		{"WrongSecret", webhook.Sign(now, body, "another-secret-0123456789abcdef0123"), body, flashline.ErrSignatureInvalid},
		{"BodyChanged", good, append([]byte{' '}, body...), flashline.ErrSignatureInvalid},
		{"TimestampChanged", strings.Replace(good, "t=1800000000", "t=1800000001", 1), body, flashline.ErrSignatureInvalid},
		{"Empty", "", body, flashline.ErrSignatureInvalid},
		{"NoT", good[strings.Index(good, "v1="):], body, flashline.ErrSignatureInvalid},
		{"NoV1", "t=1800000000", body, flashline.ErrSignatureInvalid},
		{"OnlyV0", "t=1800000000,v0=" + strings.Repeat("ab", 32), body, flashline.ErrSignatureInvalid},
		{"TwoT", "t=1800000000," + good, body, flashline.ErrSignatureInvalid},
		{"ShortV1", "t=1800000000,v1=abcd", body, flashline.ErrSignatureInvalid},
		{"NotHex", "t=1800000000,v1=" + strings.Repeat("zz", 32), body, flashline.ErrSignatureInvalid},
		{"NegativeT", "t=-1,v1=" + strings.Repeat("ab", 32), body, flashline.ErrSignatureInvalid},
		{"HugeT", "t=99999999999999999999,v1=" + strings.Repeat("ab", 32), body, flashline.ErrSignatureInvalid},
		{"NoEquals", "t1800000000", body, flashline.ErrSignatureInvalid},
		{"TooLong", good + strings.Repeat(",x=y", 300), body, flashline.ErrSignatureInvalid},
		{"SpacesAround", strings.ReplaceAll(good, ",", " , "), body, nil},
		{"OtherSchemesSkipped", good + ",v0=whatever", body, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Verify(tc.header, tc.body)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestDevSecret(t *testing.T) {
	a := webhook.DevSecret("dev-jwt-secret")
	require.Len(t, a, 64, "32 bytes, hex")
	require.Equal(t, a, webhook.DevSecret("dev-jwt-secret"), "every instance derives the same")
	require.NotEqual(t, a, webhook.DevSecret("dev-jwt-secret2"))
	require.NotContains(t, a, "dev-jwt-secret")
}

func TestUsesAndString(t *testing.T) {
	v := webhook.NewVerifier(secret)
	require.True(t, v.Uses(secret))
	require.False(t, v.Uses(secret+"x"))
	require.NotContains(t, v.String(), secret)
}

// FuzzVerify: no header, however malformed, panics or passes without the
// secret; a header made by Sign always passes.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	f.Add(webhook.Sign(now, body, secret), body)
	f.Add("t=1800000000,v1=", []byte("{}"))
	f.Add("t=,v1=00", []byte(""))
	f.Add(strings.Repeat("v1="+strings.Repeat("0", 64)+",", 20), body)
	v := webhook.NewVerifier(secret).WithClock(at(now))
	f.Fuzz(func(t *testing.T, header string, b []byte) {
		err := v.Verify(header, b)
		if err == nil && header != webhook.Sign(now, b, secret) {
			// Only a correct HMAC passes; any accepted header must carry
			// the right v1 for this body (it may differ in form: spaces,
			// extra items, its t within the tolerance).
			ts := header[strings.Index(header, "t=")+2:]
			if i := strings.IndexAny(ts, ", "); i >= 0 {
				ts = ts[:i]
			}
			n, perr := strconv.ParseInt(ts, 10, 64)
			require.NoError(t, perr, "accepted header %q", header)
			want := webhook.Sign(time.Unix(n, 0), b, secret)
			require.Contains(t, header, want[strings.Index(want, "v1="):], "accepted header %q without the right v1", header)
		}
		if err != nil && !errors.Is(err, flashline.ErrSignatureInvalid) && !errors.Is(err, flashline.ErrSignatureExpired) {
			t.Fatalf("unexpected error %v", err)
		}
		good := webhook.Sign(now, b, secret)
		require.NoError(t, v.Verify(good, b))
	})
}
