package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestDemoStepsRunAsPasted: `make run` is `flashline serve --demo` with the
// development secrets; the steps it prints, run in order by sh as a user
// pastes them, join the waiting room before the open and see it wait, get
// admitted (solving the challenge), reserve and replay, pay, see the order,
// and have a second customer hold and cancel. And again, as a second `make
// run` on the same development database, after the page's customer bought in
// the browser: the steps end as the first time did.
func TestDemoStepsRunAsPasted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flashline serve process and waits for its demo sale to open (20 s), twice")
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

	t.Run("first", func(t *testing.T) { runDemo(t, env, false) })
	t.Run("again after the page", func(t *testing.T) { runDemo(t, env, true) })
}

// runDemo starts `serve --demo`, pastes the steps it prints into sh and
// checks their answers. pageFirst: the page's customer (the browser link's
// token) joins and reserves first, as the page does.
func runDemo(t *testing.T, env []string, pageFirst bool) {
	serve := exec.Command(testserver.Binary(t), "serve", "--demo", "--addr", "127.0.0.1:0")
	serve.Env = env
	var logs strings.Builder
	serve.Stderr = &logs
	stdout, err := serve.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, serve.Start())
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	}()

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
	require.Regexp(t, `opens in 20 s \(at \d{4}-\d\d-\d\dT`, out)
	start := strings.Index(out, "  # The demo's values")
	end := strings.Index(out, "\nThe tokens and secrets above")
	require.True(t, start >= 0 && end > start, "no steps in:\n%s", out)
	// Pasted: the lines as printed, their two-space indent removed.
	var steps strings.Builder
	for line := range strings.Lines(out[start:end]) {
		steps.WriteString(strings.TrimPrefix(line, "  "))
	}
	script := steps.String()
	if pageFirst {
		// The page's customer holds a unit first, with the page's token
		// (the browser link's): the steps' values and functions, then
		// what the page does.
		page := regexp.MustCompile(`/wait#token=(\S+)`).FindStringSubmatch(out)
		require.NotNil(t, page, "no page link in:\n%s", out)
		header := script[:strings.Index(script, "\n# 1.")]
		script = header + "\n" + `admit '` + page[1] + `' >/dev/null
PAGE_HOLD=$(curl -s -X POST "$BASE/sales/$SALE/reservations" -H "Authorization: Bearer ` + page[1] + `" \
  -H "X-Admission-Token: $ADMISSION_TOKEN" -H 'Idempotency-Key: page-1' -d '{}' | need reservationId)
echo "the page holds ${PAGE_HOLD:?}"
` + script
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-c", script)
	sh.Env = env
	sh.Dir = t.TempDir()
	answers, err := sh.CombinedOutput()
	got := string(answers)
	require.NoError(t, err, "the steps failed:\n%s\n\nthey were:\n%s", got, script)

	// In order: waiting before the open, the challenge, admitted. After
	// the page's purchase the sale is open: no wait, the challenge at once.
	waiting := strings.Index(got, `{"state":"waiting"`)
	challenge := strings.Index(got, `{"state":"challenge_required"`)
	admitted := strings.Index(got, `{"state":"admitted"`)
	require.True(t, challenge >= 0 && challenge < admitted, "want challenge_required, then admitted:\n%s", got)
	if !pageFirst {
		require.True(t, waiting >= 0 && waiting < challenge, "want waiting before the open, then challenge_required:\n%s", got)
	}
	m := regexp.MustCompile(`reservation: (res_\w+)`).FindStringSubmatch(got)
	require.NotNil(t, m, "no reservation:\n%s", got)
	res := m[1]
	require.Regexp(t, `(?s)HTTP/1.1 201 Created\r?\n.*Idempotent-Replayed: true.*"reservationId":"`+res+`"`, got, "the replay")
	require.Contains(t, got, `"outcome": "confirmed"`, "pay")
	require.Regexp(t, `"reservationId":"`+res+`",[^\n]*"state":"confirmed"[^\n]*"orderId":"ord_`, got, "the reservation, confirmed")
	require.Regexp(t, `\{"orderId":"ord_\w+","reservationId":"`+res+`"\}`, got, "confirm answers the order")
	require.Regexp(t, `"state":"cancelled"`, got, "bob's hold, cancelled")
	pending := 0
	if pageFirst {
		pending = 1 // the page's hold, not yet paid
	}
	require.Regexp(t, fmt.Sprintf(`"available":%d,"pending":%d,"confirmed":1,"expired":0,"cancelled":1,`, 199-pending, pending), got, "the admin's view")
	require.Contains(t, got, `"policy":"randomized_at_open"`)
	require.Regexp(t, `\{"saleId":"sale_\w+","seconds":300,`, got, "extend")
	require.NotContains(t, got, "no reservationId in the answer")
}

// TestDemoStepsStopLoudly: a step whose answer lacks what the next needs
// prints the API's answer, and the next step stops with a message instead of
// carrying on with an empty value.
func TestDemoStepsStopLoudly(t *testing.T) {
	t.Parallel()
	start, end := strings.Index(demoSteps, "# field NAME"), strings.Index(demoSteps, "# admit CUSTOMER_TOKEN")
	require.True(t, start >= 0 && end > start)
	script := demoSteps[start:end] + `
RESERVATION=$(echo '{"error":{"code":"limit_reached","message":"you already hold a reservation"}}' | need reservationId)
echo "reservation: ${RESERVATION:?no reservation: see the answer above}"
echo "carried on"
`
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	require.Error(t, err, "the steps went on:\n%s", out)
	require.Contains(t, string(out), `no reservationId in the answer: {"error":{"code":"limit_reached"`)
	require.Contains(t, string(out), "no reservation: see the answer above")
	require.NotContains(t, string(out), "carried on")
	require.NotContains(t, string(out), "reservation: \n")
}
