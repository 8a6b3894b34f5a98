package memo_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/memo"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := memo.New[string](16)
	_, ok := m.Get("a", now)
	require.False(t, ok, "nothing remembered")
	m.Put("a", "alice", now.Add(time.Minute))
	v, ok := m.Get("a", now)
	require.True(t, ok)
	require.Equal(t, "alice", v)
	_, ok = m.Get("a", now.Add(time.Minute))
	require.False(t, ok, "good until the time given, exclusive")
	_, ok = m.Get("b", now)
	require.False(t, ok)
}

func TestTokensBounded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	m := memo.New[int](64)
	for i := range 1000 {
		m.Put(strconv.Itoa(i), i, now.Add(time.Hour))
		require.LessOrEqual(t, m.Len(), 64)
	}
	v, ok := m.Get("999", now)
	require.True(t, ok, "the last one put is there")
	require.Equal(t, 999, v)
}

func BenchmarkTokensGet(b *testing.B) {
	m := memo.New[int](0)
	tok := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjdXN0b21lci0xMjM0NSIsImV4cCI6MTc2NzIyNTYwMCwiaWF0IjoxNzY3MjIyMDAwfQ.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dQ"
	now := time.Now()
	m.Put(tok, 1, now.Add(time.Hour))
	for b.Loop() {
		if _, ok := m.Get(tok, now); !ok {
			b.Fatal("miss")
		}
	}
}
