package roomtoken

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseKeyring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    string
		wantIDs []string
		wantErr string // substring; "" means valid
	}{
		{"One", "k1:" + secret1, []string{"k1"}, ""},
		{"TwoSignsWithFirst", "new:" + secret2 + ",old:" + secret1, []string{"new", "old"}, ""},
		{"WhitespaceTrimmed", " \tk2:" + secret2 + " ,\n k1:" + secret1 + "\n", []string{"k2", "k1"}, ""},
		{"SecretWithColons", "k1:a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:", []string{"k1"}, ""},
		{"SecretOfMinLength", "k1:" + strings.Repeat("x", MinSecretLen), []string{"k1"}, ""},
		{"LongestKeyID", strings.Repeat("K", MaxKeyIDLen) + ":" + secret1, []string{strings.Repeat("K", MaxKeyIDLen)}, ""},
		{"KeyIDAlphabet", "Az09_-:" + secret1, []string{"Az09_-"}, ""},
		{"Empty", "", nil, "keyring is empty"},
		{"Blank", " \t\n", nil, "keyring is empty"},
		{"TrailingComma", "k1:" + secret1 + ",", nil, "entry 2 is empty"},
		{"EmptyEntryBetween", "k1:" + secret1 + ", ,k2:" + secret2, nil, "entry 2 is empty"},
		{"NoColon", secret1, nil, `entry 1 is not "kid:secret"`},
		{"EmptyKeyID", ":" + secret1, nil, "entry 1: key id must be 1-16 characters"},
		{"KeyIDTooLong", strings.Repeat("K", MaxKeyIDLen+1) + ":" + secret1, nil, "entry 1: key id must be 1-16 characters"},
		{"KeyIDWithDot", "k.1:" + secret1, nil, "key id must be"},
		{"KeyIDWithSpace", "k 1:" + secret1, nil, "key id must be"},
		{"KeyIDNotASCII", "ké:" + secret1, nil, "key id must be"},
		{"ShortSecret", "k1:" + secret1[:MinSecretLen-1], nil, `entry 1 (key "k1"): secret is 31 bytes, want at least 32`},
		{"EmptySecret", "k1:", nil, "secret is 0 bytes"},
		{"ShortSecretAfterTrim", "k1:" + secret1[:MinSecretLen-1] + "  ", nil, "secret is 31 bytes"},
		{"DuplicateKeyID", "k1:" + secret1 + ",k2:" + secret2 + ",k1:" + secret2, nil, `entry 3: key id "k1" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := ParseKeyring(tt.spec)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, k)
				for _, s := range []string{secret1, secret2, secret1[:MinSecretLen-1]} {
					require.NotContains(t, err.Error(), s, "an error must never quote a secret")
				}
				return
			}
			require.NoError(t, err)
			var ids []string
			for _, key := range k.keys {
				ids = append(ids, key.id)
			}
			require.Equal(t, tt.wantIDs, ids)
		})
	}

	t.Run("SecretUsedAsGiven", func(t *testing.T) {
		t.Parallel()
		k := testRing(t, "k1:"+secret1+", k2:a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:")
		require.Equal(t, []byte(secret1), k.keys[0].secret)
		require.Equal(t, []byte("a:b:c:d:e:f:g:h:i:j:k:l:m:n:o:p:"), k.keys[1].secret)
	})

	t.Run("StringHidesSecrets", func(t *testing.T) {
		t.Parallel()
		k := testRing(t, "new:"+secret2+",old:"+secret1)
		for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
			s := fmt.Sprintf(format, k)
			require.Equal(t, "roomtoken.Keyring(new,old)", s, format)
		}
	})
}

func TestDeriveKeyring(t *testing.T) {
	t.Parallel()
	k := DeriveKeyring("jwt-secret")
	require.Len(t, k.keys, 1)
	require.Equal(t, "d1", k.keys[0].id)
	// HMAC-SHA256("jwt-secret", "flashline waitroom keys v1"), from Python.
	want, err := hex.DecodeString("a29e2d7a593a8a4a317702479ea73a96bcc8a4b2c9d4d0248390bedae8cf1b05")
	require.NoError(t, err)
	require.Equal(t, want, k.keys[0].secret)
	k = k.at(t0)

	t.Run("Golden", func(t *testing.T) {
		t.Parallel()
		// goldenTicket() signed with that key as kid "d1", from Python.
		const golden = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImQxIiwidHlwIjoiSldUIn0.eyJhdWQiOiJmbGFzaGxpbmUtdGlja2V0Iiwic3ViIjoiY3VzdF8xIiwiaWF0IjoxNzY3MjI1NjAwLCJleHAiOjE3NjczMTIwMDAsInNhbGUiOiJzYWxlXzEiLCJwb3MiOjcsInByZW9wZW4iOmZhbHNlLCJkcmF3Ijo0Mn0.aY6-PPypq4AluuHdJXy7YnTnP5mXP2cvir-tJyeMQsY"
		require.Equal(t, golden, k.SignTicket(goldenTicket()))
	})

	t.Run("SameSecretSameKeys", func(t *testing.T) {
		t.Parallel()
		tok := DeriveKeyring("jwt-secret").SignTicket(goldenTicket())
		got, err := k.ParseTicket(tok)
		require.NoError(t, err)
		require.Equal(t, goldenTicket(), got)
	})

	t.Run("OtherSecretRefused", func(t *testing.T) {
		t.Parallel()
		_, err := DeriveKeyring("other-secret").at(t0).ParseTicket(k.SignTicket(goldenTicket()))
		requireSentinel(t, err, ErrBadSignature)
	})

	t.Run("NotTheSecretItself", func(t *testing.T) {
		t.Parallel()
		secret := "a-jwt-secret-of-some-length-0123456789"
		_, err := testRing(t, "d1:"+secret).ParseTicket(DeriveKeyring(secret).SignTicket(goldenTicket()))
		requireSentinel(t, err, ErrBadSignature)
	})
}

func TestKeyHeader(t *testing.T) {
	t.Parallel()
	// Each key's header is computed once, when the keyring is made.
	k := testRing(t, "k1:"+secret1+","+strings.Repeat("K", MaxKeyIDLen)+":"+secret2)
	require.Equal(t, goldenHeaderK1, k.keys[0].header)
	require.Equal(t, `{"alg":"HS256","kid":"KKKKKKKKKKKKKKKK","typ":"JWT"}`, segment(t, k.keys[1].header+"..", 0))
	require.Equal(t, `{"alg":"HS256","kid":"d1","typ":"JWT"}`, segment(t, DeriveKeyring("x").keys[0].header+"..", 0))
}
