package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testdb"
	"github.com/flashline/flashline/internal/testserver"
)

// TestDemoStepsRunAsPasted: `make run` is `flashline serve --demo` with the
// development secrets; the steps it prints, run in order by sh as a user
// pastes them, join the waiting room before the open and see it wait, get
// admitted (solving the challenge), reserve and replay, pay, see the order,
// and have a second customer hold and cancel.
func TestDemoStepsRunAsPasted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flashline serve process and waits for its demo sale to open (20 s)")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the demo's steps need curl")
	}
	t.Parallel()
	dbURL := testdb.New(t)
	// As `make run` starts it: the development secrets, nothing else.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLASHLINE_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	env = append(env, "DATABASE_URL="+dbURL, "FLASHLINE_ADMIN_TOKEN=dev-admin-token", "FLASHLINE_JWT_SECRET=dev-jwt-secret")
	serve := exec.Command(testserver.Binary(t), "serve", "--demo", "--addr", "127.0.0.1:0")
	serve.Env = env
	var logs strings.Builder
	serve.Stderr = &logs
	stdout, err := serve.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})

	// What it prints, up to the line after the steps.
	printed := make(chan string, 1)
	go func() {
		var out strings.Builder
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "The tokens and secrets above") {
				break
			}
		}
		printed <- out.String()
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var out string
	select {
	case out = <-printed:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve --demo printed no steps in 60 s; log:\n%s", logs.String())
	}
	start := strings.Index(out, "  # The demo's values")
	end := strings.Index(out, "\nThe tokens and secrets above")
	require.True(t, start >= 0 && end > start, "no steps in:\n%s", out)
	// Pasted: the lines as printed, their two-space indent removed.
	var steps strings.Builder
	for line := range strings.Lines(out[start:end]) {
		steps.WriteString(strings.TrimPrefix(line, "  "))
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", steps.String())
	sh.Env = env
	sh.Dir = t.TempDir()
	answers, err := sh.CombinedOutput()
	got := string(answers)
	require.NoError(t, err, "the steps failed:\n%s\n\nthey were:\n%s", got, steps.String())

	// In order: waiting before the open, the challenge, admitted.
	waiting := strings.Index(got, `{"state":"waiting"`)
	challenge := strings.Index(got, `{"state":"challenge_required"`)
	admitted := strings.Index(got, `{"state":"admitted"`)
	require.True(t, waiting >= 0 && waiting < challenge && challenge < admitted,
		"want waiting, then challenge_required, then admitted:\n%s", got)
	m := regexp.MustCompile(`reservation: (res_\w+)`).FindStringSubmatch(got)
	require.NotNil(t, m, "no reservation:\n%s", got)
	res := m[1]
	require.Regexp(t, `(?s)HTTP/1.1 201 Created\r?\n.*Idempotent-Replayed: true.*"reservationId":"`+res+`"`, got, "the replay")
	require.Contains(t, got, `"outcome": "confirmed"`, "pay")
	require.Regexp(t, `"reservationId":"`+res+`",[^\n]*"state":"confirmed"[^\n]*"orderId":"ord_`, got, "the reservation, confirmed")
	require.Regexp(t, `\{"orderId":"ord_\w+","reservationId":"`+res+`"\}`, got, "confirm answers the order")
	require.Regexp(t, `"state":"cancelled"`, got, "bob's hold, cancelled")
	require.Regexp(t, `"available":199,"pending":0,"confirmed":1,"expired":0,"cancelled":1,`, got, "the admin's view")
	require.Contains(t, got, `"policy":"randomized_at_open"`)
	require.Regexp(t, `\{"saleId":"sale_\w+","seconds":300,`, got, "extend")
}
