package envflag_test

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/envflag"
)

func TestFlagOverVariableOverDefault(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"S": "from-env", "I": "7", "D": "3s", "B": "true", "BAD_I": "seven"}
	set := func(args ...string) (s string, i, bad int, d time.Duration, b bool) {
		e := envflag.New("test", func(k string) string { return vars[k] }, io.Discard)
		e.String(&s, "s", "S", "def", "a string")
		e.Int(&i, "i", "I", 1, "an int")
		e.Int(&bad, "bad", "BAD_I", 2, "an int whose variable is not one")
		e.Duration(&d, "d", "D", time.Second, "a duration")
		e.Bool(&b, "b", "B", "a bool")
		require.NoError(t, e.FS.Parse(args))
		return
	}
	s, i, bad, d, b := set()
	require.Equal(t, "from-env", s)
	require.Equal(t, 7, i)
	require.Equal(t, 2, bad, "a variable that does not parse leaves the default")
	require.Equal(t, 3*time.Second, d)
	require.True(t, b)
	s, i, _, d, b = set("-s", "flag", "-i", "9", "-d", "1m", "-b=false")
	require.Equal(t, "flag", s)
	require.Equal(t, 9, i)
	require.Equal(t, time.Minute, d)
	require.False(t, b)

	e := envflag.New("test", func(string) string { return "" }, io.Discard)
	var empty string
	e.String(&empty, "s", "S", "def", "a string")
	require.Equal(t, "def", empty, "an empty variable leaves the default")
	require.Contains(t, e.FS.Lookup("s").Usage, "($S)")
}
