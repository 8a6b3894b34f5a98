package jobs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNotifyBackoff(t *testing.T) {
	require.Equal(t, time.Second, notifyBackoff(time.Second, 1))
	require.Equal(t, 2*time.Second, notifyBackoff(time.Second, 2))
	require.Equal(t, 8*time.Second, notifyBackoff(time.Second, 4))
	require.Equal(t, maxNotifyBackoff, notifyBackoff(time.Second, 30))
	require.Equal(t, maxNotifyBackoff, notifyBackoff(time.Second, 1<<30))
}
