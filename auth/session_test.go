package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAdminSession(t *testing.T) {
	v, err := NewVerifier("secret", "admin-token")
	require.NoError(t, err)
	now := time.Now()
	s := v.AdminSession(now)
	require.True(t, v.IsAdminSession(s, now))
	require.True(t, v.IsAdminSession(s, now.Add(AdminSessionTTL-time.Second)))
	require.False(t, v.IsAdminSession(s, now.Add(AdminSessionTTL)), "expired")
	exp, mac, _ := strings.Cut(s, ".")
	for _, bad := range []string{"", ".", exp, exp + ".", "." + mac, exp + "." + mac + "A", "9" + s, strings.Repeat("1", 200) + "." + mac} {
		require.False(t, v.IsAdminSession(bad, now), "%q", bad)
	}
	// An expiry pushed beyond a session's life (a forged MAC aside) is refused.
	far := v.AdminSession(now.Add(48 * time.Hour))
	require.False(t, v.IsAdminSession(far, now))
	other, err := NewVerifier("secret", "new-admin-token")
	require.NoError(t, err)
	require.False(t, other.IsAdminSession(s, now), "a new admin token ends every session")
}
