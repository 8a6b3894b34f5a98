package edgeconformance

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// tokenAt is a customer token as testserver.Token mints one (HS256, the
// test's JWT secret, good for an hour), issued at now rather than the
// machine's time.
func tokenAt(t testing.TB, customerID string, now time.Time) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": customerID, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString([]byte(testserver.JWTSecret))
	require.NoError(t, err)
	return tok
}

// eventually checks cond every 100 ms, in the test's goroutine, until it
// holds, and fails the test when it has not within settle, with the message
// format and args make when it fails (seen's values are then the last ones).
func eventually(t testing.TB, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(settle)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not so within %s: "+format, append([]any{settle}, args...)...)
		}
		<-tick.C
	}
}

// lastValue prints what a variable holds when it is printed, not when it
// was passed.
type lastValue func() any

func (l lastValue) String() string { return fmt.Sprintf("%+v", l()) }

// seen is *v as it is when a failure message is made.
func seen[T any](v *T) fmt.Stringer { return lastValue(func() any { return *v }) }

// wrongSolution is the smallest decimal that does not solve the challenge.
func wrongSolution(nonce string, bits int) string {
	for n := 0; ; n++ {
		s := strconv.Itoa(n)
		if roomtoken.LeadingZeroBits(sha256.Sum256([]byte(nonce+":"+s))) < bits {
			return s
		}
	}
}

// event is one server-sent event of a status stream: "status" with its
// data, "reconnect" with its retry, or "end" when the server closed it.
type event struct {
	Event string
	Data  string
	Retry int
}

// stream is an open status stream, its events read as they come.
type stream struct {
	t      testing.TB
	events chan event
}

// openStream opens a status stream at url as jwt's customer and checks it
// is one (200, text/event-stream, not cached, readable from any origin); it
// is closed when the test ends.
func openStream(t testing.TB, url, jwt string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	s := &stream{t: t, events: make(chan event, 64)}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var e event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.Event != "" {
					s.events <- e
				}
				e = event{}
			case strings.HasPrefix(line, "event: "):
				e.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.Data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "retry: "):
				e.Retry, _ = strconv.Atoi(strings.TrimPrefix(line, "retry: "))
			case strings.HasPrefix(line, ":"): // the heartbeat
			default:
				s.events <- event{Event: "garbled", Data: line}
			}
		}
		s.events <- event{Event: "end"}
	}()
	return s
}

// next is the stream's next event, within settle.
func (s *stream) next() event {
	s.t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			return event{Event: "end"}
		}
		return e
	case <-time.After(settle):
		s.t.Fatal("no event on the status stream")
		return event{}
	}
}

// status is the stream's next event, which must be a status.
func (s *stream) status() Status {
	s.t.Helper()
	e := s.next()
	require.Equal(s.t, "status", e.Event, "%+v", e)
	var st Status
	require.NoError(s.t, json.Unmarshal([]byte(e.Data), &st), e.Data)
	return st
}

// until reads statuses until one is in state, and returns it.
func (s *stream) until(state string) Status {
	s.t.Helper()
	for {
		if st := s.status(); st.State == state {
			return st
		}
	}
}
