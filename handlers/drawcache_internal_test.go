package handlers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDrawCacheBounded: the kept transcripts never exceed the cache's
// bytes; the least recently used goes first; one larger than the whole
// cache is not kept.
func TestDrawCacheBounded(t *testing.T) {
	d := newDrawTranscripts(nil, nil, 100, nil)
	doc := func(n int) *drawDoc { return &drawDoc{final: true, body: make([]byte, n)} }
	d.keep("a", doc(40))
	d.keep("b", doc(40))
	require.NotNil(t, d.cached("a")) // a is now the most recently used
	d.keep("c", doc(40))
	require.Nil(t, d.cached("b"), "the least recently used out")
	require.NotNil(t, d.cached("a"))
	require.NotNil(t, d.cached("c"))
	d.keep("big", doc(101))
	require.Nil(t, d.cached("big"))
	require.EqualValues(t, 80, d.bytes)
}

func TestETagMatches(t *testing.T) {
	const tag = `"abc"`
	for h, want := range map[string]bool{`"abc"`: true, `W/"abc"`: true, `"x", "abc-gzip"`: true, `*`: true,
		`"abd"`: false, `abc`: false, ``: false} {
		require.Equal(t, want, etagMatches(h, tag), h)
	}
}
